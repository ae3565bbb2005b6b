#!/usr/bin/env python3
"""Our trace replay against `python -m sglang.bench_serving --dataset-name mooncake` on one emulated server (issue
51, item 3): the same trace file, the same server, alternating A/B, --repeats runs each.

    SGLANG_DEPLOY_BENCH_SERVING_PYTHON=VENV/bin/python .venv/bin/python benchmarks/trace_parity.py \\
        [--requests 120] [--rate 8] [--repeats 3] [--json OUT.json]

VENV holds the real bench_serving (tests/bench_serving-requirements.txt: sglang 0.5.16). Two traces, written with
the project's trace writer (host/bench/trace.py) from tests/test_traffic_replay.py's seeded generator (Poisson
arrivals at --rate, prompts of 40 to 1,500 tokens whose first 1,024-token prefix is one of 3 shared ones, outputs of
2 to 40 tokens):

* `shaped`: that trace as it is (1 to 3 hash ids a request);
* `matched`: the same arrivals and outputs, one hash id a request (its group's first: 3 shared prompts) and the
  input length bench_serving's replay sends for one id (THEIR_WORDS: 138 words), so both tools send the same
  tokens and every figure, token counts included, can agree.

The server is one local emulator (benchmarks/local_emulator.py), its timing deterministic as in
tests/test_bench_serving_real.py: every stream's first token --ttft-ms after the request arrives, then one token
every 1 / --decode-tok-s s, whatever the prompt or client; what differs is how each client sends and reads. The
clients run one at a time, pinned to CPU 0, the emulator to CPU 1. Ours runs in this process
(bench.run_benchmark, the API `sglang-deploy bench --dataset-name trace` wraps), bench_serving in a child that
imports it once (bench_serving_run.Stepped). The emulator's request log (POST /configure_logging, read by
host/bench/capture.py) gives each request's arrival and token counts as the server saw them, for both tools alike.

What differs by definition, so not a replay fault:

* Input tokens (shaped trace): bench_serving 0.5.16 builds a prompt from the hash ids alone, `"{id}" + "hi" x 128`
  per id, then "Tell me a story based on this context." and, with a tokenizer without a chat template (ours is
  bench_serving_run's word-level one, counting as the emulator does), "user: Round 1: " before it: 127 n + 11
  words for n ids, whatever input_length says; ours sends input_length tokens (blocks of 512). On a GPU its
  prefill is then about a quarter of the trace's; on the emulator TTFT does not depend on the prompt.
* TTFT: bench_serving starts its clock before it makes a new aiohttp session and connection per request; ours
  right before the request is written on a kept-alive connection (tests/test_bench_serving_real.py; on a quiet
  machine a millisecond or two on loopback, more under load).
* Endpoint: bench_serving's trace replay runs only with `--backend sglang` (native /generate); ours sends chat
  completions. The emulator times both the same.
* Warm-up: bench_serving sends one request of 512 "hi" a hash id, waits for it and sleeps 1 s; ours sends the
  trace's first request (--warmup 1). Neither is measured.
* Duration: ours from the first send to the last stream's end; bench_serving from before its first send to after
  its /server_info request that follows the last answer.

sglang 0.5.13 to 0.5.16's mooncake replay stops before its first request (AttributeError: 'dict' object has no
attribute 'prompt'); bench_serving_run.py --mooncake-fix applies 0.5.19's fix (the prompts, times and requests of the
replay unchanged).

Prints, per trace, min / median / max per tool and the ratio ours/theirs of the medians against the goals (2%,
TTFT 5%; counts exactly), then the server's view (arrival span, the largest arrival lag behind the trace's time).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(REPO / "src"),
    str(REPO / "collections"),
    str(REPO / "tests"),
]  # the package; the collection (its link); the tests' helpers

from bench_serving_run import Stepped, write_sharegpt, write_word_tokenizer  # noqa: E402
from local_emulator import Emulator  # noqa: E402
from test_traffic_replay import poisson_trace  # noqa: E402  the seeded trace of the replay tests

from sglang_deploy.compare.noise import spread  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils import bench  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, trace  # noqa: E402

CLIENT_CPU, EMULATOR_CPU, SEED = 0, 1, 42
TOOLS = ("ours", "bench_serving")
# bench_serving's mooncake prompt besides its ids' blocks (get_mooncake_request_over_time, the chat template's fallback)
THEIR_HEAD, THEIR_TAIL, THEIR_BLOCK_WORDS = "user: Round 1:", "Tell me a story based on this context.", 128
# (label, our level key, statistic, bench_serving key, goal: relative tolerance; 0 = exactly)
FIGURES = (
    ("requests completed", "completed", None, "completed", 0.0),
    ("total input tokens", "input_tokens", None, "total_input_tokens", 0.0),
    ("total output tokens", "output_tokens", None, "total_output_tokens", 0.0),
    ("TTFT mean ms", "ttft_ms", "mean", "mean_ttft_ms", 0.05),
    ("TTFT p50 ms", "ttft_ms", "p50", "median_ttft_ms", 0.05),
    ("ITL mean ms", "itl_ms", "mean", "mean_itl_ms", 0.02),
    ("TPOT mean ms", "tpot_ms", "mean", "mean_tpot_ms", 0.02),
    ("output tok/s", "output_throughput_tok_s", None, "output_throughput", 0.02),
    ("duration s", "wall_s", None, "duration", 0.02),
)
# the server's view, from its request log: (label, key)
SERVER = (
    ("server: requests", "requests"),
    ("server: input tokens", "input_tokens"),
    ("server: output tokens", "output_tokens"),
    ("server: arrival span s", "span_s"),
    ("server: max arrival lag ms", "max_lag_ms"),
)


def their_words(n_ids: int) -> int:
    """Words (the emulator's and the word tokenizer's tokens) of bench_serving's mooncake prompt for n hash ids:
    THEIR_HEAD, then per id "{id}" + THEIR_BLOCK_WORDS x "hi", then THEIR_TAIL; a block's last "hi" runs into the
    next id (and the last into THEIR_TAIL), so each id adds one word less than its block: 127 n + 11."""
    return len(THEIR_HEAD.split()) + n_ids * (THEIR_BLOCK_WORDS - 1) + len(THEIR_TAIL.split())


def traces(folder: Path, n: int, rate: float) -> dict:
    """{name: (path, records)}: the shaped trace and its matched twin (module docstring)."""
    shaped = poisson_trace(n, rate)
    matched = [r._replace(input_length=their_words(1), hash_ids=r.hash_ids[:1]) for r in shaped]
    return {
        name: (trace.write(recs, str(folder / f"{name}.jsonl")), recs)
        for name, recs in (("shaped", shaped), ("matched", matched))
    }


def server_view(lines: list, records: list, scale: float) -> dict:
    """The last len(records) requests the emulator logged (a run's warm-up comes first): counts, the span of their
    arrivals, and the largest lag of an arrival behind the trace's time for it (from the first arrival)."""
    got, _stop = capture.collect(lines)
    got = got[-len(records) :]
    t0, ts0 = got[0].arrival, records[0].timestamp
    lags = [(c.arrival - t0) - (r.timestamp - ts0) / 1000 * scale for c, r in zip(got, records)]
    return {
        "requests": len(got),
        "input_tokens": sum(c.input_length for c in got),
        "output_tokens": sum(c.output_length for c in got),
        "span_s": got[-1].arrival - t0,
        "max_lag_ms": max(lags) * 1000,
    }


def ours(url: str, path: str, scale: float) -> dict:
    result = bench.run_benchmark(
        url,
        dataset_name="trace",
        dataset_path=path,
        trace_time_scale=scale,
        model="qwen",
        warmup=1,
        timeout=120,
        seed=SEED,
    )
    level = result["levels"][0]
    return {label: level[key] if stat is None else level[key][stat] for label, key, stat, _k, _g in FIGURES}


def theirs_of(line: dict) -> dict:
    return {label: line[key] for label, _k, _s, key, _g in FIGURES}


def plan(names: list, repeats: int) -> list:
    """(trace, tool) in run order: per repeat each trace, the tool that goes first alternating."""
    out = []
    for rep in range(repeats):
        for k, name in enumerate(names):
            first = (rep + k) % 2
            out += [(name, TOOLS[first]), (name, TOOLS[1 - first])]
    return out


def their_flags(url: str, folder: Path, scale: float) -> list:
    """bench_serving's common flags for a mooncake replay against the emulator (the trace file and its request count
    go per level: --dataset-path, --num-prompts), with a word-level tokenizer written to folder."""
    vocab = write_sharegpt(folder / "vocab.json", [f"{THEIR_HEAD} {THEIR_TAIL} hi"])
    flags = ["--backend", "sglang", "--base-url", url, "--model", "qwen"]
    flags += ["--tokenizer", str(write_word_tokenizer(folder, vocab)), "--dataset-name", "mooncake"]
    flags += ["--mooncake-slowdown-factor", str(scale), "--seed", str(SEED), "--warmup-requests", "1"]
    return flags + ["--disable-tqdm", "--ready-check-timeout-sec", "10"]


def _pin(cpu: int) -> None:
    if len(os.sched_getaffinity(0)) > 1:
        os.sched_setaffinity(0, {cpu})


def fmt(v) -> str:
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.3f}"


def table(name: str, runs: list) -> list:
    """Markdown rows: a figure's min / median / max per tool, the ratio of the medians, the goal and whether met."""
    rows = [
        f"trace `{name}`",
        "",
        "| figure | ours min / median / max | bench_serving min / median / max | ours / theirs | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    per = {tool: [r for r in runs if r["trace"] == name and r["tool"] == tool] for tool in TOOLS}
    labels = [(f[0], f[4]) for f in FIGURES] + [(label, None) for label, _k in SERVER]
    for label, goal in labels:
        cells, medians = [], []
        for tool in TOOLS:
            s = spread([r["figures"][label] for r in per[tool]])
            cells.append(" / ".join(fmt(s[k]) for k in ("min", "median", "max")))
            medians.append(s["median"])
        ratio = medians[0] / medians[1] if medians[1] else float("nan")
        if goal is None:
            judged, met = "-", "-"
        else:
            judged = "equal" if goal == 0 else f"±{goal:.0%}"
            met = "yes" if abs(ratio - 1) <= goal + 1e-12 else "NO"
        rows.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio:.4f} | {judged} | {met} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--rate", type=float, default=8.0, help="the traces' mean arrival rate, req/s")
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="time scale: ours --trace-time-scale, theirs --mooncake-slowdown-factor",
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ttft-ms", type=float, default=200.0)
    ap.add_argument("--decode-tok-s", type=float, default=25.0)
    ap.add_argument("--json", help="every run's figures, as JSON")
    args = ap.parse_args()
    python = os.environ.get("SGLANG_DEPLOY_BENCH_SERVING_PYTHON")
    if not python:
        sys.exit(
            "set SGLANG_DEPLOY_BENCH_SERVING_PYTHON to a Python with sglang (tests/bench_serving-requirements.txt)"
        )
    folder = Path(tempfile.mkdtemp(prefix="trace-parity-"))
    made = traces(folder, args.requests, args.rate)
    order = plan(list(made), args.repeats)
    emu = Emulator(folder, decode_tok_s=args.decode_tok_s, ttft_ms=args.ttft_ms).wait_ready()
    common = their_flags(emu.url, folder, args.scale)
    levels = [
        ["--dataset-path", made[name][0], "--num-prompts", str(args.requests)] for name, tool in order if tool != "ours"
    ]
    pin = (lambda: _pin(CLIENT_CPU)) if len(os.sched_getaffinity(0)) > 1 else None
    theirs_run = Stepped(
        python, folder / "theirs.jsonl", levels, common, folder / "theirs.log", preexec_fn=pin, mooncake_fix=True
    )
    if pin:
        os.sched_setaffinity(emu.proc.pid, {EMULATOR_CPU})
        _pin(CLIENT_CPU)
    runs, started = [], datetime.datetime.now(datetime.UTC)
    try:
        capture.switch(emu.url, None, True)
        for name, tool in order:
            path, records = made[name]
            seen = len(emu.log_lines())
            figures = ours(emu.url, path, args.scale) if tool == "ours" else theirs_of(theirs_run.level()[0])
            view = server_view(emu.log_lines()[seen:], records, args.scale)
            figures |= {label: view[key] for label, key in SERVER}
            runs.append({"trace": name, "tool": tool, "figures": figures})
            print(name, tool, json.dumps({k: round(v, 3) for k, v in figures.items()}), flush=True)
    finally:
        theirs_run.close()
        emu.stop()
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"\n{started.isoformat(timespec='seconds')}, commit {commit.stdout.strip()}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end"
    )
    print(
        f"emulator: TTFT {args.ttft_ms:g} ms, {args.decode_tok_s:g} tok/s a stream; {args.requests} requests a "
        f"trace at {args.rate:g} req/s, time scale {args.scale:g}, {args.repeats} runs a tool, alternating\n"
    )
    for name, (_path, records) in made.items():
        s = trace.summary(records)
        their_in = sum(their_words(len(r.hash_ids)) for r in records)
        print(
            f"`{name}`: {s['requests']} requests over {s['duration_s']:.2f} s, CV {s['burstiness_cv']:.2f}, input "
            f"{sum(r.input_length for r in records):,} tokens (bench_serving's synthesis: {their_in:,}), output "
            f"{sum(r.output_length for r in records):,}, prefix reuse {s['prefix_reuse_share']:.3f}"
        )
    for name in made:
        print("\n" + "\n".join(table(name, runs)))
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
