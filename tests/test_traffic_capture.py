"""Capture (issue 51): the emulator logs finished requests as SGLang does once /configure_logging turns request
logging on, and host/bench/capture.py turns those lines into a trace that matches the load that was sent."""

from __future__ import annotations

import json
import os
import random
import stat

import pytest
from emulator_proc import Emulator  # first: puts the repo's module_utils on the import path

from sglang_deploy import cli
from ansible_collections.sglang.deploy.plugins.module_utils import server_http, watchdog
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, trace


def load_trace(n: int, seed: int = 5) -> list:
    """A known load: Poisson arrivals (seeded), prompts of 1100 to 1900 tokens whose first two 512-token blocks
    are one of 3 shared prefixes, the rest their own, outputs of 2 to 30 tokens."""
    rng, t, out = random.Random(seed), 0.0, []
    for i in range(n):
        t += rng.expovariate(30.0)
        n_in = rng.randint(1100, 1900)
        ids = (2 * (i % 3), 2 * (i % 3) + 1, *(100 + 4 * i + j for j in range(-(-n_in // 512) - 2)))
        out.append(trace.Record(round(t * 1000, 3), n_in, rng.randint(2, 30), ids))
    return out


def test_a_capture_from_the_emulator_matches_what_was_sent(tmp_path, capsys, monkeypatch):
    sent = load_trace(30)
    path = trace.write(sent, str(tmp_path / "sent.jsonl"))
    emu = Emulator(tmp_path, "--api-key", "k-secret", decode_tok_s=3000, ttft_ms=2)
    try:
        emu.wait_ready()
        capture.switch(emu.url, "k-secret", True)
        monkeypatch.setenv("KEY", "k-secret")
        args = ["bench", "--url", emu.url, "--dataset-name", "trace", "--dataset-path", path, "--warmup", "0"]
        assert cli.main([*args, "--api-key-env", "KEY"]) == 0, capsys.readouterr()
        assert watchdog.probe(emu.url, "k-secret", 10) is None  # the stall watchdog's: no one's traffic
        capture.switch(emu.url, "k-secret", False)
        with pytest.raises(ValueError, match="answered 401: give the admin API key"):
            capture.switch(emu.url, "wrong", True)
    finally:
        emu.stop()
    log = emu.log.read_text()
    assert "k-secret" not in "".join(x for x in log.splitlines() if "request.finished" in x)
    got, stop, probes = capture.collect(log.splitlines())
    assert stop is None and len(got) == len(sent) and probes == 1
    dest = tmp_path / "captured.jsonl"
    info = capture.write(got, str(dest))
    assert info["hashed"] == len(sent) and stat.S_IMODE(os.stat(dest).st_mode) == 0o600
    captured, _sha = trace.read(str(dest))
    # requests in flight together may finish out of order: match each by its lengths
    key = lambda r: (r.input_length, r.output_length)  # noqa: E731
    by_len = {key(r): r for r in captured}
    assert sorted(by_len) == sorted(key(r) for r in sent)
    # the prefix structure: a sent hash id and its captured one name the same blocks, one for one
    pairs = {(a, b) for r in sent for a, b in zip(r.hash_ids, by_len[key(r)].hash_ids)}
    assert len({a for a, _b in pairs}) == len({b for _a, b in pairs}) == len(pairs)
    assert [len(by_len[key(r)].hash_ids) for r in sent] == [len(r.hash_ids) for r in sent]
    assert trace.summary(captured)["prefix_reuse_share"] == pytest.approx(trace.summary(sent)["prefix_reuse_share"])
    assert all("text" not in json.loads(x) for x in dest.read_text().splitlines())


def finished(ts: str, n_in: int, n_out: int, e2e: float, ids=None, text=None, rid="r") -> str:
    obj = {"rid": rid, **({"input_ids": ids} if ids is not None else {}), **({"text": text} if text else {})}
    meta = {"prompt_tokens": n_in, "completion_tokens": n_out, "e2e_latency": e2e}
    line = {"timestamp": ts, "event": "request.finished", "rid": rid, "obj": obj, "out": {"meta_info": meta}}
    return "Nov 12 10:00:01 gpu1 sglang[42]: [2026-11-12 10:00:01] " + json.dumps(line)


def test_a_log_line_gives_arrival_counts_and_block_hashes_only():
    ids = list(range(1030))
    rec = capture.parse_line(finished("2026-11-12T10:00:01.500000", 1030, 7, 0.25, ids, "secret prompt"))
    assert rec.arrival == pytest.approx(capture.parse_line(finished("2026-11-12T10:00:01.250000", 1, 1, 0)).arrival)
    assert (rec.input_length, rec.output_length, rec.text) == (1030, 7, None)
    assert rec.digests == tuple(trace.block_digests(ids)) and len(rec.digests) == 3
    assert capture.parse_line(finished("2026-11-12T10:00:01", 1030, 7, 0.2, ids, "p"), keep_text=True).text == "p"
    cut = capture.parse_line(finished("2026-11-12T10:00:01", 3000, 7, 0.2, ids[:2048]))  # level 2: ids cut
    assert cut.digests == () and cut.input_length == 3000
    for other in (
        "[2026-11-12 10:00:01] Decode batch. #running-req: 1",
        '{"timestamp": "x", "event": "request.received"}',
    ):
        assert capture.parse_line(other) is None


def test_health_checks_and_the_projects_probes_are_counted_apart_not_traced():
    # as sglang 0.5.16 logged them on an H100 (results/gpu-h100/lab-phases-2026-12-06): /health_generate's input_ids
    # [0] under rid HEALTH_CHECK_<hex>; the watchdog's "ping" under its own rid
    lines = [
        finished("2026-11-12T10:00:00", 1, 1, 0.01, [0], rid="HEALTH_CHECK_9f2c"),
        finished("2026-11-12T10:00:01", 700, 5, 0.2, list(range(700)), rid="a1"),
        finished("2026-11-12T10:00:02", 2, 1, 0.01, text="ping", rid=server_http.probe_rid()),
        finished("2026-11-12T10:00:03", 9, 4, 0.1, rid="HEALTH_CHECKS_ARE_MY_PROMPT"),  # a client's own rid
        finished("2026-11-12T10:00:04", 9, 4, 0.1, text="HEALTH_CHECK_ failed, why?", rid="a2"),  # a prompt naming it
    ]
    got, stop, probes = capture.collect(lines)
    assert [g.input_length for g in got] == [700, 9, 9] and (stop, probes) == (None, 2)
    assert [capture.not_traffic(x) for x in lines] == [True, False, True, False, False]


def test_a_capture_stops_at_its_bounds_and_keeps_text_only_in_its_own_file(tmp_path):
    lines = [finished(f"2026-11-12T10:00:{s:02d}", 5, 3, 0.0, text=f"t{s}") for s in range(50)]
    assert capture.collect(lines, capture.Limits(requests=4))[1] == "4 requests were captured"
    got, stop, _probes = capture.collect(lines, capture.Limits(seconds=10))
    assert len(got) == 11 and stop == "10 s of arrivals were captured"
    assert capture.collect(lines, capture.Limits(log_bytes=len(lines[0]) * 3))[1].startswith("the log's")
    got, _stop, _probes = capture.collect(lines[:3], keep_text=True)
    info = capture.write(got, str(tmp_path / "t.jsonl"), str(tmp_path / "text.jsonl"))
    assert stat.S_IMODE(os.stat(info["text"]).st_mode) == 0o600
    assert [json.loads(x)["text"] for x in open(info["text"])] == ["t0", "t1", "t2"]
    assert "t0" not in open(info["trace"]).read()
