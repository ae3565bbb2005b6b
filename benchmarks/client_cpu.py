#!/usr/bin/env python3
"""Is the client ever the bottleneck? Our benchmark client against `python -m sglang.bench_serving`'s, on one core
each, against the same emulator on another core, in the same run (issue 22 item 7).

    SGLANG_DEPLOY_BENCH_SERVING_PYTHON=VENV/bin/python python benchmarks/client_cpu.py [--levels 8,24] \
        [--rate 500] [--output-len 128] [--repeats 3]

VENV holds the real bench_serving (tests/bench_serving-requirements.txt). The emulator streams one token per chunk
at --rate tokens/s per stream with no aggregate limit, so a level of c streams offers c x rate chunks/s. Each client
runs pinned to CPU 0 (os.sched_setaffinity), the emulator to CPU 1. Per level each client runs c and 3c requests
of the same ShareGPT file (our prompts, a word-level tokenizer for bench_serving: bench_serving_run.py);
the difference of the two runs' CPU seconds over the difference of their chunks is the client's CPU per chunk
(its start, warm-up and tokenizer costs cancel), and 1 s / that is the most chunks/s it could parse on one core.
The chunks/s it held is the 3c run's output tokens / its duration, against what the emulator's schedule allows
(c x rate less the TTFT waits: 0.96 of c x rate at the defaults). Repeats alternate
which tool goes first; the table gives min / median / max.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]  # the package; the collection (its link)

from bench_serving_run import Stepped, emulator_flags, write_sharegpt, write_word_tokenizer  # noqa: E402
from local_emulator import free_port, proc_cpu_s  # noqa: E402

from ansible_collections.sglang.deploy.plugins.module_utils.readiness import wait_ready  # noqa: E402

CLIENT_CPU, EMULATOR_CPU = 0, 1
TTFT_MS, INPUT_LEN, SEED = 10.0, 64, 42


def _pin(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def ours_child(url: str, dataset: str, output_len: int, levels: list, emu_pid: int) -> None:
    """(In the pinned child.) Our engine, one run per (concurrency, requests): a LEVEL line with CPU s, tokens, s."""
    from ansible_collections.sglang.deploy.plugins.module_utils import bench

    for c, n in levels:
        cpu0, emu0 = _cpu_self(), proc_cpu_s(emu_pid)
        result = bench.run_benchmark(
            url,
            dataset_name="sharegpt",
            dataset_path=dataset,
            sharegpt_output_len=output_len,
            seed=SEED,
            concurrency=[c],
            requests=n,
            warmup=1,
            timeout=120,
        )
        m = result["levels"][0]
        line = {
            "cpu_s": _cpu_self() - cpu0,
            "emu_cpu_s": proc_cpu_s(emu_pid) - emu0,
            "tokens": m["output_tokens"],
            "duration_s": m["wall_s"],
        }
        print("LEVEL", json.dumps(line), flush=True)


def run_ours(url: str, dataset: Path, output_len: int, levels: list, emu_pid: int) -> list:
    levels_json = json.dumps(levels)
    cmd = [sys.executable, __file__, "--ours-child", url, str(dataset), str(output_len), levels_json, str(emu_pid)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, preexec_fn=_pin(CLIENT_CPU)).stdout
    return [json.loads(line[6:]) for line in out.splitlines() if line.startswith("LEVEL ")]


class Theirs:
    """bench_serving's CLI in one pinned process (bench_serving_run.py's Stepped), a level per request."""

    def __init__(self, python: str, folder: Path, url: str, dataset: Path, tokenizer: Path, output_len, levels):
        common = emulator_flags(url, "emu", tokenizer, dataset, output_len, SEED)
        flags = [["--max-concurrency", str(c), "--num-prompts", str(n)] for c, n in levels]
        self.per_repeat = len(flags)
        out, log = folder / "bench_serving.jsonl", folder / "bench_serving.log"
        self.run = Stepped(python, out, flags * 99, common, log, preexec_fn=_pin(CLIENT_CPU))

    def repeat(self, emu_pid: int) -> list:
        out = []
        for _ in range(self.per_repeat):
            emu0 = proc_cpu_s(emu_pid)
            row, spent = self.run.level()
            emu_cpu = proc_cpu_s(emu_pid) - emu0
            tokens, duration = row["total_output_tokens"], row["duration"]
            out.append({"cpu_s": spent["cpu_s"], "emu_cpu_s": emu_cpu, "tokens": tokens, "duration_s": duration})
        return out

    def close(self) -> None:
        self.run.close()


def figures(runs: list, c: int, rate: float, output_len: int) -> dict:
    """From the c-request and 3c-request runs of one level: CPU us per chunk, the most chunks/s on one core,
    chunks/s held and its share of what the emulator's schedule allows: c streams of output_len tokens, each
    TTFT_MS then output_len - 1 tokens at rate (c x rate less the first-token waits)."""
    small, big = runs
    per_chunk = (big["cpu_s"] - small["cpu_s"]) / (big["tokens"] - small["tokens"])
    emu_per_chunk = (big["emu_cpu_s"] - small["emu_cpu_s"]) / (big["tokens"] - small["tokens"])
    held = big["tokens"] / big["duration_s"]
    return {
        "us": per_chunk * 1e6,
        "max": 1 / per_chunk if per_chunk > 0 else float("inf"),
        "held": held,
        "share": held / (c * output_len / (TTFT_MS / 1000 + (output_len - 1) / rate)),
        "emu_us": emu_per_chunk * 1e6,
    }


def spread(values: list, fmt: str) -> str:
    return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--ours-child":
        url, dataset, output_len, levels, emu_pid = sys.argv[2:7]
        ours_child(url, dataset, int(output_len), json.loads(levels), int(emu_pid))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="8,24", help="concurrent streams per level")
    ap.add_argument("--rate", type=float, default=500.0, help="tokens (= chunks) per second per stream")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    python = os.environ.get("SGLANG_DEPLOY_BENCH_SERVING_PYTHON") or sys.executable
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs 2 CPUs: the clients run on CPU 0, the emulator on CPU 1")
    concurrency = [int(c) for c in args.levels.split(",")]
    pairs = [(c, n) for c in concurrency for n in (c, 3 * c)]
    folder = Path(tempfile.mkdtemp(prefix="client_cpu-"))
    dataset = write_sharegpt(folder / "sharegpt.json", [f"{i} " + "word " * (INPUT_LEN - 1) for i in range(256)])
    tokenizer = write_word_tokenizer(folder, dataset)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "collections")]),
        "SGLANG_EMU_LOAD_S": "0.2",
        "SGLANG_EMU_WARMUP_S": "0.1",
    }
    env |= {"SGLANG_EMU_DECODE_TOK_S": str(args.rate), "SGLANG_EMU_TTFT_MS": str(TTFT_MS)}
    flags = ["--model-path", "emu/model", "--served-model-name", "emu", "--port", str(port)]
    flags += ["--max-running-requests", str(max(concurrency))]
    emu = subprocess.Popen(
        [sys.executable, "-m", "sglang_deploy.emulator", *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_pin(EMULATOR_CPU),
    )
    url = f"http://127.0.0.1:{port}"
    theirs = None
    results = {"ours": {c: [] for c in concurrency}, "bench_serving": {c: [] for c in concurrency}}
    try:
        wait_ready(url, timeout=30, sleep=0.1)
        theirs = Theirs(python, folder, url, dataset, tokenizer, args.output_len, pairs)
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        load = os.getloadavg()[0]
        for r in range(args.repeats):
            order = ("ours", "bench_serving") if r % 2 == 0 else ("bench_serving", "ours")
            for tool in order:
                runs = (
                    run_ours(url, dataset, args.output_len, pairs, emu.pid)
                    if tool == "ours"
                    else theirs.repeat(emu.pid)
                )
                for i, c in enumerate(concurrency):
                    results[tool][c].append(figures(runs[2 * i : 2 * i + 2], c, args.rate, args.output_len))
    finally:
        if theirs is not None:
            theirs.close()
        emu.terminate()
        emu.wait(10)
    cmd = "python benchmarks/client_cpu.py " + shlex.join(sys.argv[1:])
    print(f"{started}, {os.cpu_count()} CPUs, load average {load:.1f} at the start; {datetime.date.today()}")
    print(f"$ {cmd}")
    print(
        f"emulator: {args.rate:g} tok/s per stream (1 token per chunk), TTFT {TTFT_MS:g} ms, "
        f"{args.output_len} output tokens; {args.repeats} repeats, min/median/max"
    )
    print()
    print(
        "| client | streams | offered chunks/s | CPU us per chunk | most chunks/s on one core | chunks/s held | held/schedule | emulator CPU us per chunk |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tool in ("ours", "bench_serving"):
        for c in concurrency:
            rows = results[tool][c]
            print(
                f"| {tool} | {c} | {c * args.rate:.0f} | {spread([x['us'] for x in rows], '.1f')} | "
                f"{spread([x['max'] for x in rows], '.0f')} | {spread([x['held'] for x in rows], '.0f')} | "
                f"{spread([x['share'] for x in rows], '.2f')} | {spread([x['emu_us'] for x in rows], '.1f')} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
