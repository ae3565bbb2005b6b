"""`sglang-deploy bench` and the sglang_bench module against servers that die, hang, never get ready or answer
garbage, and against careless input: what was measured is kept, a hang is noticed within about the timeout,
nothing unusable ends in exit 0 or a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest
from emulator_proc import Emulator, run_module  # first: puts the repo's module_utils on the import path

import sglang_bench
from sglang_deploy import cli
from ansible_collections.sglang.deploy.plugins.module_utils.bench import client, sweep
from ansible_collections.sglang.deploy.plugins.module_utils.bench.metrics import Timeline


@pytest.fixture
def emulator(tmp_path):
    started = []

    def start(*flags, ready=True, **env):
        emu = Emulator(tmp_path, *flags, decode_tok_s=500, ttft_ms=20, **env)
        started.append(emu)
        if ready:
            return emu.wait_ready()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", emu.port), timeout=0.5).close()
                return emu
            except OSError:
                time.sleep(0.05)
        raise AssertionError("emulator port never opened")

    yield start
    for emu in started:
        if emu.proc.poll() is None:
            os.kill(emu.proc.pid, signal.SIGCONT)
        emu.stop()


def after_first_level(monkeypatch, action):
    """Run `action` once the sweep has reported its first level (the CLI's progress line)."""
    calls = []
    original = sweep.format_level_line

    def hook(m):
        calls.append(m["concurrency"])
        if len(calls) == 1:
            action()
        return original(m)

    monkeypatch.setattr(sweep, "format_level_line", hook)


def bench(url, *extra, dest=None):
    argv = [
        "bench",
        "--url",
        url,
        "--concurrency",
        "1,2,4",
        "--requests",
        "4",
        "--input-len",
        "8",
        "--output-len",
        "16",
        "--warmup",
        "1",
        *extra,
    ]
    return cli.main(argv + (["--json", str(dest)] if dest else []))


def test_a_server_dying_mid_sweep_keeps_the_measured_level(emulator, monkeypatch, tmp_path, capsys):
    emu = emulator()
    after_first_level(monkeypatch, lambda: (emu.proc.kill(), emu.proc.wait()))
    dest = tmp_path / "r.json"
    assert bench(emu.url, dest=dest) == 1
    out = capsys.readouterr().out
    result = json.loads(dest.read_text())
    first, *rest = result["levels"]
    assert (first["completed"], first["failed"], first["stopped"]) == (4, 0, None)
    assert [(m["completed"], m["failed"]) for m in rest] == [(0, 4), (0, 4)]
    assert "connection refused" in result["stopped"] and all(m["stopped"] for m in rest)
    assert "4/4" in out and "STOPPED early" in out


def test_a_hung_server_stops_the_level_within_about_the_timeout(emulator, monkeypatch, tmp_path, capsys):
    emu = emulator()
    # SIGSTOP while the second level's requests are in flight: at the first event read once two of them were sent
    # (not 0.15 s after the first level, by when a loaded machine could have ended the second)
    sent_after, send, event = [], client.Connection.send, client._SSERecorder.event

    async def counted_send(self, method, path, *args, **kwargs):
        t = await send(self, method, path, *args, **kwargs)
        if sent_after and path == "/v1/chat/completions":
            sent_after.append(path)
        return t

    def stop_on_event(self, data, t):
        event(self, data, t)
        if len(sent_after) >= 3 and "SIGSTOP" not in sent_after:  # armed, then two sends (or more)
            sent_after.append("SIGSTOP")
            os.kill(emu.proc.pid, signal.SIGSTOP)

    monkeypatch.setattr(client.Connection, "send", counted_send)
    monkeypatch.setattr(client._SSERecorder, "event", stop_on_event)
    after_first_level(monkeypatch, lambda: sent_after.append("armed"))
    dest = tmp_path / "r.json"
    rc = bench(emu.url, "--timeout", "1", "--output-len", "128", "--output-details", dest=dest)
    assert rc == 1 and "SIGSTOP" in sent_after
    result = json.loads(dest.read_text())
    levels = result["levels"]
    assert levels[0]["completed"] == 4 and levels[1]["stopped"] and levels[2]["errors"]
    assert "within the timeout (1 s)" in result["stopped"]
    assert levels[1]["failed"] >= 1 and levels[2]["failed"] == 4
    # Each request as it was: those in flight when the level stopped keep the times they were sent (counted from
    # the level's first send, which one of the first two made), those never sent have none. Not how soon after it
    # the second went: a loaded machine can hold the client up between two sends (the two go together: c=4's
    # concurrency in test_sglang_bench).
    rows = levels[1]["requests_detail"]
    sent = [r for r in rows if r["send_ms"] is not None]
    assert rows[: len(sent)] == sent and len(sent) >= 2 and min(r["send_ms"] for r in sent[:2]) == 0.0, rows
    assert all(r["send_ms"] >= 0 for r in sent), rows
    cut = [r for r in rows if r["error"] and r["error"].startswith("cut short")]
    assert any(r["send_ms"] is not None for r in cut) and all(r["e2e_ms"] is None for r in cut), rows
    assert "requests_detail" not in levels[2]  # not run: nothing was sent


def test_a_hung_server_before_the_sweep_is_refused_within_the_timeout(emulator, capsys):
    emu = emulator()
    os.kill(emu.proc.pid, signal.SIGSTOP)
    assert bench(emu.url, "--timeout", "1") == 1
    assert "GET /health" in capsys.readouterr().err


def test_a_server_that_never_gets_ready_is_refused(emulator, capsys):
    emu = emulator(ready=False, fault="never_ready")
    assert bench(emu.url) == 1
    err = capsys.readouterr().err
    assert "is not ready: GET /health answered 503" in err


def test_garbage_output_fails_the_cli_and_the_module(emulator, capsys):
    emu = emulator(fault="garbage")
    assert bench(emu.url, "--concurrency", "1") == 1
    assert "not plausible text (repeated_char" in capsys.readouterr().out
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [1], "requests": 2, "output_len": 8, "warmup": 0}},
        capsys,
    )
    assert failed and "not plausible text" in res["msg"]
    assert res["result"]["levels"][0]["output_check"]["count"] == 2


def test_dummy_weights_tolerate_non_language_but_not_the_nan_signature(emulator, capsys):
    """A server that says load_format dummy: answers that are not language pass (tolerated, counted); a run of
    '!' still fails the sweep."""
    newlines = Timeline(t_send=0.0, t_end=1.0, completion_tokens=4, text="\n" * 4)
    assert sweep.output_check([newlines], dummy=True) == {
        "count": 0,
        "examples": [],
        "dummy_weights": True,
        "tolerated": 1,
    }
    assert sweep.output_check([newlines])["count"] == 1  # real weights: the old refusal stands
    emu = emulator("--load-format", "dummy")
    assert bench(emu.url, "--concurrency", "1", "--requests", "2") == 0
    emu = emulator("--load-format", "dummy", fault="garbage")
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [1], "requests": 2, "output_len": 8, "warmup": 0}},
        capsys,
    )
    assert failed and "not plausible text" in res["msg"] and "token id 0" in res["msg"]
    assert res["result"]["server_info"]["load_format"] == "dummy"
    level = res["result"]["levels"][0]["output_check"]
    assert level["dummy_weights"] is True and level["count"] == 2


def test_https_against_plain_http_fails_fast_and_names_the_fix(emulator, capsys):
    emu = emulator()
    assert bench(emu.url.replace("http://", "https://"), "--timeout", "1") == 1
    assert "plain HTTP server needs an http:// URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "env_key", "expect"),
    [
        (["--output-len", "0"], None, "output_len must be at least 2"),
        (["--output-len", "1"], None, "output_len must be at least 2"),
        (["--requests", "-5"], None, "requests must be at least 1"),
        (["--timeout", "0"], None, "timeout must be above 0, got 0.0"),
        (["--timeout", "inf"], None, "timeout must be at most 604800, got inf"),
        (["--timeout", "1e10"], None, "timeout must be at most 604800, got 10000000000.0"),  # was an OverflowError
        (["--timeout", "nan"], None, "timeout must be above 0, got nan"),
        (["--input-len", "100000000"], None, "input_len must be at most 2097152, got 100000000"),
        (["--output-len", "100000000"], None, "output_len must be at most 2097152, got 100000000"),
        (
            ["--dataset-name", "generated-shared-prefix", "--gsp-system-prompt-len", "100000000"],
            None,
            "--gsp-system-prompt-len + --gsp-question-len must be at most 2097152 tokens",
        ),
        (["--json", "{tmp}"], None, "is a folder: give a file name"),
        (["--json", "/dev/null"], None, "exists and is not a regular file"),
        (["--json", "{tmp}/link.json"], None, "exists and is not a regular file"),
        ([], "s3cr3t-\u20ac\u00e9", "not printable ASCII"),
        ([], "s3cr3t\r\nX-Injected: 1", "line break"),
        ([], "s3cr3t-key\n", "line break"),
    ],
)
def test_unusable_input_is_refused_before_a_request(extra, env_key, expect, monkeypatch, tmp_path, capsys):
    listener = socket.create_server(("127.0.0.1", 0))  # accepts nothing: any request would hang the test
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    extra = [x.replace("{tmp}", str(tmp_path)) for x in extra]
    (tmp_path / "link.json").symlink_to(tmp_path / "victim")  # a result written through it would land on victim
    if env_key is not None:
        monkeypatch.setenv("BENCH_TEST_KEY", env_key)
        extra += ["--api-key-env", "BENCH_TEST_KEY"]
    with listener:
        assert cli.main(["bench", "--url", url, "--timeout", "2", *extra]) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err
    if env_key:
        assert "s3cr3t" not in err  # the key itself is never echoed


def test_the_module_refuses_a_result_folder_before_running(tmp_path, capsys):
    failed, res = run_module(sglang_bench, {"url": "http://127.0.0.1:9", "dest": str(tmp_path)}, capsys)
    assert failed and "is a folder" in res["msg"]
