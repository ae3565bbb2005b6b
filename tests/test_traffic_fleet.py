"""Capture where a fleet runs (issue 51): every replica's capture merged into one trace by arrival, bounded as one
capture, prefix ids shared across replicas, and the smg router's count of the client requests it answered (smg
1.13.0 logs one line per client request, with no token counts: tests/fixtures/smg-1.13.0-request-log.txt)."""

from __future__ import annotations

import contextlib
import json
import re
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
from emulator_proc import Emulator, free_port, run_module  # first: puts the repo's module_utils on the path

import sglang_router_traffic

from sglang_deploy.api import traffic_capture as api_capture
from sglang_deploy.traffic import merge, traffic
from ansible_collections.sglang.deploy.plugins.module_utils import server_http
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, router_log, trace

FIXTURE = Path(__file__).parent / "fixtures" / "smg-1.13.0-request-log.txt"
KEY_OF_CAPTURE = b"a-capture-secret-0123456789abcdef"
R = trace.Record


def _part(host: str, start: float, *records, texts=None, window=(1.0, 1e10)) -> merge.Part:
    return merge.Part(host, start, list(records), window, texts)


def test_replicas_merge_by_arrival_and_share_prefix_ids():
    a = _part("a", 100.0, R(0, 600, 3, (77, 5)), R(500, 600, 4, (77, 6)), texts=["a0", "a1"])
    b = _part("b", 100.2, R(0, 600, 5, (77, 9)), R(100, 10, 2, ()), texts=["b0", "b1"])
    got = merge.merge([a, b], 60, 100)
    assert [r.timestamp for r in got.records] == [0, 200, 300, 500]
    assert [r.output_length for r in got.records] == [3, 5, 2, 4] and got.texts == ["a0", "b0", "b1", "a1"]
    # the digest both replicas saw is one id; each host's own blocks their own
    assert [r.hash_ids for r in got.records] == [(0, 1), (0, 2), (), (0, 3)]
    assert got.stop is None and got.hosts == {"a": 2, "b": 2}
    assert merge.merge([a, _part("b", 100.2, *b.records)], 60, 100).texts is None  # text only where every host has it
    assert got.outside == 0


def test_the_bounds_apply_to_the_merged_trace():
    a = _part("a", 10.0, *(R(i * 1000, 5, 1) for i in range(10)))
    b = _part("b", 10.5, *(R(i * 1000, 5, 1) for i in range(10)))
    got = merge.merge([a, b], 3, 100)
    assert len(got.records) == 7 and got.records[-1].timestamp == 3000 and got.stop == "3 s of arrivals were captured"
    got = merge.merge([a, b], 60, 5)
    assert got.hosts == {"a": 3, "b": 2} and got.stop == "5 requests were captured"
    got = merge.merge([a, b], 60, 100, max_bytes=400)
    assert 0 < len(got.records) < 20 and got.stop.startswith("the trace's")
    assert len(trace.dumps(got.records)) <= 400


def test_the_merged_trace_is_sized_with_its_numbered_ids_not_the_hosts_digests():
    """A host's ids are 20-digit keyed digests; the trace holds them numbered (0, 1, ...): sized with the digests, the
    trace was cut long before its bytes were reached."""
    a = _part("a", 10.0, *(R(i * 100, 5, 1, (2**64 - 1 - i, 2**64 - 100 - i, 2**64 - 1000 - i)) for i in range(10)))
    got = merge.merge([a], 60, 100, max_bytes=1000)
    assert len(got.records) == 10 and got.stop is None, got.stop
    assert len(trace.dumps(got.records)) <= 1000


def test_the_hosts_answers_are_bounded_together_before_they_are_parsed(tmp_path, monkeypatch):
    """Up to 1024 hosts, each within one capture's bounds, are still one capture: their traces together at most
    256 MiB, their text files together at most 256 MiB (here shrunk), checked before a line is parsed."""
    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", 600)
    monkeypatch.setattr(api_capture.trace, "parse", lambda *a, **k: pytest.fail("parsed before the total was checked"))
    big = [R(i * 10, 9, 4, (2**64 - 1 - i,)) for i in range(6)]  # each host's trace under 600 bytes, both over
    found = _answer("gpu-1", big, 50.0) | _answer("gpu-2", big, 50.0)
    assert all(len(i["trace"]) <= 600 for i in found.values()) and sum(len(i["trace"]) for i in found.values()) > 600
    res = api_capture.CaptureResult(run=None)
    with pytest.raises(ValueError, match="traces are over 0 MiB together"):
        api_capture._keep(res, found, None, (60, 100), str(tmp_path / "t.jsonl"), None, tmp_path)
    monkeypatch.undo()
    monkeypatch.setattr(api_capture.host_capture, "MAX_TEXT_BYTES", 100)
    found = _answer("gpu-1", big[:2], 50.0) | _answer("gpu-2", big[:2], 50.0)
    for host in found:
        (tmp_path / f"{host}.jsonl").write_text('{"text": "' + "x" * 60 + '"}\n' * 1)
    with pytest.raises(ValueError, match="text is over 0 MiB together"):
        api_capture._keep(res, found, None, (60, 100), str(tmp_path / "t.jsonl"), str(tmp_path / "x"), tmp_path)


def test_a_limit_that_names_no_server_says_so():
    """`-l <the router>` leaves no server to capture: the message says the limit names no server (only the router)."""
    res = api_capture.CaptureResult(run=None)
    for found in ({}, None):
        with pytest.raises(ValueError, match=r"the limit \(-l\), names no server \(only the smg router"):
            api_capture._keep(res, found, None, (60, 100), "/nonexistent/t.jsonl", None, Path("/nonexistent"))


def test_only_the_window_every_host_captured_is_kept():
    """b started 2 s late and a stopped early (its request bound): their arrivals outside the common window would
    make the trace's start and end one replica's traffic only."""
    a = _part("a", 10.0, *(R(i * 1000, 5, 1) for i in range(6)), window=(9.5, 15.2))
    b = _part("b", 12.5, *(R(i * 1000, 5, 1) for i in range(6)), window=(12.0, 18.0))
    c = _part("c", 0.0, window=(10.0, 20.0))  # served nothing, in its window
    got = merge.merge([a, b, c], 60, 100)
    assert got.hosts == {"a": 4, "b": 3, "c": 0} and got.outside == 5 and got.stop is None
    assert [r.timestamp for r in got.records] == [0, 500, 1000, 1500, 2000, 2500, 3000]


def test_the_summary_says_where_it_was_captured():
    assert merge.origin({"h": 3}, None) == {"captured_at": "server", "hosts": {"h": 3}, "router": None}
    view = {"host": "r", "requests": 4, "status": {"2xx": 3, "4xx": 1}, "paths": {}, "other": 0}
    where = merge.origin({"a": 2, "b": 1}, view)
    assert where["captured_at"] == "fleet" and where["router_note"] is None
    lines = traffic.origin_lines(where)
    assert lines[0] == "captured at   fleet: requests per server a 2, b 1"
    assert lines[1] == "router        r: 4 generation requests answered (3 2xx, 1 4xx)"
    assert "finished 2" in merge.origin({"a": 2}, view)["router_note"]


def test_the_router_log_of_smg_1_13_0_counts_client_requests_once():
    """The recorded lines, text (coloured) and JSON: 7 generation requests each (6 answered, 1 refused: wrong key), the
    model list and the GETs of routes smg lacks counted apart; request ids are not kept."""
    lines = FIXTURE.read_text().splitlines()
    text = [x for x in lines if not x.startswith("{")]
    for part in (text, [x for x in lines if x.startswith("{")]):
        got = router_log.collect(part)
        assert got == {
            "requests": 7,
            "status": {"2xx": 6, "4xx": 1},
            "paths": {"/v1/chat/completions": 5, "/generate": 1, "/v1/completions": 1},
            "other": 7,
        }
        assert "client-0" not in json.dumps(got)
    line = next(x for x in text if "client-0" in x and "smg::response" in x)
    assert router_log.parse_line(line) == ("POST", "/v1/chat/completions", 200)
    # a client's id that spells fields (smg escapes its quotes) changes nothing
    hostile = line.replace('"client-0"', r'"x\"}path=/generate\"status_code=500"')
    assert router_log.parse_line(hostile) == ("POST", "/v1/chat/completions", 200)
    assert router_log.parse_line(line.replace("status_code", "status")) is None


# Two lines smg 1.13.0 wrote (the lab fleet, 2026-12-07) for one streamed request whose client closed the connection
# after [DONE]: the second one counted it twice (molecule/fleet's capture, 39 for 36 answered).
STREAM_FINISHED = '\x1b[2m2026-12-07 00:45:50\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mhttp_request\x1b[0m\x1b[1m{\x1b[0m\x1b[3mmethod\x1b[0m\x1b[2m=\x1b[0mPOST \x1b[3mpath\x1b[0m\x1b[2m=\x1b[0m/v1/chat/completions \x1b[3mversion\x1b[0m\x1b[2m=\x1b[0mHTTP/1.1 \x1b[3mmodule\x1b[0m\x1b[2m=\x1b[0m"smg" \x1b[3mrequest_id\x1b[0m\x1b[2m=\x1b[0m"chatcmpl-eOEM9VyGZ6MJSDDl8vhF7qHX" \x1b[3mstatus_code\x1b[0m\x1b[2m=\x1b[0m200 \x1b[3mlatency\x1b[0m\x1b[2m=\x1b[0m85932\x1b[1m}\x1b[0m\x1b[2m:\x1b[0m \x1b[2msmg::response\x1b[0m\x1b[2m:\x1b[0m \x1b[2mmodel_gateway/src/middleware/logging.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m227:\x1b[0m finished processing request'
STREAM_CLOSED = '\x1b[2m2026-12-07 00:45:50\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mhttp_request\x1b[0m\x1b[1m{\x1b[0m\x1b[3mmethod\x1b[0m\x1b[2m=\x1b[0mPOST \x1b[3mpath\x1b[0m\x1b[2m=\x1b[0m/v1/chat/completions \x1b[3mversion\x1b[0m\x1b[2m=\x1b[0mHTTP/1.1 \x1b[3mmodule\x1b[0m\x1b[2m=\x1b[0m"smg" \x1b[3mrequest_id\x1b[0m\x1b[2m=\x1b[0m"chatcmpl-eOEM9VyGZ6MJSDDl8vhF7qHX" \x1b[3mstatus_code\x1b[0m\x1b[2m=\x1b[0m200 \x1b[3mlatency\x1b[0m\x1b[2m=\x1b[0m85932\x1b[1m}\x1b[0m\x1b[2m:\x1b[0m \x1b[2msmg::response\x1b[0m\x1b[2m:\x1b[0m \x1b[2mmodel_gateway/src/middleware/logging.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m399:\x1b[0m client closed the connection before the response stream ended'


def test_a_stream_its_client_closed_after_the_end_is_counted_once():
    got = router_log.collect([STREAM_FINISHED, STREAM_CLOSED])
    assert got["requests"] == 1 and got["other"] == 0
    # another stream in the same second (whole-second stamps: only the message tells them apart) is a request too
    other = [x.replace("eOEM9VyGZ6MJSDDl8vhF7qHX", "Zz9other0request0id000") for x in (STREAM_FINISHED, STREAM_CLOSED)]
    assert router_log.collect([STREAM_FINISHED, other[0], STREAM_CLOSED, other[1]])["requests"] == 2
    # smg without the source's file:line in its lines (another build's log format): the closed line still is none
    bare = re.sub(r"\x1b\[2mmodel_gateway\S*\x1b\[0m\x1b\[2m:\x1b\[0m\x1b\[2m\d+:\x1b\[0m ", "", STREAM_CLOSED)
    assert "logging.rs" not in bare and router_log.parse_line(bare) is None
    as_json = next(x for x in FIXTURE.read_text().splitlines() if x.startswith("{") and "smg::response" in x)
    closed = as_json.replace(
        '"finished processing request"', '"client closed the connection before the response stream ended"'
    )
    assert router_log.parse_line(as_json) is not None and router_log.parse_line(closed) is None


def test_the_router_module_reads_the_replicas_window_of_its_journal(monkeypatch, capsys):
    read = []

    def journal(service, since, until, limits):
        read.append((service, since, until))
        return iter(FIXTURE.read_text().splitlines())

    monkeypatch.setattr(router_log.unit_capture, "journal_lines", journal)
    args = {"service": "smg", "windows": [[105.5, 160.0], [100.25, 158.0]]}
    failed, res = run_module(sglang_router_traffic, args, capsys)
    # the window every replica captured, as the merge keeps it (trace.common_window), not the union
    assert not failed and read == [("smg", 105.5, 158.0)] and res["router"]["requests"] == 14, res
    assert res["router"]["window"] == [105.5, 158.0] and not res["changed"]
    failed, res = run_module(sglang_router_traffic, {"windows": [[5, 1]]}, capsys)
    assert failed and "0 < start <= end" in res["msg"]
    failed, res = run_module(sglang_router_traffic, {"windows": [[100.0, 110.0], [120.0, 130.0]]}, capsys)
    assert failed and "do not overlap" in res["msg"]
    # a replica's window is the host's word: no wider than the capture's seconds and the margin the play passes
    read.clear()
    failed, res = run_module(sglang_router_traffic, {"windows": [[1.0, 1e9]], "max_window_s": 660}, capsys)
    assert failed and "660" in res["msg"] and read == []


def _answer(host: str, records: list, start: float, **extra) -> dict:
    item = {"trace": trace.dumps(records), "start": start, "window": [40.0, 90.0], "stop": None, "unparsed": 0}
    return {host: item | {"probes": 1, **extra}}


# the window it read: the replicas' common one ([45, 90] of the windows below)
ROUTER = {"r1": {"requests": 3, "status": {"2xx": 3}, "paths": {"/v1/chat/completions": 3}, "other": 2}}
ROUTER["r1"]["window"] = [45.0, 90.0]


def test_a_fleets_answers_are_checked_merged_and_written(tmp_path):
    found = _answer("gpu-1", [R(0, 600, 3, (2**64 - 1,)), R(400, 9, 2)], 50.0) | _answer("gpu-2", [R(0, 9, 4)], 50.1)
    found |= {"gpu-3": {"trace": "", "window": [45.0, 95.0], "stop": None, "unparsed": 0, "probes": 0}}  # no request
    res = api_capture.CaptureResult(run=None)
    dest = tmp_path / "t.jsonl"
    api_capture._keep(res, found, ROUTER, (60, 100), str(dest), None, tmp_path)
    records, _sha = trace.read(str(dest))
    assert [r.timestamp for r in records] == [0, 100, 400] and records[0].hash_ids == (0,)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600 and res.probes == 2 and res.unparsed == 0
    assert res.summary["captured_at"] == "fleet" and res.summary["hosts"] == {"gpu-1": 2, "gpu-2": 1, "gpu-3": 0}
    assert res.summary["router"]["host"] == "r1" and res.summary["router_note"] is None
    assert res.summary["outside_window"] == 0
    for router, why in (
        ({"r1": {**ROUTER["r1"], "status": {"2xx": 2}}}, "no request counts"),
        ({"r1": {**ROUTER["r1"], "paths": {"/admin": 3}}}, "no request counts"),
        ({**ROUTER, "r2": ROUTER["r1"]}, "more than one router"),
        ({"r1": {**ROUTER["r1"], "window": [40.0, 95.0]}}, "did not read the replicas' common window"),
    ):
        with pytest.raises(ValueError, match=why):
            api_capture._keep(res, found, router, (60, 100), str(tmp_path / "x.jsonl"), None, tmp_path)
    with pytest.raises(ValueError, match="no first arrival"):
        api_capture._keep(res, _answer("h", [R(0, 9, 4)], None), None, (60, 100), str(dest), None, tmp_path)
    with pytest.raises(ValueError, match="no capture window"):
        api_capture._keep(
            res, _answer("h", [R(0, 9, 4)], 50.0, window=[9, 8]), None, (60, 100), str(dest), None, tmp_path
        )


def _send(url: str, key: str, n: int) -> list:
    """n chat completions through the router, each with a 600-word prefix shared by all; their output lengths."""
    prefix = " ".join(f"p{i}" for i in range(600))
    out = []
    for i in range(n):
        body = {"model": "qwen", "messages": [{"role": "user", "content": f"{prefix} own{i}"}], "max_tokens": 2 + i}
        resp = server_http.request(server_http.Endpoint.parse(url), "POST", "/v1/chat/completions", body, key, 30.0)
        assert resp.status == 200, resp
        out.append(2 + i)
    return out


def test_a_fleet_behind_the_real_smg_router_is_captured_once_per_client_request(tmp_path, smg_python):
    """smg 1.13.0 in front of two emulators, no containers: the replicas' request logs (the capture's mechanism)
    merged, the router's own log counted; each client request is in the trace once, the shared prefix one id."""
    python, env = smg_python
    key = "k-secret-0123456789abcdef"
    emus = [Emulator(tmp_path, "--api-key", key, ttft_ms=2, decode_tok_s=3000) for _ in range(2)]
    port, log, smg = free_port(), tmp_path / "smg.log", None
    argv = [python, "-m", "smg", "launch", "--host", "127.0.0.1", "--port", str(port), "--policy", "round_robin"]
    argv += ["--worker-urls", *(e.url for e in emus), "--api-key", key, "--prometheus-port", str(free_port())]
    argv += ["--prometheus-host", "127.0.0.1", "--health-check-interval-secs", "1"]
    url = f"http://127.0.0.1:{port}"
    try:
        for e in emus:  # ready first: smg backs off for long on a worker it could not register
            e.wait_ready()
        with open(log, "wb") as out:
            smg = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env or dict(os.environ))
        deadline, ready = time.monotonic() + 60, None
        while ready is None:
            assert smg.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
            with contextlib.suppress(OSError):  # not listening yet
                ready = server_http.get_json(server_http.Endpoint.parse(url), "/readiness", key)
        window = [time.time()]
        for e in emus:
            capture.switch(e.url, key, True)
        sent = _send(url, key, 6)
        for e in emus:
            capture.switch(e.url, key, False)
        window.append(time.time())
    finally:
        if smg:
            smg.kill()  # its graceful stop waits seconds for nothing here
            smg.wait()
        for e in emus:
            e.stop()
    parts = []
    for e in emus:
        got, stop, _probes = capture.collect(e.log_lines())
        assert stop is None and len(got) == 3  # round robin: half each
        parts.append(merge.Part(str(e.port), got[0].arrival, capture.to_trace(got, KEY_OF_CAPTURE), tuple(window)))
    merged = merge.merge(parts, 60, 100)
    view = router_log.collect(log.read_text(errors="replace").splitlines())
    assert view["requests"] == view["status"]["2xx"] == len(sent) == len(merged.records)
    assert merged.outside == 0
    assert sorted(r.output_length for r in merged.records) == sent
    assert {r.hash_ids[0] for r in merged.records} == {0}  # the prefix both replicas served: one id
    assert merge.origin(merged.hosts, {"host": "smg", **view})["router_note"] is None


def _line(path: str, status: int, request_id: str = "x") -> str:
    return (
        f'2026-12-06 18:09:02  INFO http_request{{method=POST path={path} version=HTTP/1.1 module="smg" '
        f'request_id="{request_id}" status_code={status} latency=7841}}: smg::response: finished processing request'
    )


def test_a_client_path_cannot_turn_a_404_into_a_counted_generation_request():
    """smg logs the request's path as the client sent it (checked on smg 1.13.0 from PyPI: POST /generate"status_code=200
    got 404 and the line `path=/generate"status_code=200 ... status_code=404`, counted here as a 2xx); a client that
    sends POST /generate"status_code=200 gets 404 from smg, and the router's count must not take it for a 2xx."""
    assert router_log.parse_line(_line("/v1/chat/completions", 200)) == ("POST", "/v1/chat/completions", 200)
    got = router_log.collect([_line('/generate"status_code=200', 404)] * 5)
    assert got["status"].get("2xx", 0) == 0, got
    # the whole span is matched in smg's order: nor a path or an id spelling fields, nor a path that is one in part
    assert router_log.parse_line(_line('/generate"status_code=200', 404)) == ("POST", '/generate"status_code=200', 404)
    spelled = _line("/generate", 404, 'x\\" status_code=200 latency=1}: smg::response: \\"')
    assert router_log.parse_line(spelled) == ("POST", "/generate", 404), spelled
    span = {"method": "POST", "path": '/generate"status_code=200', "request_id": "x", "status_code": 404, "latency": 9}
    line = json.dumps({"target": router_log.TARGET, "span": span | {"name": "http_request"}})
    assert router_log.collect([line])["status"] == {} and router_log.parse_line(line)[2] == 404
    assert (
        router_log.parse_line(
            json.dumps({"target": router_log.TARGET, "span": span | {"name": "http_request", "status_code": "200"}})
        )
        is None
    )


def test_a_healthy_fleet_with_staggered_starts_gets_no_router_note(monkeypatch):
    """Every client request went through the router and was answered 200 by one replica; replica b's async start came
    3 s after a's (forks, SSH). The merge keeps [latest start, earliest end]; the router must count the same window,
    or every fleet capture under steady traffic carries a router_note that blames a direct request or the log level."""
    arrivals = [100.5 + i for i in range(60)]  # one request a second, round robin over a and b
    windows = {"a": (100.0, 160.0), "b": (103.0, 163.0)}
    parts = []
    for k, host in enumerate("ab"):
        mine = [t for i, t in enumerate(arrivals) if i % 2 == k and windows[host][0] <= t <= windows[host][1]]
        records = [R(round((t - mine[0]) * 1000, 3), 10, 5) for t in mine]
        parts.append(merge.Part(host, mine[0], records, windows[host]))
    merged = merge.merge(parts, 60, 10_000)

    def journal(service, since, until, limits):  # smg's line at each answer (latency of ms)
        return iter(_line("/generate", 200) for t in arrivals if since <= t <= until)

    monkeypatch.setattr(router_log.unit_capture, "journal_lines", journal)
    view = router_log.run("smg", [list(w) for w in windows.values()])
    where = merge.origin(merged.hosts, view)
    assert where["router_note"] is None, (view["window"], merged.outside, where["router_note"])


def test_a_fleet_with_a_multi_node_group_captures_only_servers_with_an_api(tmp_path):
    """inventory/group-lab.yml: sglang-group-tp-1 is rank 1 of a tp group; its HTTP server answers only /health,
    /health_generate and /metrics (tests/real/two_nodes.json, the emulator's StandIn). playbooks/traffic.yml captures
    `all:!sglang_router`, rank 1 included: found_logging's GET /server_info there is a 404, the module fails on that
    host, the run is not ok and the whole fleet's capture is lost. The play must keep to the API servers (the
    sglang_api_servers filter, as roles/sglang_fleet does) or skip ranks >= 1."""
    import yaml
    from test_emulator_real import KEY, two_nodes, wait_ranks

    from ansible_collections.sglang.deploy.plugins.module_utils.bench import unit_capture
    from ansible_collections.sglang.deploy.plugins.module_utils import readiness, server_http

    ranks = two_nodes(tmp_path)
    try:
        ready = wait_ranks(ranks)
        assert len(ready) == 2, ["\n".join(r.log_lines()[-30:]) for r in ranks]  # both ranks up, else their logs
        status = server_http.request(
            server_http.Endpoint.parse(ranks[1].url), "GET", "/server_info", None, KEY, 10
        ).status
        assert status == 404 and readiness.probe(ranks[1].url, KEY, timeout=10)[0] == "ready", status
        try:
            unit_capture.found_logging(ranks[1].url, (KEY, KEY))
            rank1_fails = False
        except ValueError:
            rank1_fails = True
    finally:
        for r in ranks:
            r.stop()
    assert rank1_fails
    # the play leaves such a rank out before anything runs there: its first task ends the host where it is not one
    # of the API servers (the filter roles/sglang_fleet uses), here against inventory/group-lab.yml's hosts
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    from ansible_collections.sglang.deploy.plugins.filter import sglang as filters

    play = yaml.safe_load((Path(__file__).parents[1] / "playbooks" / "traffic.yml").read_text())[0]
    first = play["tasks"][0]
    assert first["ansible.builtin.meta"] == "end_host" and "sglang.deploy.sglang_api_servers" in first["when"], first
    inv = InventoryManager(
        loader=DataLoader(), sources=[str(Path(__file__).parents[1] / "inventory" / "group-lab.yml")]
    )
    variables = VariableManager(loader=DataLoader(), inventory=inv)
    hosts = [h.name for h in inv.get_hosts("all:!sglang_router")]
    hostvars = {h: variables.get_vars(host=inv.get_host(h)) for h in hosts}
    groups = {g: [h.name for h in inv.groups[g].get_hosts()] for g in inv.groups}
    kept = filters.api_servers(hosts, hostvars, groups)
    assert "sglang-group-tp-1" in hosts and sorted(kept) == ["sglang-group-1", "sglang-group-2", "sglang-group-tp-0"]
    # and through ansible-playbook itself (no connection: the task and a marker, run locally)
    import sys

    repo = Path(__file__).parents[1]
    marker = {"name": "reached", "ansible.builtin.debug": {"msg": "reached {{ inventory_hostname }}"}}
    check = [{"hosts": play["hosts"], "gather_facts": False, "connection": "local", "tasks": [first, marker]}]
    (tmp_path / "check.yml").write_text(yaml.safe_dump(check))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "inventory/group-lab.yml"]
    argv += [str(tmp_path / "check.yml"), "-e", f"ansible_python_interpreter={sys.executable}"]
    out = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=120, check=False)
    reached = {line.split()[-1] for line in out.stdout.splitlines() if "msg: reached" in line}
    assert out.returncode == 0 and reached == set(kept), out.stdout[-2000:] + out.stderr[-2000:]


def test_what_a_host_returns_cannot_confirm_a_guessed_prompt():
    """A raw block digest (the first 8 bytes of an unsalted sha256 chain of the token ids) in a module result, which
    lands in the async job file and the runner's artifacts and events, would let anyone holding it confirm a guessed
    prompt (a system prompt, a document, a short answer: one block) by hashing its token ids. The hosts key their
    digests with a secret of the capture (HMAC, no_log), which keeps the equality across hosts."""
    secret_prompt = [101, 2023, 2003, 1996, 3595, 102]  # a short prompt's token ids: one partial block
    got = [capture.Captured(1.0, len(secret_prompt), 3, tuple(trace.block_digests(secret_prompt)), None)]
    returned = capture.to_trace(got, KEY_OF_CAPTURE)[0].hash_ids
    guess = tuple(int.from_bytes(d, "big") for d in trace.block_digests(secret_prompt))
    assert returned != guess, "the host's result confirms the guessed prompt"
    assert returned == capture.to_trace(got, KEY_OF_CAPTURE)[0].hash_ids  # another host of the capture: the same
    assert returned != capture.to_trace(got, b"another capture's secret")[0].hash_ids
    assert capture.to_trace(got)[0].hash_ids == (0,)  # one server, no secret: numbered on the host, as before


def test_the_capture_secret_goes_to_the_hosts_as_a_secret_and_nowhere_else(tmp_path, monkeypatch):
    """The controller makes a secret per capture, passes it as a secret extra variable (the runner's 0600 file,
    redacted from the events) to the module's no_log option, and writes it neither to the trace nor the result."""
    import yaml

    from sglang_deploy.api import redaction

    seen = []

    def run_playbook(playbook, **kw):
        seen.append(kw["extravars"])
        key = kw["extravars"]["sglang_traffic_hash_secret"].encode()
        found = _answer("gpu-1", [R(0, 9, 4, (capture.keyed(b"12345678", key),))], 50.0)
        return api_capture.RunResult(playbook, "successful", 0, hosts={"gpu-1": None}, data={"sglang_traffic": found})

    monkeypatch.setattr(api_capture.runner, "run_playbook", run_playbook)
    res = api_capture.capture(str(tmp_path / "t.jsonl"), duration=5)
    res2 = api_capture.capture(str(tmp_path / "u.jsonl"), duration=5)
    assert res.error is None and res2.error is None, (res.error, res2.error)
    first, second = (v["sglang_traffic_hash_secret"] for v in seen)
    assert len(first) == 64 and first != second  # a secret of each capture
    assert redaction.split_secrets({"sglang_traffic_hash_secret": first})[0] == {}  # the runner's secret file
    written = (tmp_path / "t.jsonl").read_text()
    assert first not in written and first not in repr(res) and json.loads(written.splitlines()[0])["hash_ids"] == [0]
    source = (Path(__file__).parents[1] / "plugins" / "modules" / "sglang_traffic.py").read_text()
    assert '"hash_secret": {"type": "str", "no_log": True}' in source
    play = yaml.safe_load((Path(__file__).parents[1] / "playbooks" / "traffic.yml").read_text())[0]
    (task,) = [t for t in play["tasks"] if "sglang.deploy.sglang_traffic" in t]
    assert "sglang_traffic_hash_secret" in task["sglang.deploy.sglang_traffic"]["hash_secret"]
