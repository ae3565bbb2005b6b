"""The GPU smoke: what every change to SGLang-facing code runs before it lands (docs/gpu.md). One server of the
small dense model through the project's launcher, on one GPU: launch, ready, API key masked, `sglang-deploy
bench`, stop; all of it, the model folders and SGLang's first-start kernel builds included, within SMOKE_BUDGET_S.

    python -m pytest tests/gpu/test_smoke.py -v --gpu-out results/gpu-smoke

Tests run in file order on one server; the last one stops it and writes smoke.json (the durations).
"""

from __future__ import annotations

import json
import time

import benchcmp
import harness
import pytest
from harness import API_KEY, DENSE_ARGS, Server

SMOKE_BUDGET_S = 300.0
LEVELS = (1, 8)
INPUT_LEN = OUTPUT_LEN = 256
TIMES: dict = {}


@pytest.fixture(scope="session")
def clock() -> float:
    """The smoke's start, taken before the model folders are made (session fixtures start in argument order)."""
    return time.monotonic()


@pytest.fixture(scope="module")
def dense(clock, out_dir, models):
    TIMES["models_s"] = round(time.monotonic() - clock, 1)
    server = Server(harness.render(DENSE_ARGS, models["dense"]), out_dir / "logs", "smoke")
    yield server
    if server.proc.poll() is None:
        server.stop()


def test_launch_becomes_ready(dense):
    TIMES["stages_first_seen_s"] = dense.wait_ready(timeout=SMOKE_BUDGET_S)["first_seen"]  # raises unless ready
    TIMES["ready_s"] = round(time.monotonic() - dense.started, 1)
    status, _, _ = dense.request("GET", "/v1/models", api_key=False)
    assert status == 401, "the server answered /v1/models without the API key"


def test_api_key_masked(dense):
    harness.assert_key_masked(dense)


def test_bench(dense, out_dir):
    start = time.monotonic()
    result = benchcmp.ours(dense, LEVELS, out_dir / "smoke-bench.json", INPUT_LEN, OUTPUT_LEN)
    TIMES["bench_s"] = round(time.monotonic() - start, 1)
    assert result["server_emulated"] is False
    for level in result["levels"]:
        assert level["failed"] == 0 and level["output_len_mismatch"]["count"] == 0, level
    TIMES["output_tok_s"] = {level["concurrency"]: level["output_throughput_tok_s"] for level in result["levels"]}
    written = (out_dir / "smoke-bench.json").read_text() + (out_dir / "smoke-bench.txt").read_text()
    assert API_KEY not in written


def test_stop_frees_the_gpu_within_the_budget(dense, clock, out_dir):
    record = harness.stop_and_watch_memory(dense)
    TIMES["stop_s"] = record["main_exit_s"]
    TIMES["total_s"] = round(time.monotonic() - clock, 1)
    harness.write_json(out_dir / "smoke.json", {**TIMES, "budget_s": SMOKE_BUDGET_S, "stop": record})
    assert record["gpu_memory_freed_s"] is not None and not record["sigkill"], record
    assert TIMES["total_s"] <= SMOKE_BUDGET_S, json.dumps(TIMES)
