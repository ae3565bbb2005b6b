"""The GPU smoke: what every change to SGLang-facing code runs before it lands (docs/gpu.md). One server of the
small dense model through the project's launcher, on one GPU: launch, ready, API key masked, `sglang-deploy
bench`, the GC freeze the server role sends, stop; all of it, the model folders and SGLang's first-start kernel builds included, within SMOKE_BUDGET_S.

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

from ansible_collections.sglang.deploy.plugins.module_utils import startup
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import freeze_gc

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


def test_freeze_gc_wants_the_key_and_logs_the_line_the_role_reads(dense):
    """The server role's freeze (sglang_ready, after its sanity prompts; the bench here warmed the server) on real
    SGLang: /freeze_gc is ADMIN_OPTIONAL, so a server with only --api-key wants that key, and the freeze logs the
    line startup.froze_gc looks for in the unit's journal, so a re-run does not freeze the same process again."""
    assert freeze_gc(dense.url, None) == {"frozen": False, "status": 401}
    TIMES["freeze_gc"] = freeze_gc(dense.url, dense.api_key)
    assert TIMES["freeze_gc"] == {"frozen": True, "status": 200}
    deadline = time.monotonic() + 10
    while startup.FREEZE_LINE not in dense.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert startup.FREEZE_LINE in dense.log_text(), "no freeze line in the server log"


def test_stop_frees_the_gpu_within_the_budget(dense, clock, out_dir):
    record = harness.stop_and_watch_memory(dense)
    TIMES["stop_s"] = record["main_exit_s"]
    TIMES["total_s"] = round(time.monotonic() - clock, 1)
    harness.write_json(out_dir / "smoke.json", {**TIMES, "budget_s": SMOKE_BUDGET_S, "stop": record})
    assert record["gpu_memory_freed_s"] is not None and not record["sigkill"], record
    assert TIMES["total_s"] <= SMOKE_BUDGET_S, json.dumps(TIMES)
