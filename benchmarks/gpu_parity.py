#!/usr/bin/env python3
"""`sglang-deploy bench` against `python -m sglang.bench_serving` on one real SGLang server (issue 22 item 5).

Run on a GPU host where sglang imports (docs/gpu.md says how to stage it):

    python benchmarks/gpu_parity.py --out results/gpu-parity

One server of tools/make_models.py's dense-large model (Qwen3-8B's shape, dummy weights, the GPU suite's launch
settings of tests/gpu/harness.py; with --nextn its hybrid-large and the suite's NEXTN launch): decoding bound by
the GPU, not by the host's CPU as with the suite's small models, whose 1-2 ms steps moved each tool's repeats by up
to 35% (results/gpu-h200/parity-2026-12-01). One dataset for both: our
benchmark's own prompt text (bench.workload.build_prompt, --input-len words each) written as a ShareGPT file that
both tools read (`--dataset-name sharegpt --sharegpt-output-len`), in the same seeded order: the same prompts per
run, the same request count and output length. Until 2026-12-02 ours generated its own prompts, sized with the
server's tokens per word, about 24 server tokens (8%) shorter than the file's, the first two for its warm-up. Now
ours runs without its own warm-up (it would take the rows bench_serving measures; the discarded wave below warms the
server instead) and bench_serving's warm-up (its first prompt, at most 32 output tokens) is followed by its cache
flush (`--flush-cache`), so neither tool's measured requests find a cached prefix. Per level, REPEATS runs of each tool in alternating order,
the radix cache flushed before each run. Request-rate levels run too when our command takes --request-rate. Writes parity-raw.json (every run:
command, figures, output tail) and parity-table.md (min/median/max per tool, the ratio of the medians, the goal);
prints the table.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# collections/: the link to this checkout as sglang.deploy (tools/fetch_collections.py --self-only, gpu_lab.py's phases).
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections"), str(REPO / "tests" / "gpu")]

import benchcmp  # tests/gpu: the suite's server launch, stop and key handling
import harness

from ansible_collections.sglang.deploy.plugins.module_utils.bench.workload import build_prompt
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import freeze_gc

# (label, our level key, our statistic, bench_serving key, goal: relative tolerance, absolute tolerance in ms)
FIGURES = (
    ("output tok/s", "output_throughput_tok_s", None, "output_throughput", 0.02, None),
    ("TPOT mean ms", "tpot_ms", "mean", "mean_tpot_ms", 0.02, None),
    ("TPOT median ms", "tpot_ms", "p50", "median_tpot_ms", 0.02, None),
    ("ITL mean ms", "itl_ms", "mean", "mean_itl_ms", 0.02, None),
    ("ITL median ms", "itl_ms", "p50", "median_itl_ms", 0.02, None),
    ("TTFT mean ms", "ttft_ms", "mean", "mean_ttft_ms", 0.05, 3.0),
    # --nextn only (no row without it); not judged: ours counts this level's tokens per verify step, bench_serving
    # reads the server's running average since it started (warm-ups and earlier levels, ours included).
    ("accept length", "spec_accept_length", "value", "accept_length", None, None),
)


def pairs(text: str) -> list[tuple[float, int]]:
    """'1:16,8:64' -> [(1, 16), (8, 64)]: a concurrency (or request rate) and its request count."""
    out = []
    for item in filter(None, text.split(",")):
        level, _, count = item.partition(":")
        out.append((float(level) if "." in level else int(level), int(count)))
    return out


def write_dataset(path: Path, count: int, input_len: int) -> Path:
    """Our prompts 0..count-1 as ShareGPT conversations (the answer text is unused: the length is forced)."""
    rows = [
        {
            "id": str(i),
            "conversations": [{"from": "human", "value": build_prompt(i, input_len)}, {"from": "gpt", "value": "ok"}],
        }
        for i in range(count)
    ]
    path.write_text(json.dumps(rows))
    return path


def ours_cmd(server, mode: str, level, count: int, args, dataset: Path, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "sglang_deploy.cli", "bench", "--url", server.url, "--api-key-env", "PARITY_KEY"]
    cmd += ["--dataset-name", "sharegpt", "--dataset-path", str(dataset)]
    cmd += ["--sharegpt-output-len", str(args.output_len), "--warmup", "0"]
    # bench_serving's seed: the file's rows in the same shuffled order and, at a request rate, the same send times
    cmd += ["--seed", str(args.seed)]
    cmd += ["--request-rate", str(level)] if mode == "rate" else ["--concurrency", str(level)]
    cmd += ["--output-details"] if args.details else []
    return cmd + [args.ours_count_flag, str(count), "--json", str(out)]


def theirs_cmd(server, mode: str, level, count: int, args, dataset: Path, out: Path, kept: bool = False) -> list[str]:
    """bench_serving's command; kept: the --kept-alive probe, bench_serving with one kept-alive session
    (bench_serving_run.py --keepalive, which adds --output-file)."""
    cmd = ["--backend", "sglang-oai-chat", "--base-url", server.url]
    cmd += ["--model", str(args.model), "--served-model-name", server.launch.args["served-model-name"]]
    cmd += ["--tokenizer", str(args.model)]
    cmd += ["--dataset-name", "sharegpt", "--dataset-path", str(dataset)]
    cmd += ["--sharegpt-output-len", str(args.output_len), "--num-prompts", str(count), "--seed", str(args.seed)]
    # kept: a warm-up as wide as the level opens its connections before the clock, as ours opens them before a level
    warmup = max(args.warmup, level) if kept and mode == "concurrency" else args.warmup
    cmd += ["--warmup-requests", str(warmup), "--flush-cache", "--disable-tqdm"]
    if mode == "rate":
        cmd += ["--request-rate", str(level)]
    else:
        cmd += ["--max-concurrency", str(level)]
    cmd += ["--output-details"] if args.details else []
    if kept:
        run = REPO / "benchmarks" / "bench_serving_run.py"
        return [sys.executable, str(run), "--keepalive", str(out), "[[]]", "--", *cmd]
    return [sys.executable, "-m", "sglang.bench_serving", *cmd, "--output-file", str(out)]


def figures(tool: str, out: Path) -> dict:
    if tool == "ours":
        level = json.loads(out.read_text())["levels"][0]
        got = {label: level[key] if stat is None else (level[key] or {}).get(stat) for label, key, stat, *_ in FIGURES}
        got["completed"] = level["completed"]
        got["prompt_tokens_mean"] = level.get("prompt_tokens_mean")
        return got
    row = json.loads(harness.scrub_key(out).read_text().strip().splitlines()[-1])
    got = {label: row.get(key) for label, _, _, key, *_ in FIGURES}
    got["completed"] = row.get("completed")
    got["prompt_tokens_mean"] = row["total_input_tokens"] / row["completed"] if row.get("completed") else None
    return got


def run_one(server, tool: str, mode: str, level, count: int, args, dataset: Path, work: Path, rep: int | str) -> dict:
    out = work / f"{tool}-{mode}{level}-r{rep}.{'json' if tool == 'ours' else 'jsonl'}"
    out.unlink(missing_ok=True)
    if tool == "ours":
        cmd = ours_cmd(server, mode, level, count, args, dataset, out)
    else:
        cmd = theirs_cmd(server, mode, level, count, args, dataset, out, kept=tool == KEPT)
    status = server.request("POST", "/flush_cache", timeout=30)[0]
    path = os.pathsep.join(filter(None, [str(REPO / "src"), str(REPO / "collections"), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **benchcmp.OFFLINE_ENV, "PYTHONPATH": path, "PARITY_KEY": server.api_key}
    env["OPENAI_API_KEY"] = server.api_key
    started, start = time.time(), time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    record = {
        "tool": tool,
        "mode": mode,
        "level": level,
        "requests": count,
        "repeat": rep,
        "flush_cache_status": status,
        "cmd": " ".join(cmd),
        "rc": proc.returncode,
        "wall_s": round(time.monotonic() - start, 2),
        "started_unix": round(started, 3),  # places the run among the server log's --server-trace lines
        "output_tail": (proc.stdout + proc.stderr)[-2500:].replace(server.api_key, "***"),
    }
    if proc.returncode == 0 or out.exists():
        try:
            record["figures"] = figures(tool, out)
        except (OSError, ValueError, KeyError, IndexError) as exc:
            record["figures_error"] = f"{type(exc).__name__}: {exc}"
    return record


def table(runs: list[dict], levels: list[tuple[str, object]]) -> list[str]:
    head = "| mode | level | figure | ours min / median / max | bench_serving min / median / max | ratio (medians) | goal |"
    lines = [head, "|" + "---|" * 7]
    for mode, level in levels:
        sel = {
            t: [
                r["figures"]
                for r in runs
                if r["mode"] == mode and r["level"] == level and r["tool"] == t and "figures" in r
            ]
            for t in ("ours", "theirs")
        }
        for label, *_, rel, absolute in FIGURES:
            vals = {t: [f[label] for f in sel[t] if f.get(label) is not None] for t in sel}
            if not vals["ours"] and not vals["theirs"]:  # a figure neither tool has here (accept length, no NEXTN)
                continue
            if not vals["ours"] or not vals["theirs"]:
                lines.append(f"| {mode} | {level} | {label} | {vals['ours']} | {vals['theirs']} | n/a | not measured |")
                continue
            mine, other = statistics.median(vals["ours"]), statistics.median(vals["theirs"])
            if rel is None:
                goal = "not judged (other definitions)"
            else:
                ok = abs(mine - other) <= max(rel * abs(other), absolute or 0.0)
                goal = f"{'met' if ok else 'MISSED'} (±{rel:.0%}{f' or {absolute:g} ms' if absolute else ''})"
            spread = {
                t: " / ".join(f"{x:.4g}" for x in (min(v), statistics.median(v), max(v))) for t, v in vals.items()
            }
            lines.append(
                f"| {mode} | {level} | {label} | {spread['ours']} | {spread['theirs']} | {mine / other:.3f} | {goal} |"
            )
    return lines


# The repeat of a level's warm-up run (--level-warmup): in parity-raw.json, never in the table.
WARMUP = "warmup"
# The fewest requests of a warm-up wave: at c=1 one request left hybrid-large compiling (d5612c5's NEXTN record: the
# first measured run's first two requests decoded at 9.1-9.8 ms per token, 7.3 later).
MIN_WARMUP_WAVE = 4
# --level-warmup's value for one pass over every prompt of the level (its request count, at its concurrency or rate):
# NEXTN c=1 on hybrid-large, three calls (d5612c5, ce9fc89 twice), the first measured run's 8th request waited 0.6-0.8 s
# for its first token, once per server process, after warm-ups of 1 and 4 requests; ours always ran that run first.
ALL_PROMPTS = "all"
# Every launch logs the tokenizer manager's GC pauses over 20 ms (a gc callback: no work per request), and the
# table names the run each fell in: a 0.4 s collection stalls one wave of whichever tool is running (d5612c5's record).
GC_WATCH_ARGS = {"gc-warning-threshold-secs": 0.02}
LONG_GC = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^]]*\].*LONG GARBAGE COLLECTION DETECTED \| Generation (\S+) \| "
    r"Duration: ([\d.]+)s"
)
# The --server-trace probe's launch flag (sglang 0.5.16's name): each request's queue time and wall-clock entry
SERVER_TRACE_ARGS = {"enable-request-time-stats-logging": True}

# The --kept-alive probe's third tool: bench_serving with kept-alive connections.
KEPT = "theirs-kept-alive"
PROBED = ("TTFT mean ms", "output tok/s", "TPOT mean ms")


def probe_table(runs: list[dict], levels: list[tuple[str, object]]) -> list[str]:
    """The --kept-alive probe (runs with figures): bench_serving with kept-alive connections beside bench_serving
    and ours, ratios of the medians."""
    lines = ["| mode | level | figure | kept-alive min / median / max | ratio to bench_serving | ratio to ours |"]
    lines.append("|" + "---|" * 6)
    for mode, level in levels:
        vals = {
            t: {
                label: [r["figures"][label] for r in runs if (r["mode"], r["level"], r["tool"]) == (mode, level, t)]
                for label in PROBED
            }
            for t in ("ours", "theirs", KEPT)
        }
        for label in PROBED:
            kept, theirs, ours = ([v for v in vals[t][label] if v is not None] for t in (KEPT, "theirs", "ours"))
            if not (kept and theirs and ours):
                continue
            med = statistics.median(kept)
            spread = " / ".join(f"{x:.4g}" for x in (min(kept), med, max(kept)))
            lines.append(
                f"| {mode} | {level} | {label} | {spread} | {med / statistics.median(theirs):.3f} | "
                f"{med / statistics.median(ours):.3f} |"
            )
    return lines


def long_gcs(log: str, runs: list[dict]) -> list[dict]:
    """The server log's long-GC warnings (GC_WATCH_ARGS), each with the run whose wall-clock window (the tool's own
    start included) holds it. The log's times are the host's local time, to the second: read on the host that ran."""
    found = []
    for line in log.splitlines():
        match = LONG_GC.match(line)
        if not match:
            continue
        at = time.mktime(time.strptime(match[1], "%Y-%m-%d %H:%M:%S"))
        inside = [
            f"{r['tool']} r{r['repeat']} {r['mode']} {r['level']}"
            for r in runs
            if "started_unix" in r and int(r["started_unix"]) <= at <= r["started_unix"] + r["wall_s"]
        ]
        found.append(
            {
                "at": match[1],
                "generation": match[2],
                "duration_s": float(match[3]),
                "run": inside[0] if inside else None,
            }
        )
    return found


def tools_of(kept_alive: bool) -> tuple:
    """The tools of a run: ours and bench_serving, and the --kept-alive probe's third."""
    return ("ours", "theirs", KEPT) if kept_alive else ("ours", "theirs")


def rotation(tools: tuple, turn: int) -> tuple:
    """The tools' order in a turn: each tool first in turn, as many turns as tools (two tools: alternating)."""
    turn %= len(tools)
    return tools[turn:] + tools[:turn]


def warmup_requests(mode: str, level, waves: int | str, count: int) -> int:
    """Requests of ours' discarded warm-up at a level of `count` requests: `waves` full waves at a concurrency, each
    of at least MIN_WARMUP_WAVE requests, `waves` seconds of arrivals at a request rate (at least one request); with
    ALL_PROMPTS the level's own `count`, the same prompts in the same order."""
    if waves == ALL_PROMPTS:
        return count
    if mode == "concurrency":
        return waves * max(level, MIN_WARMUP_WAVE)
    return waves * max(1, math.ceil(level))


def same_prompts(runs: list[dict]) -> bool:
    """Whether the runs sent both tools the one file's prompts (ours with --dataset-path, since 2026-12-02) rather
    than ours' own generated prompts: read from the commands stored with each run, so an older record's table keeps
    its own description."""
    ours = [r["cmd"] for r in runs if r.get("tool") == "ours" and r.get("cmd")]
    return bool(ours) and all("--dataset-path" in cmd for cmd in ours)


def level_warmup(value: str) -> int | str:
    """--level-warmup's argument: a count of waves (0: none) or ALL_PROMPTS."""
    if value == ALL_PROMPTS:
        return value
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"takes 0 (none), a number of waves or {ALL_PROMPTS!r}, not {value!r}")
    return int(value)


def _end_on_sigterm(*_) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM (timeout signals the group) must not cut the stop
    sys.exit(143)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for parity-raw.json, parity-table.md, logs")
    ap.add_argument(
        "--model",
        type=Path,
        help="model folder (default: OUT/models/dense-large, made by tools/make_models.py --large; with --nextn "
        "OUT/models/hybrid-large)",
    )
    ap.add_argument(
        "--nextn",
        action="store_true",
        help="NEXTN speculative decoding (tests/gpu's launch; CUDA graphs up to 16 requests: give --levels "
        "1:16,8:64 --rates '') on make_models.py's hybrid-large, GPU-bound where the suite's small hybrid model left "
        "both tools' repeats 13-30%% apart; the table adds the accept length",
    )
    ap.add_argument("--levels", default="1:16,8:64,32:128", help="concurrency:requests,... (1:16,8:64,32:128)")
    ap.add_argument(
        "--rates", default="4:48,16:96", help="request-rate:requests,... when ours takes --request-rate (4:48,16:96)"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=2, help="bench_serving's warm-up requests (2); ours has none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--details",
        action="store_true",
        help="both tools keep per-request figures in runs/ (--output-details): ours each request's send time, TTFT "
        "and E2E, bench_serving's its TTFT and ITLs in input order (no send times)",
    )
    ap.add_argument(
        "--level-warmup",
        type=level_warmup,
        default=1,
        help="ours' discarded warm-up at each level before its repeats, in waves: a full wave of requests at a "
        "concurrency (at least 4 requests), a second of arrivals at a request rate (1; 0: none); 'all': the level's "
        "every prompt once, as measured. Without it the first level's first run is ours on a fresh server, still "
        "compiling for new batch shapes",
    )
    ap.add_argument(
        "--kept-alive",
        action="store_true",
        help="a probe: a third tool, bench_serving with one kept-alive session (ours keeps its connections; "
        "bench_serving opens one per request inside its TTFT clock), in the same rotation; a second table compares "
        "it with both (benchmarks/ttft_connect.py is the same on the emulator)",
    )
    ap.add_argument(
        "--server-trace",
        action="store_true",
        help="a probe: the server logs each request's scheduler queue time and wall-clock entry "
        "(--enable-request-time-stats-logging), to place a TTFT stall on the server; adds work to the server, so "
        "not a parity figure (every run logs the tokenizer manager's GC pauses over 20 ms, and the table names "
        "the run each fell in)",
    )
    ap.add_argument(
        "--no-freeze-gc",
        action="store_true",
        help="leave the server's garbage collector as it starts (before d5612c5's record). By default the first "
        "level's warm-up is followed by POST /freeze_gc, as SGLang's own long-GC warning advises: a full collection "
        "of its ~800k startup objects stalled the tokenizer manager 0.37-0.43 s, about every 90 s, in whichever "
        "tool's run it fell",
    )
    ap.add_argument("--source", help="what code ran, for the record (e.g. the commit)")
    ap.add_argument(
        "--table-only", action="store_true", help="only write OUT/parity-table.md from OUT/parity-raw.json (a cut run)"
    )
    args = ap.parse_args(argv)
    out = args.out.resolve()
    if args.table_only:
        raw = json.loads((out / "parity-raw.json").read_text())
        return write_table(out, raw, raw["runs"])
    # A timeout's SIGTERM ends the run through the finally below, which stops the server: killed outright, it left
    # a 72 GB server on the GPU that the next test found as a stray process.
    signal.signal(signal.SIGTERM, _end_on_sigterm)
    work = out / "runs"
    work.mkdir(parents=True, exist_ok=True)
    if args.model is None:
        name = "hybrid-large" if args.nextn else "dense-large"
        if not (out / "models" / name / "config.json").exists():
            subprocess.run(
                [sys.executable, str(REPO / "tools" / "make_models.py"), str(out / "models"), "--large"], check=True
            )
        args.model = out / "models" / name
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO / "src"), str(REPO / "collections"), os.environ.get("PYTHONPATH")])
        ),
    }
    help_text = subprocess.run(
        [sys.executable, "-m", "sglang_deploy.cli", "bench", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    plan = [("concurrency", level, count) for level, count in pairs(args.levels)]
    if "--request-rate" in help_text:
        plan += [("rate", level, count) for level, count in pairs(args.rates)]
    dataset = write_dataset(work / "dataset-sharegpt.json", max(c for *_, c in plan), args.input_len)
    args.ours_count_flag = "--num-prompts" if "--num-prompts" in help_text else "--requests"
    meta = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "source": args.source,
        "ours_takes_request_rate": "--request-rate" in help_text,
        "gpu": harness.smi("--query-gpu=name,driver_version", "--format=csv,noheader").strip(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "dataset": str(dataset),
    }
    launch_args = {**(harness.NEXTN_ARGS if args.nextn else harness.DENSE_ARGS), **GC_WATCH_ARGS}
    if args.server_trace:
        launch_args = {**launch_args, **SERVER_TRACE_ARGS}
    server = harness.Server(harness.render(launch_args, args.model), out / "logs", "parity")
    runs: list[dict] = []
    try:
        meta["ready"] = server.wait_ready(timeout=600)
        meta["launch_argv"] = server.launch.argv
        measure(server, plan, args, dataset, out, meta, runs)
    finally:
        meta["stop"] = server.stop()
        meta["long_gc"] = long_gcs(server.log_text(), runs)
        (out / "parity-raw.json").write_text(json.dumps({**meta, "runs": runs}, indent=1))
    write_table(out, meta, runs)
    return 0 if all(r["rc"] == 0 for r in runs if r["repeat"] != WARMUP and r["tool"] != KEPT) else 1


def measure(server, plan: list, args, dataset: Path, out: Path, meta: dict, runs: list) -> None:
    """Each level of the plan: ours' warm-up (--level-warmup), then the repeats, the tools in rotation; each run
    joins ``runs`` and OUT/parity-raw.json as it ends. The server's GC is frozen after the first level's warm-up."""
    work = out / "runs"
    for i, (mode, level, count) in enumerate(plan):
        if args.level_warmup:
            count_w = warmup_requests(mode, level, args.level_warmup, count)
            runs.append(run_one(server, "ours", mode, level, count_w, args, dataset, work, WARMUP))
            print(json.dumps({k: runs[-1].get(k) for k in ("tool", "mode", "level", "repeat", "rc", "wall_s")}))
        if i == 0 and not args.no_freeze_gc:
            meta["freeze_gc"] = freeze_gc(server.url, server.api_key)
        tools = tools_of(args.kept_alive)
        for rep in range(args.repeats):
            for tool in rotation(tools, i + rep):
                runs.append(run_one(server, tool, mode, level, count, args, dataset, work, rep))
                print(
                    json.dumps(
                        {k: runs[-1].get(k) for k in ("tool", "mode", "level", "repeat", "rc", "wall_s", "figures")}
                    ),
                    flush=True,
                )
                (out / "parity-raw.json").write_text(json.dumps({**meta, "runs": runs}, indent=1))


def warmup_phrase(level_warmup: str, shared: bool) -> str:
    """The table's words for ours' discarded warm-up (--level-warmup as parity-raw.json stores it)."""
    if level_warmup == "0":
        return "."
    if level_warmup == ALL_PROMPTS:
        return ", and one pass of ours over the level's prompts, discarded, before each level."
    return f", and {level_warmup} wave(s) of ours, discarded, before each {'level' if shared else 'concurrency level'}."


def write_table(out: Path, meta: dict, runs: list[dict]) -> int:
    """parity-table.md (and stdout): the levels that ran, in their order; a run cut short says which it missed. The
    level warm-ups are in parity-raw.json only."""
    settings = meta["settings"]
    shared = same_prompts(runs)
    runs = [r for r in runs if r.get("repeat") != WARMUP]
    levels = list(dict.fromkeys((r["mode"], r["level"]) for r in runs))
    planned = [("concurrency", level) for level, _ in pairs(settings["levels"])]
    if meta.get("ours_takes_request_rate"):
        planned += [("rate", level) for level, _ in pairs(settings["rates"])]
    missing = [f"{mode} {level}" for mode, level in planned if (mode, level) not in levels]
    header = [
        f"# sglang-deploy bench vs sglang.bench_serving, {meta['date_utc']}",
        "",
        f"`{meta['command']}`; {meta['gpu']}; {settings['repeats']} repeats per level, "
        + (
            "in rotation with the --kept-alive probe, "
            if settings.get("kept_alive") == "True"
            else "alternating order, "
        )
        + "radix cache flushed before each run; "
        + (
            "the same prompts (one ShareGPT file both tools read in the same seeded order), "
            f"{settings['input_len']}-word prompts, {settings['output_len']} output tokens forced, bench_serving's "
            f"warm-up {settings['warmup']} then its cache flushed, none in ours"
            if shared
            else f"bench_serving read a ShareGPT file of {settings['input_len']}-word prompts, ours generated its "
            f"own (not the same: compare prompt_tokens_mean in parity-raw.json), {settings['output_len']} output "
            f"tokens forced, warm-up {settings['warmup']} in each"
        )
        + warmup_phrase(settings.get("level_warmup", "0"), shared),
        "",
    ]
    if "freeze_gc" in meta:
        got = meta["freeze_gc"]
        answer = got.get("error") or f"status {got['status']}"
        froze = "frozen" if got["frozen"] else "NOT frozen"
        header += [f"The server's GC {froze} after the first level's warm-up (POST /freeze_gc: {answer}).", ""]
    elif settings.get("no_freeze_gc") == "True":
        header += ["The server's GC left as it started (--no-freeze-gc).", ""]
    if "long_gc" in meta:
        pauses = [
            f"{g['at']} generation {g['generation']} {g['duration_s']:.4f} s (in {g['run'] or 'no run'})"
            for g in meta["long_gc"]
        ]
        header += [f"The server's GC pauses over 20 ms: {'; '.join(pauses) or 'none'}.", ""]
    if settings.get("server_trace") == "True":
        header += ["With --server-trace: the server logged each request (not a parity figure).", ""]
    if missing:
        header += [f"Not measured (the run ended first): {', '.join(missing)}.", ""]
    measured = collections.Counter((r["mode"], r["level"], r["tool"]) for r in runs if "figures" in r)
    tools = tools_of(settings.get("kept_alive") == "True")
    fewest = {(mode, level): min(measured[mode, level, t] for t in tools) for mode, level in levels}
    short = [
        f"{m} {lv} ({n} of {settings['repeats']})" for (m, lv), n in fewest.items() if n < int(settings["repeats"])
    ]
    if short:
        header += [
            f"Fewer runs with figures than asked (cut short, or a run failed: see parity-raw.json): {', '.join(short)}.",
            "",
        ]
    lines = header + table([r for r in runs if r["tool"] != KEPT], levels)
    if any(r["tool"] == KEPT for r in runs):
        lines += ["", "The --kept-alive probe (not a parity figure): bench_serving with kept-alive connections.", ""]
        lines += probe_table([r for r in runs if "figures" in r], levels)
    (out / "parity-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
