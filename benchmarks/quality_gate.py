#!/usr/bin/env python3
"""What the quality gate adds to a deploy (issue 49's goal: at most 10 s), on the lab's emulated server: the gate
(ansible_collections.sglang.deploy.plugins.module_utils.quality.gate: 12 questions at once, then 4 fingerprints one after another) against a fresh
emulator at the lab's rates (172 tok/s decode, 2156 tok/s aggregate, TTFT 80 ms), with and without a reference.

    python benchmarks/quality_gate.py [--repeats 5]

Prints min / median / max seconds over the repeats, the date and this command. EMULATED: the figures say what the
gate's requests cost at those rates, not what a GPU does (docs/quality.md and results/gpu-h100/quality-2026-12-06
have the real-SGLang figures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]  # the package; the collection (its link)

from local_emulator import Emulator  # noqa: E402

from ansible_collections.sglang.deploy.plugins.module_utils import quality  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    times: dict = {"no reference": [], "with a reference": []}
    with tempfile.TemporaryDirectory() as tmp:
        emu = Emulator(Path(tmp), decode_tok_s=172, aggregate_tok_s=2156, ttft_ms=80).wait_ready()
        try:
            reference = None
            for _ in range(args.repeats):
                for label in times:
                    start = time.monotonic()
                    found = quality.gate(emu.url, "lab", reference=reference if label != "no reference" else None)
                    times[label].append(time.monotonic() - start)
                    if not found["passed"]:
                        print(f"the gate failed on the emulator: {found['problems']}", file=sys.stderr)
                        return 1
                    reference = found["fingerprint"]
        finally:
            emu.stop()
    print(
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, python benchmarks/quality_gate.py --repeats {args.repeats}"
    )
    print("EMULATED server (synthetic rates): seconds the gate took")
    for label, runs in times.items():
        print(f"  {label}: min {min(runs):.2f} / median {statistics.median(runs):.2f} / max {max(runs):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
