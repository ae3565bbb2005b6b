"""How accurate and how cheap is the benchmark client? Runs the engine (ansible_collections.sglang.deploy.plugins.module_utils.bench) against the
emulated server set to known rates and prints reported vs configured figures and the CPU time used by
the client (this process, resource.getrusage) and by the emulator (/proc).

    python calibration/bench_client.py [--levels 1,32,256] [--output-len 256] [--accept-lengths 1,3]

Configured: 172 tok/s per stream, TTFT 80 ms; accept length 1 (one token per chunk) and 3 (NEXTN,
3 tokens per chunk). The emulator runs with --max-running-requests = the largest level, so no request
queues server-side. Per level it prints decode tok/s per request (mean, p50) and its error against 172,
TTFT p50 vs 80 ms, tokens per chunk and accept length vs the expected values, aggregate tok/s, the
number of SSE chunks per second the client parsed, and client CPU seconds per wall second.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path[:0] = [SRC, *(str(Path(__file__).resolve().parents[1] / d) for d in ("collections", "benchmarks"))]

from local_emulator import free_port, proc_cpu_s  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils import bench  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import wait_ready  # noqa: E402

RATE, TTFT_MS = 172.0, 80.0


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def scenario(accept: float, levels: list, output_len: int, input_len: int, factor: int) -> None:
    port = free_port()
    flags = [
        "--model-path",
        "emulated/model",
        "--served-model-name",
        "emu",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enable-metrics",
        "--max-running-requests",
        str(max(levels)),
    ]
    if accept > 1:
        flags += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(math.ceil(accept))]
    env = {
        **os.environ,
        "SGLANG_EMU_LOAD_S": "0.2",
        "SGLANG_EMU_WARMUP_S": "0.2",
        "SGLANG_EMU_DECODE_TOK_S": str(RATE),
        "SGLANG_EMU_TTFT_MS": str(TTFT_MS),
        "SGLANG_EMU_ACCEPT_LENGTH": str(accept),
        "PYTHONPATH": SRC,
    }
    emu = subprocess.Popen(
        [sys.executable, "-m", "sglang_deploy.emulator", *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, timeout=30, sleep=0.1)
        steps = 1 + math.ceil((output_len - 1) / accept)  # the prefill token, then decode steps
        print(
            f"\n== accept length {accept:g} (configured: {RATE:g} tok/s per stream, TTFT {TTFT_MS:g} ms, "
            f"{output_len} output tokens -> expected tokens/chunk {output_len / steps:.3f}, "
            f"accept by counters {output_len / (steps - 1):.3f})"
        )
        print(
            f"{'conc':>5} {'reqs':>5} {'dec mean':>9} {'err%':>6} {'dec p50':>8} {'err%':>6} "
            f"{'ttft p50':>8} {'tok/chk':>7} {'accept':>7} {'agg tok/s':>9} {'chunks/s':>9} "
            f"{'cli cpu s':>9} {'cli cpu%':>8} {'emu cpu%':>8}"
        )
        for c in levels:
            n = factor * c
            cpu0, emu0, t0 = _cpu_self(), proc_cpu_s(emu.pid), time.perf_counter()
            result = bench.run_benchmark(
                url,
                concurrency=[c],
                requests=n,
                input_len=input_len,
                output_len=output_len,
                warmup=min(c, 8),
                timeout=120,
            )
            wall = time.perf_counter() - t0
            cpu, emu_cpu = _cpu_self() - cpu0, proc_cpu_s(emu.pid) - emu0
            m = result["levels"][0]
            d = m["decode_tok_s_per_request"]
            chunks = m["output_tokens"] / m["tokens_per_chunk"]["aggregate"]
            spec = m["spec_accept_length"]
            print(
                f"{c:>5} {m['completed']:>5} {d['mean']:>9.2f} {100 * (d['mean'] / RATE - 1):>+6.2f} "
                f"{d['p50']:>8.2f} {100 * (d['p50'] / RATE - 1):>+6.2f} "
                f"{m['ttft_ms']['p50']:>8.1f} {m['tokens_per_chunk']['aggregate']:>7.3f} "
                f"{(spec or {}).get('value') or float('nan'):>7.3f} {m['output_throughput_tok_s']:>9.0f} "
                f"{chunks / m['wall_s']:>9.0f} {cpu:>9.2f} {100 * cpu / wall:>8.1f} {100 * emu_cpu / wall:>8.1f}"
            )
            if m["failed"] or m["output_len_mismatch"]["count"]:
                print(f"      failed {m['failed']} {m['errors']}, mismatches {m['output_len_mismatch']}")
    finally:
        emu.terminate()
        emu.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,32,256")
    ap.add_argument("--accept-lengths", default="1,3")
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--requests-factor", type=int, default=2, help="requests per level = factor x concurrency")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; client and emulator on this host")
    for accept in (float(a) for a in args.accept_lengths.split(",")):
        scenario(accept, bench.parse_concurrency(args.levels), args.output_len, args.input_len, args.requests_factor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
