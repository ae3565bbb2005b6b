#!/usr/bin/env python3
"""The emulator's noise model on the wall clock: per-request decode speeds of a server with SGLANG_EMU_NOISE on
and of one with it off, as a client on this machine sees them (its load included).

    python benchmarks/emulator_noise.py [--noise 0.3] [--period 0.05] [--requests 8] [--repeats 3]

Each repeat starts a fresh emulator (1000 tok/s, TTFT 1 ms), sends one uncounted request, then --requests
requests of 100 decode steps in a row. Prints min / median / max of the speeds (tok/s) and of the max/min spread
over the repeats. tests/test_emulator.py checks the same model on a simulated clock; this is the figure.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from local_emulator import Emulator  # noqa: E402

BODY = json.dumps({"prompt": "p", "max_tokens": 101, "ignore_eos": True})


def decode_speed(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    start = time.monotonic()
    conn.request("POST", "/v1/completions", BODY, {"Content-Type": "application/json"})
    conn.getresponse().read()
    conn.close()
    return 100 / (time.monotonic() - start)


def speeds(tmp: Path, requests: int, **env) -> list:
    emu = Emulator(tmp, decode_tok_s=1000, ttft_ms=1, **env).wait_ready()
    try:
        decode_speed(emu.port)
        return [decode_speed(emu.port) for _ in range(requests)]
    finally:
        emu.stop()


def spread(label: str, runs: list) -> None:
    every = [s for run in runs for s in run]
    ratios = [max(run) / min(run) for run in runs]
    print(
        f"{label}: tok/s min {min(every):.0f} / median {statistics.median(every):.0f} / max {max(every):.0f}; "
        f"max/min in a repeat {min(ratios):.2f} / {statistics.median(ratios):.2f} / {max(ratios):.2f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--period", type=float, default=0.05)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        noisy = [
            speeds(Path(tmp), args.requests, noise=args.noise, noise_period_s=args.period) for _ in range(args.repeats)
        ]
        steady = [speeds(Path(tmp), args.requests) for _ in range(args.repeats)]
    spread(f"noise {args.noise}, period {args.period} s", noisy)
    spread("noise off", steady)
    return 0


if __name__ == "__main__":
    sys.exit(main())
