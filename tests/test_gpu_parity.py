"""benchmarks/gpu_parity.py's reading of the two tools' results and its table (the GPU run itself is tests/gpu's)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_serving_run  # noqa: E402
import gpu_parity  # noqa: E402


def _ours(tmp_path: Path, accept) -> Path:
    level = {
        "output_throughput_tok_s": 100.0,
        "tpot_ms": {"mean": 5.0, "p50": 5.1},
        "itl_ms": {"mean": 5.0, "p50": 4.9},
        "ttft_ms": {"mean": 40.0},
        "spec_accept_length": accept,
        "completed": 16,
    }
    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"levels": [level]}))
    return path


def test_ours_accept_length_is_its_value_and_absent_without_nextn(tmp_path):
    got = gpu_parity.figures("ours", _ours(tmp_path, {"value": 1.25, "source": "metrics_delta"}))
    assert got["accept length"] == 1.25 and got["TPOT median ms"] == 5.1
    assert gpu_parity.figures("ours", _ours(tmp_path, None))["accept length"] is None


def _run(tool: str, level: int, value: float, accept=None) -> dict:
    figures = {label: value for label, *_ in gpu_parity.FIGURES}
    figures["accept length"] = accept
    cmd = "... --dataset-name sharegpt --dataset-path d.json ..."  # what main() ran since both read the one file
    return {"tool": tool, "mode": "concurrency", "level": level, "figures": figures, "cmd": cmd}


def test_table_ranks_accept_length_and_names_levels_cut_short(tmp_path):
    runs = [_run("ours", 1, 10.0, 1.0), _run("theirs", 1, 10.1, 1.0), _run("ours", 1, 10.0, 1.0)]
    runs += [_run("theirs", 1, 10.1, 1.0), _run("ours", 8, 20.0), _run("theirs", 8, 30.0)]
    runs += [{"tool": "ours", "mode": "concurrency", "level": 8, "rc": 1}]  # a failed run: no figures, not counted
    runs += [{**_run("ours", 8, 99.0), "repeat": gpu_parity.WARMUP}]  # a level's warm-up: neither a figure nor a run
    settings = {"repeats": "2", "levels": "1:16,8:64,32:128", "rates": "", "input_len": 256, "output_len": 256}
    meta = {"date_utc": "d", "command": "c", "gpu": "g", "settings": {**settings, "warmup": 2, "level_warmup": "1"}}
    gpu_parity.write_table(tmp_path, meta, runs)
    text = (tmp_path / "parity-table.md").read_text()
    assert (
        "the same prompts (one ShareGPT file both tools read in the same seeded order), 256-word prompts, 256 output "
        "tokens forced, bench_serving's warm-up 2 then its cache flushed, none in ours, and 1 wave(s) of ours, "
        "discarded, before each level." in text
    )
    assert "Not measured (the run ended first): concurrency 32." in text
    assert (
        "Fewer runs with figures than asked (cut short, or a run failed: see parity-raw.json): concurrency 8 (1 of 2)"
        in text
    )
    assert (
        "| concurrency | 1 | accept length | 1 / 1 / 1 | 1 / 1 / 1 | 1.000 | not judged (other definitions) |" in text
    )
    assert "| concurrency | 8 | output tok/s | 20 / 20 / 20 | 30 / 30 / 30 | 0.667 | MISSED (±2%) |" in text
    assert "| concurrency | 8 | accept length" not in text


def test_details_ask_both_tools_for_each_requests_times():
    args = SimpleNamespace(input_len=256, output_len=256, warmup=2, seed=1, model=Path("/m"), details=True)
    args.ours_count_flag = "--requests"
    server = SimpleNamespace(url="http://127.0.0.1:1", launch=SimpleNamespace(args={"served-model-name": "m"}))
    for details in (True, False):
        args.details = details
        ours = gpu_parity.ours_cmd(server, "concurrency", 32, 64, args, Path("d.json"), Path("o.json"))
        theirs = gpu_parity.theirs_cmd(server, "concurrency", 32, 64, args, Path("d.json"), Path("t.jsonl"))
        assert ("--output-details" in ours, "--output-details" in theirs) == (details, details)


def _value(cmd: list, flag: str):
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_both_tools_send_the_same_prompts_of_one_file_and_no_cached_prefix(tmp_path):
    """Both read the one ShareGPT file with the same seed (ours samples it in bench_serving's seeded order: see
    docs/benchmark.md); ours takes no warm-up, which would use the rows bench_serving measures; bench_serving flushes
    the cache its warm-up filled with its first prompt."""
    args = SimpleNamespace(input_len=256, output_len=128, warmup=2, seed=7, model=Path("/m"), details=False)
    args.ours_count_flag = "--num-prompts"
    server = SimpleNamespace(url="http://127.0.0.1:1", launch=SimpleNamespace(args={"served-model-name": "m"}))
    data = gpu_parity.write_dataset(tmp_path / "d.json", 4, 256)
    for mode, level in (("concurrency", 8), ("rate", 4.0)):
        ours = gpu_parity.ours_cmd(server, mode, level, 16, args, data, tmp_path / "o.json")
        theirs = gpu_parity.theirs_cmd(server, mode, level, 16, args, data, tmp_path / "t.jsonl")
        for flag, want in (("--dataset-name", "sharegpt"), ("--dataset-path", str(data)), ("--seed", "7")):
            assert _value(ours, flag) == _value(theirs, flag) == want, flag
        assert _value(ours, "--sharegpt-output-len") == _value(theirs, "--sharegpt-output-len") == "128"
        assert _value(ours, "--num-prompts") == _value(theirs, "--num-prompts") == "16"
        assert _value(ours, "--warmup") == "0" and "--input-len" not in ours
        assert _value(theirs, "--warmup-requests") == "2" and "--flush-cache" in theirs
    rows = json.loads(data.read_text())
    assert [r["conversations"][0]["value"].split(":")[0] for r in rows] == [f"Request {i}" for i in range(4)]


def test_an_older_records_table_says_ours_sent_its_own_prompts(tmp_path):
    """--table-only on a record made before both tools read the one file (ours' commands without --dataset-path)
    must not call its prompts the same."""
    runs = [{**_run("ours", 1, 10.0), "cmd": "bench --input-len 256"}, {**_run("theirs", 1, 10.0), "cmd": "x"}]
    settings = {"repeats": "1", "levels": "1:16", "rates": "", "input_len": 256, "output_len": 256, "warmup": 2}
    gpu_parity.write_table(tmp_path, {"date_utc": "d", "command": "c", "gpu": "g", "settings": settings}, runs)
    text = (tmp_path / "parity-table.md").read_text()
    assert "ours generated its own (not the same" in text and "the same prompts" not in text
    assert "warm-up 2 in each." in text


def test_a_warm_up_wave_at_every_level_a_rate_gets_a_second_of_arrivals():
    assert gpu_parity.warmup_requests("concurrency", 32, 1, 256) == 32
    # at least 4 requests a wave: at c=1 one request left the hybrid model still compiling
    assert (
        gpu_parity.warmup_requests("concurrency", 1, 1, 16) == 4
        and gpu_parity.warmup_requests("concurrency", 8, 2, 64) == 16
    )
    assert gpu_parity.warmup_requests("concurrency", 1, 0, 16) == 0
    assert gpu_parity.warmup_requests("rate", 4, 1, 48) == 4 and gpu_parity.warmup_requests("rate", 0.5, 2, 48) == 2


def test_level_warmup_all_sends_the_level_s_every_prompt_once_and_the_table_says_so(tmp_path, capsys):
    assert gpu_parity.warmup_requests("concurrency", 1, "all", 16) == 16
    assert gpu_parity.warmup_requests("rate", 16, "all", 96) == 96
    with pytest.raises(SystemExit):
        gpu_parity.main(["--out", str(tmp_path), "--level-warmup", "every"])
    assert "--level-warmup: takes 0 (none), a number of waves or 'all', not 'every'" in capsys.readouterr().err
    runs = [{**_run("ours", 1, 10.0), "cmd": "bench --dataset-path f"}, {**_run("theirs", 1, 10.0), "cmd": "x"}]
    settings = {"repeats": "1", "levels": "1:16", "rates": "", "input_len": 256, "output_len": 256, "warmup": 2}
    meta = {"date_utc": "d", "command": "c", "gpu": "g", "settings": {**settings, "level_warmup": "all"}}
    gpu_parity.write_table(tmp_path, meta, runs)
    assert (
        "one pass of ours over the level's prompts, discarded, before each level."
        in (tmp_path / "parity-table.md").read_text()
    )


def test_ours_reads_a_sharegpt_file_in_bench_serving_s_seeded_order(tmp_path):
    """bench_serving 0.5.16 (sglang/benchmark/datasets/sharegpt.py: sample_sharegpt_requests) seeds Python's
    `random` with --seed before it samples, keeps the conversations of two turns or more, `random.shuffle`s them and
    takes the first --num-prompts; ours must send the same rows in the same order (checked against the real one on
    2026-12-02: the same 16 of 66 rows for seed 1)."""
    import random

    from ansible_collections.sglang.deploy.plugins.module_utils.bench import dataset

    data = gpu_parity.write_dataset(tmp_path / "d.json", 66, 12)
    for seed in (1, 7):
        random.seed(seed)
        pairs = [(c["conversations"][0]["value"], c["conversations"][1]["value"]) for c in json.loads(data.read_text())]
        random.shuffle(pairs)
        rows, pruned = dataset._sharegpt(data.read_text(), str(data), 16, seed)
        assert pruned == 0 and [r.messages[0]["content"] for r in rows[:16]] == [p for p, _ in pairs[:16]]


def test_the_kept_alive_probe_runs_bench_serving_with_one_session_and_gets_a_table_of_its_own(tmp_path):
    server = SimpleNamespace(url="http://h:1", launch=SimpleNamespace(args={"served-model-name": "tiny"}))
    args = argparse.Namespace(model=Path("/m"), output_len=8, seed=1, warmup=2, details=False)
    out = tmp_path / "k.jsonl"
    plain = gpu_parity.theirs_cmd(server, "concurrency", 8, 64, args, Path("d.json"), out)
    kept = gpu_parity.theirs_cmd(server, "concurrency", 8, 64, args, Path("d.json"), out, kept=True)
    assert plain[1:3] == ["-m", "sglang.bench_serving"] and plain[-2:] == ["--output-file", str(out)]
    # the same flags through benchmarks/bench_serving_run.py, which patches the session and adds --output-file itself
    assert kept[1].endswith("benchmarks/bench_serving_run.py") and kept[2:6] == ["--keepalive", str(out), "[[]]", "--"]
    # the same flags but a warm-up as wide as the level (8), which opens its 8 connections before the clock
    warm = plain.index("--warmup-requests") + 1
    assert plain[warm] == "2" and kept[6:] == plain[3:warm] + ["8"] + plain[warm + 1 : -2]
    runs = [_run(t, 8, v) for t, v in (("ours", 10.0), ("theirs", 12.0), (gpu_parity.KEPT, 11.0))]
    lines = gpu_parity.probe_table(runs, [("concurrency", 8)])
    assert "| concurrency | 8 | TTFT mean ms | 11 / 11 / 11 | 0.917 | 1.100 |" in lines
    settings = {"repeats": "1", "levels": "8:64", "rates": "", "input_len": 256, "output_len": 256, "warmup": 2}
    raw = {"date_utc": "d", "command": "c", "gpu": "g", "settings": settings}
    gpu_parity.write_table(tmp_path, raw, runs)
    text = (tmp_path / "parity-table.md").read_text()
    assert "The --kept-alive probe" in text and text.count("| concurrency | 8 | TTFT mean ms |") == 2


def test_the_keepalive_patch_reuses_one_session_per_level_and_closes_it_at_the_levels_end():
    made = []

    class Session:
        closed = False

        async def close(self):
            self.closed = True

    async def benchmark():  # bench_serving's coroutine of a level: requests in one event loop
        async with serving._create_bench_client_session() as a, serving._create_bench_client_session() as b:
            return a, b, a.closed

    serving = SimpleNamespace(_create_bench_client_session=lambda: made.append(Session()) or made[-1])
    serving.benchmark = benchmark
    bench_serving_run.keep_connections_alive(serving)
    a, b, closed_while_running = asyncio.run(serving.benchmark())
    assert a is b and len(made) == 1 and not closed_while_running and a.closed
    c, _, _ = asyncio.run(serving.benchmark())  # the next level: a session of its own
    assert c is not a and len(made) == 2


def test_the_bench_serving_runner_reads_its_options_in_either_order():
    want = ({"--step", "--keepalive"}, "o.jsonl", [["-a"]], ["--x", "1"])
    assert bench_serving_run.parse(["--keepalive", "--step", "o.jsonl", '[["-a"]]', "--", "--x", "1"]) == want
    assert bench_serving_run.parse(["--step", "--keepalive", "o.jsonl", '[["-a"]]', "--x", "1"]) == want
    assert bench_serving_run.parse(["o.jsonl", "[]"]) == (set(), "o.jsonl", [], [])
    with pytest.raises(SystemExit):
        bench_serving_run.parse(["--step", "o.jsonl"])


def test_three_tools_rotate_each_first_once_in_three_turns_and_two_alternate():
    tools = ("ours", "theirs", gpu_parity.KEPT)
    turns = [gpu_parity.rotation(tools, t) for t in range(3)]
    assert all(sorted(order) == sorted(tools) for order in turns)
    assert [[order.index(t) for order in turns] for t in tools] == [[0, 2, 1], [1, 0, 2], [2, 1, 0]]
    assert [gpu_parity.rotation(("ours", "theirs"), t) for t in (0, 1, 2)] == [
        ("ours", "theirs"),
        ("theirs", "ours"),
        ("ours", "theirs"),
    ]


def test_the_gc_watch_and_trace_flags_are_sglang_0_5_16_s_and_reach_the_launch():
    # the GPU suite's release (harness.SGLANG_VERSION), by the project's recorded parser of that release
    import harness  # tests/gpu, on the path through gpu_parity

    from sglang_deploy.launch.flags import flag_table

    table = flag_table(harness.SGLANG_VERSION)
    probes = {**gpu_parity.GC_WATCH_ARGS, **gpu_parity.SERVER_TRACE_ARGS}
    assert table.release == "0.5.16" and all(table.flags.get(name) for name in probes)
    launch = harness.render({**harness.DENSE_ARGS, **probes}, Path("/m"))
    assert "--enable-request-time-stats-logging" in launch.argv
    assert launch.argv[launch.argv.index("--gc-warning-threshold-secs") + 1] == "0.02"


def test_the_table_says_whether_the_server_s_gc_was_frozen(tmp_path):
    runs = [_run(t, 32, 100.0) for t in ("ours", "theirs")]
    settings = {"repeats": "1", "levels": "32:256", "rates": "", "input_len": 256, "output_len": 256, "warmup": 2}
    base = {"date_utc": "d", "command": "c", "gpu": "g"}
    frozen = "The server's GC frozen after the first level's warm-up (POST /freeze_gc: status 200)."
    gpu_parity.write_table(tmp_path, {**base, "settings": settings, "freeze_gc": {"frozen": True, "status": 200}}, runs)
    assert frozen in (tmp_path / "parity-table.md").read_text()
    refused = {"frozen": False, "status": None, "error": "ConnectionRefusedError: x"}
    gpu_parity.write_table(tmp_path, {**base, "settings": settings, "freeze_gc": refused}, runs)
    assert (
        "GC NOT frozen after the first level's warm-up (POST /freeze_gc: ConnectionRefusedError: x)"
        in (tmp_path / "parity-table.md").read_text()
    )
    gpu_parity.write_table(tmp_path, {**base, "settings": {**settings, "no_freeze_gc": "True"}}, runs)
    text = (tmp_path / "parity-table.md").read_text()
    assert frozen not in text and "GC left as it started (--no-freeze-gc)" in text


def test_long_gc_pauses_are_placed_in_the_run_they_fell_in(tmp_path, monkeypatch):
    """The server log and runs of results/gpu-h200/parity-2026-12-02-d5612c5's c32-trace (a GPU host in UTC): its
    three full collections fell in one run of each tool, as the record's table says; a line of another kind and a
    pause outside every run are kept apart."""
    import gzip

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    record = REPO / "tests/fixtures/sglang-0.5.16-h200/parity-c32-trace"
    log = gzip.open(record / "parity-server.log.gz").read().decode(errors="replace")
    log += "\n[2026-12-02 23:00:00] LONG GARBAGE COLLECTION DETECTED | Generation 1 | Duration: 0.0250s | x\n"
    log += "[2026-12-02 21:02:33] Freezing GC in Tokenizer Manager process. gen0: 1->0\n"
    runs = json.loads((record / "parity-raw.json").read_text())["runs"]
    found = gpu_parity.long_gcs(log, runs)
    assert [(g["at"][11:], g["generation"], g["duration_s"], g["run"]) for g in found] == [
        ("21:02:32", "2", 0.4245, "ours r0 concurrency 32"),
        ("21:04:18", "2", 0.4339, "theirs r1 concurrency 32"),
        ("21:05:48", "2", 0.3733, "theirs-kept-alive r2 concurrency 32"),
        ("23:00:00", "1", 0.025, None),
    ]
    settings = {"repeats": "1", "levels": "32:256", "rates": "", "input_len": 256, "output_len": 256, "warmup": 2}
    meta = {"date_utc": "d", "command": "c", "gpu": "g", "settings": settings, "long_gc": found[:1] + found[3:]}
    gpu_parity.write_table(tmp_path, meta, [_run(t, 32, 100.0) for t in ("ours", "theirs")])
    assert (
        "The server's GC pauses over 20 ms: 2026-12-02 21:02:32 generation 2 0.4245 s (in ours r0 concurrency 32); "
        "2026-12-02 23:00:00 generation 1 0.0250 s (in no run)." in (tmp_path / "parity-table.md").read_text()
    )
    gpu_parity.write_table(tmp_path, {**meta, "long_gc": []}, [_run(t, 32, 100.0) for t in ("ours", "theirs")])
    assert "The server's GC pauses over 20 ms: none." in (tmp_path / "parity-table.md").read_text()
