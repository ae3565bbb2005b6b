#!/usr/bin/env python3
"""Does bench_serving's new connection per request raise its TTFT under concurrency? Ours, bench_serving and
bench_serving with kept-alive connections, side by side on the emulator (issue 22: on the H200 at c=8 ours read a
15% lower TTFT mean, results/gpu-h200/parity-2026-12-02-19e40ab).

    SGLANG_DEPLOY_BENCH_SERVING_PYTHON=VENV/bin/python python benchmarks/ttft_connect.py [--levels 1:16,8:64] \
        [--rate 200] [--ttft-ms 40] [--output-len 64] [--repeats 3]

VENV holds the real bench_serving (tests/bench_serving-requirements.txt). bench_serving opens one aiohttp session,
so one TCP connection, per request and starts its TTFT clock before the connect; ours keeps one connection per
concurrent worker, opened before the level. The third tool is bench_serving with its session factory patched to
reuse one session (bench_serving_run.py --keepalive) and a warm-up of as many requests as the level's
concurrency, which opens its connections before the clock. The emulator sends every stream's first token --ttft-ms
after the request arrives, then --rate tokens/s, whatever the client: a tool's TTFT above --ttft-ms is its own
client's time. The clients run one at a time, each pinned to CPU 0, the emulator to CPU 1; the three take turns,
the first rotating per repeat (give --repeats a multiple of 3 for each tool in each place equally). Prints min /
median / max per tool and level.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]  # the package; the collection (its link)

from bench_serving_run import Stepped, emulator_flags, write_sharegpt, write_word_tokenizer  # noqa: E402
from local_emulator import Emulator  # noqa: E402

from ansible_collections.sglang.deploy.plugins.module_utils.bench.workload import build_prompt  # noqa: E402

CLIENT_CPU, EMULATOR_CPU, INPUT_LEN, SEED = 0, 1, 64, 42
TOOLS = ("ours", "bench_serving", "bench_serving kept-alive")


def _pin():
    os.sched_setaffinity(0, {CLIENT_CPU})


def theirs(python: str, folder: Path, url: str, dataset: Path, tokenizer: Path, args, keepalive: bool) -> Stepped:
    """bench_serving imported once in a pinned process, one level per level() (bench_serving_run.py)."""
    name = "kept" if keepalive else "theirs"
    common = emulator_flags(url, "qwen", tokenizer, dataset, args.output_len, SEED)
    # kept alive: a warm-up as wide as the level opens its connections before the clock, as ours does before a level
    warm = (lambda c: ["--warmup-requests", str(c)]) if keepalive else (lambda c: [])
    flags = [["--max-concurrency", str(c), "--num-prompts", str(n), *warm(c)] for c, n in args.levels] * args.repeats
    out, log = folder / f"{name}.jsonl", folder / f"{name}.log"
    return Stepped(python, out, flags, common, log, keepalive=keepalive, preexec_fn=_pin)


def ours(url: str, dataset: Path, args, c: int, n: int, out: Path) -> float:
    cmd = [sys.executable, "-m", "sglang_deploy.cli", "bench", "--url", url, "--model", "qwen"]
    cmd += ["--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--sharegpt-output-len", str(args.output_len)]
    cmd += ["--seed", str(SEED), "--warmup", "1", "--concurrency", str(c), "--num-prompts", str(n), "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "collections")])}
    subprocess.run(cmd, check=True, capture_output=True, env=env, preexec_fn=_pin)
    return json.loads(out.read_text())["levels"][0]["ttft_ms"]["mean"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1:16,8:64", help="concurrency:requests, comma-separated")
    ap.add_argument("--rate", type=float, default=200.0, help="tokens/s per stream (the H200's dense-large: ~190)")
    ap.add_argument("--ttft-ms", type=float, default=40.0)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    args.levels = [tuple(int(x) for x in item.split(":")) for item in args.levels.split(",")]
    python = os.environ.get("SGLANG_DEPLOY_BENCH_SERVING_PYTHON")
    if not python:
        sys.exit(
            "set SGLANG_DEPLOY_BENCH_SERVING_PYTHON to a Python with sglang (tests/bench_serving-requirements.txt)"
        )
    folder = Path(tempfile.mkdtemp(prefix="ttft-connect-"))
    count = max(n for _, n in args.levels)
    dataset = write_sharegpt(folder / "sharegpt.json", [build_prompt(i, INPUT_LEN) for i in range(count + 1)])
    tokenizer = write_word_tokenizer(folder, dataset)
    emu = Emulator(folder, decode_tok_s=args.rate, ttft_ms=args.ttft_ms).wait_ready()
    os.sched_setaffinity(emu.proc.pid, {EMULATOR_CPU})
    plain = theirs(python, folder, emu.url, dataset, tokenizer, args, keepalive=False)
    kept = theirs(python, folder, emu.url, dataset, tokenizer, args, keepalive=True)
    ttft: dict = {(tool, c): [] for tool in TOOLS for c, _ in args.levels}
    try:
        for rep in range(args.repeats):
            for c, n in args.levels:
                order = TOOLS[rep % 3 :] + TOOLS[: rep % 3]
                for tool in order:
                    if tool == "ours":
                        value = ours(emu.url, dataset, args, c, n, folder / f"ours-{c}-{rep}.json")
                    else:
                        value = (plain if tool == "bench_serving" else kept).level()[0]["mean_ttft_ms"]
                    ttft[(tool, c)].append(value)
    finally:
        plain.close()
        kept.close()
        emu.stop()
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    print(f"# TTFT on the emulator, {stamp}: `{shlex.join(['benchmarks/ttft_connect.py', *sys.argv[1:]])}`")
    print(f"emulator TTFT {args.ttft_ms} ms, {args.rate:g} tok/s per stream, {args.output_len} output tokens, ")
    print(f"{args.repeats} repeats; TTFT mean ms min / median / max, and the client's own (median - {args.ttft_ms:g})")
    print("\n| c | requests | " + " | ".join(TOOLS) + " |\n|---|---|" + "---|" * len(TOOLS))
    for c, n in args.levels:
        cells = []
        for tool in TOOLS:
            v = sorted(ttft[(tool, c)])
            med = statistics.median(v)
            cells.append(f"{v[0]:.1f} / {med:.1f} / {v[-1]:.1f} (+{med - args.ttft_ms:.1f})")
        print(f"| {c} | {n} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
