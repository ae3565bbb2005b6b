"""Fleet steps of a rolling deploy: the router's manifest and states, draining a replica, the summary."""

from __future__ import annotations  # noqa: I001 (emulator_proc must come before the modules)

import contextlib
import http.client
import json
import socketserver
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from emulator_proc import Emulator, free_port, run_module  # first: puts the repo's module_utils on the import path

import sglang_drain
import sglang_router_wait
from sglang_deploy.fleet import fleet
from ansible_collections.sglang.deploy.plugins.module_utils import fleet_probes

FIXTURES = Path(__file__).parent / "fixtures"
WORKERS = [{"id": "gpu-1", "url": "http://10.0.0.11:30000"}, {"id": "gpu-2", "url": "http://10.0.0.12:30000"}]


def test_manifest_leaves_out_the_batch():
    assert fleet.manifest(WORKERS) == {"version": 1, "workers": WORKERS}
    assert fleet.manifest(WORKERS, ["gpu-1"]) == {"version": 1, "workers": WORKERS[1:]}


def test_the_manifest_file_text_is_written_as_before():
    """The one rendering of the file (its writer's content and the router's comparison): as to_nice_json wrote it,
    so an unchanged fleet's list is not rewritten once on the upgrade."""
    from ansible.plugins.filter.core import to_nice_json

    assert fleet.manifest_text(WORKERS, ["gpu-1"]) == to_nice_json(fleet.manifest(WORKERS, ["gpu-1"])) + "\n"


def test_a_worker_url_only_its_own_host_reaches_is_found_but_on_the_router_host():
    """The address rule is nodes.local_only's (test_nodes); here the URL's host is what it judges."""
    local = [
        {"id": "gpu-3", "url": "http://LOCALHOST:30000"},
        {"id": "gpu-4", "url": "https://[::ffff:127.0.0.1]/v1"},
        {"id": "gpu-5", "url": "http://%31%32%37.0.0.1:30000"},  # URL parsers decode the host
    ]
    workers = [*WORKERS, *local, {"id": "router", "url": "http://127.0.0.1:30001"}]
    assert fleet.local_workers(workers, "router") == ["gpu-3", "gpu-4", "gpu-5"]
    assert fleet.local_workers([*WORKERS, {"id": "bad", "url": "http://[::1:30000"}], "router") == []


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
    states = fleet_probes.worker_states(listing)
    assert set(states) == {"sglang-fleet-1", "sglang-fleet-2", "sglang-fleet-3"}
    assert states["sglang-fleet-2"] == {
        "url": "http://sglang-fleet-2:30000",
        "status": "ready",
        "healthy": True,
        "load": 0,
        "model": "qwen3.5-397b",
        "worker_id": "01a22ecc-4d8c-751f-b914-1b299895941a",
    }


def test_in_flight_sums_running_and_queued_over_ranks_only():
    text = (
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{tp_rank="0"} 3.0\nsglang:num_running_reqs{tp_rank="1"} 2.0\n'
        'sglang:num_queue_reqs{tp_rank="0"} 1.0\nsglang:num_running_reqs_offline_batch{tp_rank="0"} 7.0\n'
    )
    assert fleet_probes.in_flight(text) == 6.0
    assert fleet_probes.in_flight("sglang:num_queue_reqs 1\n") is None
    # a sample may carry a timestamp after its value, and a label value a space
    assert fleet_probes.in_flight('sglang:num_running_reqs{model="a b"} 2 1764569400000\n') == 2.0


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


def _emulator_count(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        return next(float(line.split()[-1]) for line in resp.read().decode().splitlines() if line.startswith(name))


def _wait_running(url: str) -> None:
    """Until the emulator runs one request (30 s guards a hang, not speed)."""
    deadline = time.monotonic() + 30
    while _emulator_count(url, "sglang:num_running_reqs") != 1:
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.05)


def test_drain_waits_for_running_requests(tmp_path, capsys):
    emu = Emulator(tmp_path, "--enable-metrics", decode_tok_s=100).wait_ready()
    try:
        worker = threading.Thread(target=_stream, args=(emu.url, 150))  # about 1.5 s of decode
        finished = _emulator_count(emu.url, "sglang:num_requests_total")  # the server's own warm-up
        worker.start()
        _wait_running(emu.url)
        failed, res = run_module(sglang_drain, {"url": emu.url, "timeout": 30}, capsys)
        assert not failed and res["metrics"] and res["running"] == 0
        assert _emulator_count(emu.url, "sglang:num_requests_total") == finished + 1  # the drain waited for it
        assert not worker.is_alive() or worker.join(2) is None
        worker.join()
        threading.Thread(target=_stream, args=(emu.url, 1000), daemon=True).start()  # about 10 s of decode
        _wait_running(emu.url)  # not a fixed 0.4 s: a loaded machine may start it late
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


@contextlib.contextmanager
def _answering(reply):
    """The URL of a server that answers every request with ``reply``: bytes, or a function that writes to the
    client's socket."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.recv(65536)
            with contextlib.suppress(OSError):
                reply(self.request) if callable(reply) else self.request.sendall(reply)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _http(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def _drip(sock) -> None:
    """A 200 whose body comes a byte every 0.1 s for 10 s: no read waits long, the whole never ends in time."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    for _ in range(100):
        sock.sendall(b"s")
        time.sleep(0.1)


def _endless(sock) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
    for _ in range(64):
        sock.sendall(b"sglang:num_queue_reqs 0\n" * 2731)  # 64 KiB


def probe_time(reply) -> float:
    """1 s for the drip (10 s long: it must outlast the probe), 30 s for the others: an answer sent at once must be
    read in full and refused for what it is, not cut by the probe's time on a loaded machine (a hang guard)."""
    return 1.0 if reply is _drip else 30.0


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (_http(b"not json"), "Expecting value"),
        (_http(b"[]"), "a JSON list without a list of workers"),
        (_http(b'{"workers": ["gpu-1"]}'), "a worker that is not an object"),
        (_http(b'{"workers": [{"labels": ["smg.ai/discovery-id"]}]}'), "whose labels are not"),
        (_http(b'{"workers": [{"url": ["http://a:1"]}]}'), "whose id or url is not a string"),
        (_http(b"[" * 100_000), "recursion"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", r"not as SGLang or smg answer \(BadStatusLine"),
        (_drip, "not in full within 1 s"),
        (_endless, "body is over 1048576 bytes"),
    ],
)
def test_a_router_answer_that_is_not_a_worker_list_is_a_fleet_error_naming_the_host(monkeypatch, reply, reason):
    """Each raised ValueError, JSONDecodeError, AttributeError or RecursionError, hung past the probe time or read
    without an end (issue 20 items 6 and 9)."""
    monkeypatch.setattr(fleet_probes, "PROBE_TIMEOUT_S", probe_time(reply))
    monkeypatch.setattr(fleet_probes, "MAX_BODY_BYTES", 1 << 20)
    with _answering(reply) as url:
        with pytest.raises(fleet_probes.FleetError, match=reason) as err:
            fleet_probes.router_workers(url)
    assert url in str(err.value) and not isinstance(err.value, fleet_probes.Unreachable)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (_http(b"sglang:num_running_reqs abc\n"), "line 1: sglang:num_running_reqs has no count"),
        (_http(b'# HELP\nsglang:num_running_reqs{tp_rank="0"} NaN\n'), "line 2: sglang:num_running_reqs has no"),
        (_http(b"sglang:num_queue_reqs -1\nsglang:num_running_reqs 0\n"), "line 1: sglang:num_queue_reqs has no"),
        (_http(b"sglang:num_running_reqs\n"), "has no count"),
        (_drip, "not in full within 1 s"),
        (_endless, "body is over 1048576 bytes"),
    ],
)
def test_a_metrics_page_that_is_not_sglangs_stops_the_drain_naming_the_host(monkeypatch, reply, reason):
    monkeypatch.setattr(fleet_probes, "PROBE_TIMEOUT_S", probe_time(reply))
    monkeypatch.setattr(fleet_probes, "MAX_BODY_BYTES", 1 << 20)
    with _answering(reply) as url:
        with pytest.raises(fleet_probes.FleetError, match=reason) as err:
            fleet_probes.wait_drained(url, timeout=30)
    assert url in str(err.value)


def test_the_modules_fail_with_the_reason_on_a_hostile_answer(capsys):
    with _answering(_http(b"sglang:num_running_reqs abc\n")) as url:
        failed, res = run_module(sglang_drain, {"url": url}, capsys)
        assert failed and res["msg"].startswith(f"{url}/metrics is not SGLang's (line 1:"), res
        failed, res = run_module(sglang_router_wait, {"url": url}, capsys)
        assert failed and not res["unreachable"] and f"the router at {url} did not answer" in res["msg"], res


def test_router_wait_names_the_fix_when_nothing_answers(capsys):
    failed, res = run_module(sglang_router_wait, {"url": f"http://127.0.0.1:{free_port()}"}, capsys)
    assert failed and res["unreachable"] and "playbooks/router.yml" in res["msg"]


def test_router_and_replica_keys_must_be_one_key():
    key, other = "k" * 24, "o" * 24
    assert fleet.key_mismatch(key, {"a": key, "b": key}) == []
    assert fleet.key_mismatch("", {"a": "", "b": None}) == []
    problems = fleet.key_mismatch("", {"a": key, "b": ""}) + fleet.key_mismatch(key, {"a": other, "b": "", "c": key})
    assert [p.split(" ", 2)[:2] for p in problems] == [["a", "require"], ["a", "have"], ["b", "have"]]
    assert "set sglang_router_api_key" in problems[0] and "another sglang_api_key" in problems[1]
    assert all(key not in p and other not in p for p in problems)
    # a keyless replica on a private network (sglang_server_allow_open_bind) takes the router's key
    assert fleet.key_mismatch(key, {"a": key, "b": ""}, open_ok=["b"]) == []


def test_summary_of_a_stopped_roll():
    results = {"a": {"restarted": True}, "b": {"failed": True, "rolled_back_to": "baseline", "serves": "baseline"}}
    rows = fleet.summary(["a", "b", "c"], {"a": "baseline", "b": "baseline", "c": "baseline"}, results, "nextn", True)
    assert [(r["host"], r["serves"]) for r in rows] == [("a", "nextn"), ("b", "baseline"), ("c", "baseline")]
    assert [r["outcome"] for r in rows] == ["deployed", "rolled back", "untouched"]
    assert [r["state"] for r in rows] == [
        "deployed",
        "nextn failed here, rolled back to baseline, roll stopped",
        "untouched",
    ]


def _listing() -> dict:
    """smg 1.13.0's GET /workers of the lab fleet, recorded: three replicas, ready and healthy."""
    return json.loads((FIXTURES / "smg-1.13.0-workers.json").read_text())


def _router(**overrides) -> dict:
    """The router's state as playbooks/status.yml publishes it (unit parsed), for fleet.fleet_view()."""
    members = [{"id": f"sglang-fleet-{i}", "url": f"http://sglang-fleet-{i}:30000"} for i in (1, 2, 3)]
    return {
        "deployed": True,
        "url": "http://127.0.0.1:8000",
        "version": "1.13.0",
        "service": "smg",
        "policy": "round_robin",
        "unit": {"LoadState": "loaded", "ActiveState": "active", "SubState": "running"},
        "readiness": {"status": 200, "body": {"status": "ready", "healthy_workers": 3, "total_workers": 3}},
        "workers": fleet_probes.worker_states(_listing()),
        "error": None,
        "members": members,
        **overrides,
    }


def _hosts(**profiles) -> dict:
    names = {f"sglang-fleet-{i}": "baseline" for i in (1, 2, 3)}
    names.update({k.replace("_", "-"): v for k, v in profiles.items()})
    return {
        h: {"profile": p, "serving": p is not None, "stack": "stable-0.5.23-2026-11-30-1a2b"} for h, p in names.items()
    }


def test_a_fleet_that_matches_has_no_mismatch():
    view = fleet.fleet_view("router-1", _router(), _hosts())
    assert view["ok"] and view["mismatches"] == []
    assert view["profiles"] == {"baseline": ["sglang-fleet-1", "sglang-fleet-2", "sglang-fleet-3"]}
    assert view["router"]["unit"] == "active/running" and view["router"]["ready"] is True
    assert [(r["host"], r["router_status"], r["healthy"], r["load"]) for r in view["replicas"]] == [
        (f"sglang-fleet-{i}", "ready", True, 0) for i in (1, 2, 3)
    ]


def test_every_mismatch_a_user_needs_to_see():
    listing = _listing()
    third = listing["workers"][2]
    third.update(status="draining", is_healthy=False)
    # Added by hand through POST /workers: no discovery label, a URL the inventory does not have.
    listing["workers"].append({"id": "w-9", "url": "http://10.0.0.9:30000", "status": "ready", "is_healthy": True})
    router = _router(workers=fleet_probes.worker_states(listing))
    router["members"].append({"id": "sglang-fleet-4", "url": "http://sglang-fleet-4:30000"})
    view = fleet.fleet_view("router-1", router, _hosts(sglang_fleet_2="nextn", sglang_fleet_4="baseline"))
    got = {(m["kind"], m["subject"]) for m in view["mismatches"]}
    assert got == {
        ("profile_differs", "sglang-fleet-2"),
        ("not_routed", "sglang-fleet-3"),
        ("not_in_router", "sglang-fleet-4"),
        ("unknown_worker", "http://10.0.0.9:30000"),
    }
    text = {m["kind"]: m["message"] for m in view["mismatches"]}
    assert "serves profile nextn, the other replicas baseline" in text["profile_differs"]
    assert "draining, unhealthy" in text["not_routed"] and "playbooks/router.yml" in text["not_routed"]
    assert "DELETE /workers/w-9" in text["unknown_worker"]
    assert view["replicas"][3]["router_status"] == "not listed" and not view["ok"]
    assert view["unknown_workers"][0]["url"] == "http://10.0.0.9:30000"


def test_a_worker_left_in_the_routers_file_is_not_a_replica():
    listing = _listing()
    listing["workers"][2]["labels"]["smg.ai/discovery-id"] = "old-host"
    view = fleet.fleet_view("router-1", _router(workers=fleet_probes.worker_states(listing)), _hosts())
    # The third replica is listed by its URL (its entry carries an id the inventory no longer has).
    assert [(m["kind"], m["subject"]) for m in view["mismatches"]] == []
    listing["workers"][2]["url"] = "http://10.0.0.7:30000"
    view = fleet.fleet_view("router-1", _router(workers=fleet_probes.worker_states(listing)), _hosts())
    kinds = {m["kind"]: m for m in view["mismatches"]}
    assert set(kinds) == {"not_in_router", "unknown_worker"}
    assert "worker list file still names it" in kinds["unknown_worker"]["message"]


def test_profiles_split_evenly_flag_every_replica_and_stacks_are_compared_too():
    listing = _listing()
    del listing["workers"][2]
    router = _router(members=_router()["members"][:2], workers=fleet_probes.worker_states(listing))
    hosts = _hosts(sglang_fleet_2="nextn")
    hosts["sglang-fleet-2"]["stack"] = "nightly-9f8e"
    view = fleet.fleet_view("router-1", router, hosts)
    assert sorted((m["kind"], m["subject"]) for m in view["mismatches"]) == [
        ("profile_differs", "sglang-fleet-1"),
        ("profile_differs", "sglang-fleet-2"),
        ("stack_differs", "sglang-fleet-1"),
        ("stack_differs", "sglang-fleet-2"),
    ]
    assert "sglang-fleet-1: baseline, sglang-fleet-2: nextn" in view["mismatches"][0]["message"]


def test_a_replica_that_serves_nothing_and_a_router_that_is_down():
    hosts = _hosts()
    hosts["sglang-fleet-1"].update(serving=False)
    down = _router(
        unit={"ActiveState": "failed", "SubState": "failed"},
        readiness={"status": -1, "body": None},
        workers=None,
        error="The router does not answer: ... Start it (playbooks/router.yml)",
    )
    view = fleet.fleet_view("router-1", down, hosts)
    assert [m["kind"] for m in view["mismatches"]] == ["router_unit", "router_unreachable", "not_serving"]
    assert "journalctl -u smg" in view["mismatches"][0]["message"]
    assert view["router"]["ready"] is None and view["replicas"][0]["router_status"] is None
    missing = fleet.fleet_view("router-1", {"deployed": False, "members": [], "unit": {}}, {})
    assert [m["kind"] for m in missing["mismatches"]] == ["router_missing"]
    not_ready = _router(
        readiness={"status": 503, "body": {"status": "not ready", "reason": "insufficient healthy workers"}}
    )
    view = fleet.fleet_view("router-1", not_ready, _hosts())
    assert [m["kind"] for m in view["mismatches"]] == ["router_not_ready"]
    assert "insufficient healthy workers" in view["mismatches"][0]["message"]


def test_status_prints_the_fleet_behind_the_router():
    from sglang_deploy.cli.runs import format_fleet

    listing = _listing()
    listing["workers"][2].update(status="draining", is_healthy=False)
    view = fleet.fleet_view("router-1", _router(workers=fleet_probes.worker_states(listing)), _hosts())
    lines = format_fleet({"router-1": view})
    assert lines[0] == (
        "\nrouter router-1: smg 1.13.0, policy round_robin, http://127.0.0.1:8000, unit active/running, "
        "ready (3/3 workers healthy)"
    )
    assert lines[4].split() == [
        "sglang-fleet-3",
        "baseline",
        "stable-0.5.23-2026-11-30-1a2b",
        "draining",
        "unhealthy",
        "0",
        "http://sglang-fleet-3:30000",
    ]
    assert lines[5] == "fleet behind router-1: 1 mismatch(es)" and lines[6].startswith("  not_routed: ")
    ok = format_fleet({"router-1": fleet.fleet_view("router-1", _router(), _hosts())})
    assert ok[-1] == "fleet behind router-1: every replica serves baseline, routed and healthy"


def test_status_reads_the_fleet_from_what_the_status_playbook_publishes():
    from sglang_deploy import api

    unit = "LoadState=loaded\nActiveState=active\nSubState=running\n"
    data = {
        "sglang_status": {
            f"sglang-fleet-{i}": {"unit": unit, "local": {"sglang_server": {"profile": p}}, "manifest": {}}
            for i, p in ((1, "baseline"), (2, "baseline"), (3, "nextn"))
        },
        "sglang_router_status": {
            "router-1": {**_router(), "unit": "LoadState=loaded\nActiveState=active\nSubState=running\n"}
        },
    }
    views = api.parse_fleet(data, api.parse_status(data))
    assert views["router-1"]["router"]["unit"] == "active/running"
    assert [(m["kind"], m["subject"]) for m in views["router-1"]["mismatches"]] == [
        ("profile_differs", "sglang-fleet-3")
    ]


def test_status_shows_a_router_host_that_did_not_answer():
    """An unreachable router host published nothing, and status showed no fleet block at all."""
    from sglang_deploy import api

    unit = "LoadState=loaded\nActiveState=active\nSubState=running\n"
    data = {
        "sglang_status": {"sglang-fleet-1": {"unit": unit, "local": {"sglang_server": {"profile": "baseline"}}}},
        "sglang_router_hosts": ["router-1"],
    }
    view = api.parse_fleet(data, api.parse_status(data))["router-1"]
    assert [(m["kind"], m["subject"]) for m in view["mismatches"]] == [("router_unreachable", "router-1")]
    assert "router host router-1 did not report" in view["mismatches"][0]["message"] and not view["ok"]
    assert api.parse_fleet({**data, "sglang_router_hosts": []}, api.parse_status(data)) == {}


def test_retries_off_are_refused_only_where_a_watched_worker_could_lose_requests():
    """fleet.retry_problems: smg's retries carry a stalled replica's requests to another at the watchdog's restart."""
    off = {"disable-retries": True, "--retry-max-retries": 0, "max_buffered_request_bytes": 0}
    (problem,) = fleet.retry_problems(off, ["gpu-2", "gpu-1"])
    assert "disable-retries: True, retry-max-retries: 0, max-buffered-request-bytes: 0" in problem
    assert "runs on gpu-1, gpu-2" in problem and "sglang_watch_enabled: false" in problem
    assert fleet.retry_problems(off, []) == []  # no watchdog behind the router: the operator's choice
    kept = {"disable-retries": False, "retry-max-retries": 3, "max-buffered-request-bytes": 4096, "log-json": True}
    assert fleet.retry_problems(kept, ["gpu-1"]) == []
    # argparse takes an abbreviation, and the role renders a quoted number as the number
    (short,) = fleet.retry_problems(
        {"disable-retr": True, "retry-max-retri": "1", "max-buffered-request-b": "0"}, ["h"]
    )
    assert "disable-retr: True (--disable-retries), retry-max-retri: '1' (--retry-max-retries)" in short
    assert "max-buffered-request-b: '0' (--max-buffered-request-bytes)" in short
    assert fleet.retry_problems({"retry-max-retries": "3", "max-b": "4096"}, ["h"]) == []
    assert fleet.retry_problems(["disable-retries"], ["h"]) == []  # not a mapping: router_flag_problems says so
