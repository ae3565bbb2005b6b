"""Fleet steps of a rolling deploy: the router's manifest and states, draining a replica, the summary."""

from __future__ import annotations  # noqa: I001 (emulator_proc must come before the modules)

import contextlib
import http.client
import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from emulator_proc import Emulator, free_port, run_module  # first: puts the repo's module_utils on the import path

import sglang_drain
import sglang_router_wait
from sglang_deploy import fleet

FIXTURES = Path(__file__).parent / "fixtures"
WORKERS = [{"id": "gpu-1", "url": "http://10.0.0.11:30000"}, {"id": "gpu-2", "url": "http://10.0.0.12:30000"}]


def test_manifest_leaves_out_the_batch():
    assert fleet.manifest(WORKERS) == {"version": 1, "workers": WORKERS}
    assert fleet.manifest(WORKERS, ["gpu-1"]) == {"version": 1, "workers": WORKERS[1:]}


@pytest.mark.parametrize(
    "workers",
    [
        [{"id": "gpu-1", "url": "10.0.0.11:30000"}],
        [{"id": "", "url": "http://10.0.0.11:30000"}],
        [WORKERS[0], {"id": "gpu-1", "url": "http://10.0.0.13:30000"}],
        [WORKERS[0], {"id": "gpu-3", "url": WORKERS[0]["url"]}],
    ],
)
def test_manifest_refuses_bad_workers(workers):
    with pytest.raises(ValueError):
        fleet.manifest(workers)


def test_worker_states_from_a_recorded_smg_listing():
    listing = json.loads((FIXTURES / "smg-1.13.0-workers.json").read_text())
    states = fleet.worker_states(listing)
    assert set(states) == {"sglang-fleet-1", "sglang-fleet-2", "sglang-fleet-3"}
    assert states["sglang-fleet-2"] == {"url": "http://sglang-fleet-2:30000", "status": "ready", "healthy": True}


def test_in_flight_sums_running_and_queued_over_ranks_only():
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{tp_rank="0"} 3.0\nsglang:num_running_reqs{tp_rank="1"} 2.0\n'
        'sglang:num_queue_reqs{tp_rank="0"} 1.0\nsglang:num_running_reqs_offline_batch{tp_rank="0"} 7.0\n'
    )
    assert fleet.in_flight(text) == 6.0
    assert fleet.in_flight("sglang:num_queue_reqs 1\n") is None


def _stream(url: str, tokens: int) -> None:
    """One streamed request; cut off quietly when the server stops."""
    body = json.dumps(
        {
            "model": "qwen",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with contextlib.suppress(OSError, http.client.HTTPException), urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


def test_drain_waits_for_running_requests(tmp_path, capsys):
    emu = Emulator(tmp_path, "--enable-metrics", decode_tok_s=100).wait_ready()
    try:
        worker = threading.Thread(target=_stream, args=(emu.url, 150))  # about 1.5 s of decode
        worker.start()
        time.sleep(0.4)
        failed, res = run_module(sglang_drain, {"url": emu.url, "timeout": 30}, capsys)
        assert not failed and res["metrics"] and res["running"] == 0 and res["elapsed"] >= 0.5
        assert not worker.is_alive() or worker.join(2) is None
        worker.join()
        threading.Thread(target=_stream, args=(emu.url, 1000), daemon=True).start()
        time.sleep(0.4)
        failed, res = run_module(sglang_drain, {"url": emu.url, "timeout": 1}, capsys)
        assert failed and "still has 1 running requests" in res["msg"]
    finally:
        emu.stop()


def test_drain_without_metrics_or_server_returns_at_once(tmp_path, capsys):
    emu = Emulator(tmp_path).wait_ready()
    try:
        failed, res = run_module(sglang_drain, {"url": emu.url, "timeout": 30}, capsys)
        assert not failed and res["metrics"] is False and "sglang_enable_metrics" in res["reason"]
    finally:
        emu.stop()
    failed, res = run_module(sglang_drain, {"url": f"http://127.0.0.1:{free_port()}"}, capsys)
    assert not failed and res["running"] == 0 and "not answering" in res["reason"]


def test_router_wait_names_the_fix_when_nothing_answers(capsys):
    failed, res = run_module(sglang_router_wait, {"url": f"http://127.0.0.1:{free_port()}"}, capsys)
    assert failed and res["unreachable"] and "playbooks/router.yml" in res["msg"]


def test_summary_of_a_stopped_roll():
    rows = fleet.summary(
        ["a", "b", "c"], {"a": "baseline", "b": "baseline", "c": "baseline"}, {"a": "nextn"}, {"b": "baseline"}, "nextn"
    )
    assert [(r["host"], r["serves"]) for r in rows] == [("a", "nextn"), ("b", "baseline"), ("c", "baseline")]
    assert [r["state"] for r in rows] == ["updated", "nextn failed here, roll stopped", "untouched"]


def test_status_lists_what_the_router_routes_to():
    from sglang_deploy.cli.runs import format_routers

    states = fleet.worker_states(json.loads((FIXTURES / "smg-1.13.0-workers.json").read_text()))
    states["sglang-fleet-3"].update(status="draining", healthy=False)
    lines = format_routers({"router-1": {"url": "http://127.0.0.1:8000", "workers": states, "error": None}})
    assert lines[0] == "router router-1 (http://127.0.0.1:8000): 2/3 workers ready"
    assert lines[3] == "  sglang-fleet-3  draining (unhealthy)  http://sglang-fleet-3:30000"
