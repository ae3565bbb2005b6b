"""Capture where a fleet runs (issue 51): every replica's capture merged into one trace by arrival, bounded as one
capture, prefix ids shared across replicas, and the smg router's count of the client requests it answered (smg
1.13.0 logs one line per client request, with no token counts: tests/fixtures/smg-1.13.0-request-log.txt)."""

from __future__ import annotations

import contextlib
import json
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


def test_the_router_module_reads_the_replicas_window_of_its_journal(monkeypatch, capsys):
    read = []

    def journal(service, since, until, limits):
        read.append((service, since, until))
        return iter(FIXTURE.read_text().splitlines())

    monkeypatch.setattr(router_log.unit_capture, "journal_lines", journal)
    args = {"service": "smg", "windows": [[105.5, 160.0], [100.25, 158.0]]}
    failed, res = run_module(sglang_router_traffic, args, capsys)
    assert not failed and read == [("smg", 100.25, 160.0)] and res["router"]["requests"] == 14, res
    assert res["router"]["window"] == [100.25, 160.0] and not res["changed"]
    failed, res = run_module(sglang_router_traffic, {"windows": [[5, 1]]}, capsys)
    assert failed and "0 < start <= end" in res["msg"]


def _answer(host: str, records: list, start: float, **extra) -> dict:
    item = {"trace": trace.dumps(records), "start": start, "window": [40.0, 90.0], "stop": None, "unparsed": 0}
    return {host: item | {"probes": 1, **extra}}


ROUTER = {"r1": {"requests": 3, "status": {"2xx": 3}, "paths": {"/v1/chat/completions": 3}, "other": 2}}


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
        parts.append(merge.Part(str(e.port), got[0].arrival, capture.to_trace(got, numbered=False), tuple(window)))
    merged = merge.merge(parts, 60, 100)
    view = router_log.collect(log.read_text(errors="replace").splitlines())
    assert view["requests"] == view["status"]["2xx"] == len(sent) == len(merged.records)
    assert merged.outside == 0
    assert sorted(r.output_length for r in merged.records) == sent
    assert {r.hash_ids[0] for r in merged.records} == {0}  # the prefix both replicas served: one id
    assert merge.origin(merged.hosts, {"host": "smg", **view})["router_note"] is None
