"""`traffic capture` from a deployed host (issue 51): the module sglang_traffic captures from the unit's journal with
the keys of the server's environment file, sets logging back as it found it and returns no secret; the controller
checks what a host returns before it writes the trace."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from emulator_proc import Emulator, run_module  # first: puts the repo's module_utils on the import path

import sglang_traffic
from sglang_deploy.api import traffic_capture as api_capture
from ansible_collections.sglang.deploy.plugins.module_utils import server_http
from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace

KEY = "k-secret-7"
PREFIX = " ".join(f"p{i}" for i in range(600))  # more than one 512-token block, shared by every prompt


def _send(url: str, n: int) -> None:
    for i in range(n):
        body = {"messages": [{"role": "user", "content": f"{PREFIX} {'x ' * (10 * i)}own{i}"}], "max_tokens": 3 + i}
        resp = server_http.request(server_http.Endpoint.parse(url), "POST", "/v1/chat/completions", body, KEY)
        assert resp.status == 200


def _load_once_logging_is_on(emu, n: int) -> threading.Thread:
    def go():
        deadline = time.monotonic() + 60  # a hang guard: the capture's 60 s bound below
        while time.monotonic() < deadline and not any("log_requests=True" in x for x in emu.log_lines()):
            time.sleep(0.05)
        _send(emu.url, n)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_the_module_captures_from_the_journal_restores_logging_and_returns_no_secret(tmp_path, capsys, monkeypatch):
    env = tmp_path / "sglang.env"
    env.write_text(f'SGLANG_API_KEY="{KEY}"\nOTHER=1\n')
    emu = Emulator(tmp_path, "--api-key", KEY, "--log-requests", "--log-requests-level", "1", ttft_ms=2)
    try:
        emu.wait_ready()
        # the unit's journal is the emulator's log here
        monkeypatch.setattr(sglang_traffic.unit_capture, "journal_lines", lambda *_a: iter(emu.log_lines()))
        sender = _load_once_logging_is_on(emu, 5)
        # stopped by its 5 requests; 60 s guards a hang (20 s could pass on a loaded machine before they came)
        args = {"url": emu.url, "service": "sglang", "env_file": str(env), "duration": 60, "max_requests": 5}
        failed, res = run_module(sglang_traffic, {**args, "keep_text": True}, capsys)
        sender.join()
    finally:
        emu.stop()
    assert not failed, res
    got = res["traffic"]
    assert KEY not in json.dumps(res) and got["requests"] == got["hashed"] == 5
    assert got["stop"] == "5 requests were captured"
    records = trace.parse(got["trace"], "captured")
    assert [r.output_length for r in records] == [3, 4, 5, 6, 7]
    # the blocks' digests: the controller numbers them (across hosts where a fleet is captured)
    assert len({r.hash_ids[0] for r in records}) == 1 and len({r.hash_ids[-1] for r in records}) == 5
    assert got["start"] == pytest.approx(time.time(), abs=60) and got["window"][0] <= got["start"] <= got["window"][1]
    # logging is back as the launch flags had it (on, level 1, text)
    assert got["restored"] == {"log_requests": True, "log_requests_level": 1, "log_requests_format": "text"}
    last = [x for x in emu.log_lines() if "Config logging" in x][-1]
    assert "log_requests=True, log_requests_level=1" in last
    text = got["text_file"]
    assert stat.S_IMODE(os.stat(text).st_mode) == 0o600 and "own4" in open(text).read()


def test_the_module_without_the_key_fails_and_says_so(tmp_path, capsys):
    emu = Emulator(tmp_path, "--api-key", KEY, ttft_ms=2)
    try:
        emu.wait_ready()
        failed, res = run_module(sglang_traffic, {"url": emu.url, "service": "sglang", "duration": 1}, capsys)
    finally:
        emu.stop()
    assert failed and "did not say whether request logging is on" in res["msg"] and "SGLANG_API_KEY" in res["msg"]


def test_logging_settings_not_known_stop_the_capture_before_it_switches_anything(monkeypatch):
    """Red team (issue 51, LOW 3): a /server_info the capture could not read (it needs another key) left SGLang's
    defaults as the settings to restore, turning off logging the operator had switched on. It now refuses."""
    switched = []
    monkeypatch.setattr(sglang_traffic.unit_capture.server_http, "get_json", lambda *_a, **_k: None)
    monkeypatch.setattr(sglang_traffic.capture, "switch", lambda *a: switched.append(a))
    monkeypatch.setattr(sglang_traffic.unit_capture, "restore", lambda *a: switched.append(a))
    with pytest.raises(ValueError, match="did not say whether request logging is on.*not started"):
        sglang_traffic.unit_capture.run("http://127.0.0.1:1", "sglang", limits=sglang_traffic.capture.Limits(0.01, 1))
    assert not switched


def _answer(tr, **extra) -> dict:
    return {
        "h1": {"trace": tr, "start": 1.7e9, "window": [1.7e9 - 1, 1.7e9 + 60], "stop": None, "unparsed": 0, **extra}
    }


GOOD = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]}\n'


@pytest.mark.parametrize(
    "found, why",
    [
        ({}, "no SGLang server answered"),
        ({"h1": {"trace": ["not text"]}}, "h1 returned no trace text"),
        (_answer(""), "h1 served no request"),
        (_answer("{"), "h1's trace line 1 is not JSON"),
        (_answer(GOOD.replace("600", "-1")), "input_length must be a whole number"),
        (_answer(GOOD * 3), "holds over 2 requests"),
    ],
)
def test_a_hostile_answer_is_refused_before_anything_is_written(tmp_path, found, why):
    res = api_capture.CaptureResult(run=None)
    dest = tmp_path / "t.jsonl"
    with pytest.raises(ValueError, match=why):
        api_capture._keep(res, found, None, (60, 2), str(dest), None, tmp_path)
    assert not dest.exists()


def test_a_sound_answer_is_written_0600_and_its_notes_escaped(tmp_path, monkeypatch):
    res = api_capture.CaptureResult(run=None)
    dest = tmp_path / "t.jsonl"
    answer = _answer(GOOD, stop="\x1b[2Jstop " + "x" * 999, unparsed=True)
    api_capture._keep(res, answer, None, (60, 10), str(dest), None, tmp_path)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600 and trace.read(str(dest))[0][0].input_length == 600
    assert res.stop.startswith("\\x1b[2J") and len(res.stop) == api_capture.MAX_STOP_CHARS and res.unparsed is None
    assert res.summary["requests"] == 1 and res.summary["path"] == str(dest)
    # the text: one {"text"} line per request, or nothing is written
    (tmp_path / "h1.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    with pytest.raises(ValueError, match="not 1 lines"):
        api_capture._keep(res, _answer(GOOD), None, (60, 10), str(dest), str(tmp_path / "x.text"), tmp_path)
    monkeypatch.setattr(trace, "MAX_TRACE_BYTES", 10)
    with pytest.raises(ValueError, match="over 0 MiB"):
        api_capture._keep(res, _answer(GOOD), None, (60, 10), str(dest), None, tmp_path)


STOPPED_MID_CAPTURE = """
import os, signal, time
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, unit_capture

unit_capture.found_logging = lambda url, key: dict(unit_capture.OFF)
capture.switch = lambda url, key, on: print("logging on", flush=True)
unit_capture.restore = lambda url, key, settings: print("restored", settings, flush=True)


class Clock:
    def time(self):
        return time.time()

    def sleep(self, s):  # the play is stopped while the capture waits
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)


unit_capture.run("http://127.0.0.1:1", "sglang", limits=capture.Limits(60, 10), clock=Clock())
"""


def test_a_capture_stopped_by_a_signal_sets_request_logging_back():
    """Red team (2026-12-06, MEDIUM): a play stopped mid-capture (Ctrl-C, a lost connection: the module gets
    SIGTERM or SIGHUP) ended it without its `finally`, leaving the server at level 3, writing every prompt and
    output to its journal until the next restart. The signal now raises, and logging is set back."""
    import subprocess
    import sys

    here = Path(__file__).resolve().parents[1] / "collections"  # the checkout's collection (its link)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", STOPPED_MID_CAPTURE], capture_output=True, text=True, timeout=60, env=env
    )
    assert "logging on" in proc.stdout
    assert "restored {'log_requests': False" in proc.stdout, (proc.returncode, proc.stderr[-500:])
    assert "stopped by signal" in proc.stderr


def test_the_prompts_text_is_sized_on_the_host_before_it_is_fetched(monkeypatch, tmp_path):
    """Red team (issue 51, LOW 2): with --keep-text the host's text file was fetched whole, whatever its size, and
    only then checked. The playbook now stats it and refuses one over the limit the controller passes."""
    import yaml

    from sglang_deploy import paths
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture as host_capture

    play = yaml.safe_load((paths.REPO / "playbooks/traffic.yml").read_text())[0]
    (block,) = [t for t in play["tasks"] if "block" in t]
    steps = [next(k for k in t if k.startswith("ansible.builtin.")) for t in block["block"]]
    assert steps == ["ansible.builtin.stat", "ansible.builtin.assert", "ansible.builtin.fetch"]
    assert any("sglang_traffic_max_text_bytes" in c for c in block["block"][1]["ansible.builtin.assert"]["that"])
    seen = {}

    def run_playbook(_playbook, **kw):
        seen.update(kw["extravars"])
        raise RuntimeError("stop here")

    monkeypatch.setattr(api_capture.runner, "run_playbook", run_playbook)
    with pytest.raises(RuntimeError):
        api_capture.capture(str(tmp_path / "t.jsonl"), keep_text=True)
    assert seen["sglang_traffic_max_text_bytes"] == host_capture.MAX_TEXT_BYTES
