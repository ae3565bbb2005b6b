#!/usr/bin/env python3
"""Does compare's verdict find a true difference and refuse to call none, at a given noise? (issue 42 item 4)

    python benchmarks/ab_noise.py [--noise 0.03] [--period 0.5] [--effect 0.05] [--max-repeats 8] [--trials 3]

LAB: three emulated SGLang servers on this machine (`python -m sglang_deploy.emulator`, the noise model turned up:
SGLANG_EMU_NOISE, its speed moving every --period seconds): A and A2 configured alike, B --effect faster (decode
and aggregate). Each round benchmarks the three with the project's client (host/bench, the sglang_bench module's
engine), every other round in reverse order, as compare interleaves its deploys. After each round from the third
on (noise.MIN_RUNS), noise.verdict (compare's and tune's rule) judges B against A and A2 against A on the level's
output tok/s. A trial gives the repeats from which B was called better at every later verdict (none: not within
--max-repeats) and the verdicts that called A2 different. The numbers are synthetic: they test the statistics and the pipeline, not a GPU.
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

from sglang_deploy.compare import noise  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils.bench import run_benchmark  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import wait_ready  # noqa: E402
from local_emulator import free_port  # noqa: E402

DECODE_TOK_S, AGGREGATE_TOK_S = 172.0, 2156.0


def start(speedup: float, noise_sd: float, period: float, seed: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "collections")]),
        "SGLANG_EMU_LOAD_S": "0",
        "SGLANG_EMU_WARMUP_S": "0",
        "SGLANG_EMU_TTFT_MS": "20",
        "SGLANG_EMU_DECODE_TOK_S": str(DECODE_TOK_S * speedup),
        "SGLANG_EMU_AGGREGATE_TOK_S": str(AGGREGATE_TOK_S * speedup),
        "SGLANG_EMU_NOISE": str(noise_sd),
        "SGLANG_EMU_NOISE_PERIOD_S": str(period),
        "SGLANG_EMU_NOISE_SEED": str(seed),
    }
    cmd = [sys.executable, "-m", "sglang_deploy.emulator", "--model-path", "lab/model", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, timeout=30)
    return proc, url


def measure(url: str, args: argparse.Namespace) -> float:
    res = run_benchmark(
        url,
        concurrency=[args.concurrency],
        requests=args.requests,
        input_len=64,
        output_len=args.output_len,
        warmup=1,
    )
    return res["levels"][0]["output_throughput_tok_s"]


def trial(number: int, args: argparse.Namespace, logs: Path) -> dict:
    servers = {}
    try:
        for i, (name, speedup) in enumerate((("A", 1.0), ("B", 1.0 + args.effect), ("A2", 1.0))):
            servers[name] = start(speedup, args.noise, args.period, 1000 * number + i, logs / f"{number}-{name}.log")
        values: dict = {name: [] for name in servers}
        b_calls, called_same = [], []
        for r in range(1, args.max_repeats + 1):
            for name in list(servers) if r % 2 else list(servers)[::-1]:
                values[name].append(measure(servers[name][1], args))
            if r < noise.MIN_RUNS:
                continue
            ab, aa = noise.verdict(values["A"], values["B"]), noise.verdict(values["A"], values["A2"])
            b_calls.append((r, ab["verdict"]))
            called_same.append((r, aa["verdict"]))
        # found: from the round on which B was called better at every later verdict too (a lucky early call that
        # a later round takes back does not count)
        later = [r for i, (r, _) in enumerate(b_calls) if all(v == noise.BETTER for _, v in b_calls[i:])]
        return {
            "trial": number,
            "found_at": later[0] if later else None,
            "b_calls": b_calls,
            "a2_calls": called_same,
            "a2_false_calls": [r for r, v in called_same if v != noise.SAME],
            "values": values,
            "final": {"B": noise.verdict(values["A"], values["B"]), "A2": noise.verdict(values["A"], values["A2"])},
        }
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=10)


def main(argv: list | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--noise", type=float, default=0.03, help="the emulator's speed sd (default 0.03)")
    ap.add_argument("--period", type=float, default=0.5, help="seconds between speed moves (default 0.5)")
    ap.add_argument("--effect", type=float, default=0.05, help="B's true speed-up (default 0.05: 5%%)")
    ap.add_argument("--max-repeats", type=int, default=8, help="rounds per trial (default 8)")
    ap.add_argument("--trials", type=int, default=3, help="independent trials, new seeds each (default 3)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--json", metavar="PATH", help="write every value and verdict here")
    args = ap.parse_args(argv)
    if not (
        0 <= args.noise < 1 and args.period > 0 and args.effect > -1 and args.max_repeats >= 2 and args.trials >= 1
    ):
        ap.error("need 0 <= --noise < 1, --period > 0, --effect > -1, --max-repeats >= 2, --trials >= 1")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    print(f"LAB: emulated SGLang servers, synthetic numbers. {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC,")
    print(f"commit {commit.stdout.strip() or '?'}: {shlex.join(['python', 'benchmarks/ab_noise.py', *sys.argv[1:]])}")
    print(
        f"noise sd {args.noise:.0%} every {args.period:g} s; B {args.effect:+.0%}; c={args.concurrency}, "
        f"{args.requests} requests of {args.output_len} tokens a run; figure: output tok/s"
    )
    with tempfile.TemporaryDirectory() as tmp:
        results = [trial(n, args, Path(tmp)) for n in range(1, args.trials + 1)]
    print(
        "| trial | B (true difference) called better from repeats | A2 (none) called different at repeats | final B | final A2 |"
    )
    print("|---:|---:|---|---|---|")
    for t in results:
        print(
            f"| {t['trial']} | {t['found_at'] or f'not within {args.max_repeats}'} | "
            f"{', '.join(map(str, t['a2_false_calls'])) or 'never'} | "
            f"{noise.describe(t['final']['B'], 'B', 'A')} | {noise.describe(t['final']['A2'], 'A2', 'A')} |"
        )
    found = [t["found_at"] for t in results if t["found_at"]]
    if found:
        print(
            f"B found in {len(found)} of {len(results)} trials, at {min(found)} / {statistics.median(found):g} / "
            f"{max(found)} repeats (min / median / max)"
        )
    else:
        print(f"B not found in any of {len(results)} trials within {args.max_repeats} repeats")
    checks = sum(len(t["a2_calls"]) for t in results)
    false = sum(len(t["a2_false_calls"]) for t in results)
    print(f"A2 called different in {false} of {checks} verdicts (after each round from the third on)")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "trials": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
