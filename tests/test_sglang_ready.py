"""sglang_ready against the emulated server on 127.0.0.1 (systemd is faked here: the molecule scenario
runs the real unit)."""

from __future__ import annotations

import json
import time

import pytest
from emulator_proc import REPO, Emulator, run_module  # first: puts the repo's module_utils on the import path

import sglang_ready
from ansible_collections.sglang.deploy.plugins.module_utils import readiness
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import Response


@pytest.fixture
def emulator(tmp_path):
    started = []

    def start(*flags, **env):
        emu = Emulator(tmp_path, *flags, **env)
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()


def fake_unit(monkeypatch, emu: Emulator, restarts_after_exit: bool = False) -> None:
    """systemctl/journalctl answers derived from the emulator process, as systemd would give them."""

    def show(unit):
        if emu.proc.poll() is None:
            return {
                "ActiveState": "active",
                "SubState": "running",
                "MainPID": str(emu.proc.pid),
                "NRestarts": "0",
                "ExecMainStatus": "0",
                "LoadState": "loaded",
                "ExecMainStartTimestamp": "Sun 2026-11-29 10:00:00 UTC",
            }
        if restarts_after_exit:
            return {
                "ActiveState": "active",
                "SubState": "running",
                "MainPID": str(emu.proc.pid + 1),
                "NRestarts": "1",
                "ExecMainStatus": "0",
                "LoadState": "loaded",
            }
        return {
            "ActiveState": "failed",
            "SubState": "failed",
            "MainPID": "0",
            "NRestarts": "0",
            "ExecMainStatus": str(emu.proc.returncode),
            "LoadState": "loaded",
        }

    def journal(unit, since):
        assert since == "Sun 2026-11-29 10:00:00 UTC"  # the process start, not the wait start
        return emu.log_lines()[-readiness.JOURNAL_LINES :]

    monkeypatch.setattr(readiness, "run_systemctl_show", show)
    monkeypatch.setattr(readiness, "run_journalctl", journal)


def test_waits_through_loading_and_warmup_then_checks_output(emulator, capsys):
    # 3 s of warm-up: its 503s must outlast a loaded machine holding the module's polls up (1 s could be missed)
    emu = emulator(load_s=1.5, warmup_s=3.0)
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 60, "sleep": 0.2}, capsys)
    assert not failed, res
    assert res["health_status"] == 200
    assert res["first_seen"]["closed"] < res["first_seen"]["warming"] < res["first_seen"]["ready"]
    # it polled, a sleep apart: no more attempts than sleeps fit in the wait (however slow each attempt was)
    assert 3 <= res["attempts"] <= res["elapsed"] / 0.2 + 1.01
    assert len(res["sanity"]) == len(readiness.SANITY_PROMPTS)
    assert all(s["output"].strip() for s in res["sanity"])


@pytest.mark.parametrize("restart", [False, True], ids=["failed", "restarted"])
def test_crash_during_load_fails_fast_with_the_traceback(emulator, monkeypatch, capsys, restart):
    emu = emulator(load_s=3.0, fault="crash_on_load")  # exits 1 after 1.5 s
    fake_unit(monkeypatch, emu, restarts_after_exit=restart)
    failed, res = run_module(sglang_ready, {"url": emu.url, "unit": "sglang.service", "timeout": 60}, capsys)
    done = time.monotonic()
    assert failed
    # fast: well before the 60 s timeout (30 s guards waiting the timeout out, not speed: a loaded machine is slow)
    assert emu.exited_at is not None and done - emu.exited_at < 30
    assert "died before it was ready" in res["msg"] and "Traceback" in res["msg"]
    assert any("Traceback (most recent call last)" in line for line in res["journal"])
    if restart:
        assert "restarted" in res["msg"] and res["unit_state"]["NRestarts"] == "1"
    else:
        assert "failed" in res["msg"] and res["unit_state"]["ExecMainStatus"] == "1"


def test_garbage_output_is_caught(emulator, capsys):
    emu = emulator(fault="garbage")
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 30, "model": "qwen"}, capsys)
    assert failed
    assert res["failed_check"]["check"] == "repeated_char"
    assert set(res["failed_check"]["output"].strip()) == {"!"}
    assert "repeated_char" in res["msg"] and "!!!!" in res["msg"]
    assert res["health_status"] == 200


def test_garbage_output_is_caught_with_dummy_weights_too(emulator, capsys):
    emu = emulator("--load-format", "dummy", fault="garbage")
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 30, "model": "qwen"}, capsys)
    assert failed and res["failed_check"]["check"] == "repeated_char" and "token id 0" in res["msg"]
    assert res["sanity"][0]["dummy_weights"] is True


def test_generation_errors_fail_the_sanity_check(emulator, capsys):
    emu = emulator(fault="http_500")
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 30}, capsys)
    assert failed and res["failed_check"]["check"] == "http_status"
    assert "HTTP 500" in res["msg"]


def test_never_ready_times_out_in_warmup(emulator, capsys):
    emu = emulator(fault="never_ready")
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 3, "sleep": 0.2}, capsys)
    assert failed and res["stage"] == "warming" and res["health_status"] == 503


def test_api_key_is_used_for_sanity_and_never_returned(emulator, capsys):
    emu = emulator("--api-key", "s3cret-key")
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 30, "api_key": "s3cret-key"}, capsys)
    assert not failed, res
    assert "s3cret-key" not in str(res)
    failed, res = run_module(sglang_ready, {"url": emu.url, "timeout": 30, "api_key": "wrong"}, capsys)
    assert failed and "HTTP 401" in res["msg"]


def test_freeze_gc_after_the_sanity_prompts_with_the_key_and_a_refusal_only_warns(emulator, capsys, monkeypatch):
    emu = emulator("--api-key", "s3cret-key")
    args = {"url": emu.url, "timeout": 30, "api_key": "s3cret-key"}
    failed, res = run_module(sglang_ready, args, capsys)
    assert not failed and res["gc_frozen"] is None  # off unless asked
    assert not any("Freezing GC" in line for line in emu.log_lines())
    failed, res = run_module(sglang_ready, {**args, "freeze_gc": True}, capsys)
    assert not failed and res["gc_frozen"] is True and "freeze_gc" not in json.dumps(res.get("warnings", []))
    # the server's own log says it froze, after the sanity prompts' requests
    lines = emu.log_lines()
    frozen = [i for i, line in enumerate(lines) if "Freezing GC in Tokenizer Manager process. gen0:" in line]
    assert len(frozen) == 1 and any("chat/completions" in line for line in lines[: frozen[0]])
    # a server without the endpoint (404) or that refuses the key: a warning, the deploy goes on
    real = readiness.request

    def no_freeze(endpoint, method, path, *rest, **kw):
        return Response(404, {}, b"Not Found") if path == "/freeze_gc" else real(endpoint, method, path, *rest, **kw)

    monkeypatch.setattr(readiness, "request", no_freeze)
    failed, res = run_module(sglang_ready, {**args, "freeze_gc": True, "sanity": False}, capsys)
    assert not failed and res["gc_frozen"] is False
    assert "/freeze_gc did not freeze the server's GC (status 404)" in json.dumps(res["warnings"])


def test_freeze_gc_once_per_process_by_its_journal_and_never_raises(emulator, capsys, monkeypatch):
    emu = emulator()
    readiness.wait_ready(emu.url, timeout=30)  # then the module's own wait (with a unit: systemd's) stands aside
    args = {"url": emu.url, "timeout": 30, "freeze_gc": True, "unit": "sglang", "sanity": False}
    monkeypatch.setattr(sglang_ready, "unit_report", lambda *a: {})
    monkeypatch.setattr(sglang_ready, "wait_ready", lambda *a, **k: {"first_seen": {"ready": 0.0}})
    seen = []
    monkeypatch.setattr(sglang_ready, "froze_gc", lambda unit: seen.append(unit) or True)
    failed, res = run_module(sglang_ready, args, capsys)
    assert not failed and res["gc_frozen"] is True and seen == ["sglang"]
    assert not any("Freezing GC" in line for line in emu.log_lines())  # this process froze before: not again
    monkeypatch.setattr(sglang_ready, "froze_gc", lambda unit: False)
    failed, res = run_module(sglang_ready, args, capsys)
    assert not failed and res["gc_frozen"] is True
    assert sum("Freezing GC" in line for line in emu.log_lines()) == 1
    # no answer, or a key that cannot be a header: a result, never an exception
    assert readiness.freeze_gc("http://127.0.0.1:9", timeout=2)["error"].startswith("ConnectionRefusedError")
    bad = readiness.freeze_gc(emu.url, api_key="key-with-a-trailing-space ")
    assert bad["frozen"] is False and "white space" in bad["error"] and "trailing" not in bad["error"]


def test_freeze_gc_takes_the_admin_key_where_the_server_has_one(emulator, capsys):
    # SGLang's ADMIN_OPTIONAL endpoints (/freeze_gc, /flush_cache): only the admin key once one is set
    emu = emulator("--api-key", "s3cret-key", "--admin-api-key", "adm1n-key")
    args = {"url": emu.url, "timeout": 30, "api_key": "s3cret-key", "freeze_gc": True}
    failed, res = run_module(sglang_ready, args, capsys)
    assert not failed and res["gc_frozen"] is False and "(status 401)" in json.dumps(res["warnings"])
    failed, res = run_module(sglang_ready, {**args, "admin_api_key": "adm1n-key"}, capsys)
    assert not failed and res["gc_frozen"] is True and "adm1n-key" not in json.dumps(res)


@pytest.fixture
def watch(monkeypatch):
    def run(states):
        """UnitWatch over scripted systemctl readings; the reason per reading, None while healthy."""
        it = iter(states)
        monkeypatch.setattr(readiness, "run_systemctl_show", lambda unit: next(it))
        w = readiness.UnitWatch("sglang.service")
        return [w.check() for _ in states]

    return run


def _st(active="active", sub="running", pid="100", restarts="0"):
    return {"ActiveState": active, "SubState": sub, "MainPID": pid, "NRestarts": restarts, "ExecMainStatus": "0"}


def test_unit_watch_rules(watch):
    assert watch([_st(), _st(), _st()]) == [None, None, None]
    assert watch([_st(active="activating", sub="start", pid="0"), _st(pid="42"), _st(pid="42")]) == [None] * 3
    assert "main PID changed 100 -> 101" in watch([_st(), _st(pid="101")])[1]
    assert "restarted" in watch([_st(), _st(restarts="1")])[1]
    assert "waiting to restart" in watch([_st(), _st(active="activating", sub="auto-restart", pid="0")])[1]
    assert "failed" in watch([_st(), _st(active="failed", sub="failed", pid="0")])[1]
    assert "inactive" in watch([_st(active="inactive", sub="dead", pid="0")])[0]


@pytest.mark.parametrize(
    "text,check",
    [
        ("", "empty"),
        ("   \n", "whitespace"),
        ("!!!!!!!!!!", "repeated_char"),
        ("! ! ! ! ! !", "repeated_char"),
        ("\x00\x01\x02abc\x03\x04", "not_text"),
        ("\ufffd\ufffdok\ufffd", "not_text"),
        ("Paris", None),
        ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10", None),
        ("The sea is calm.\n", None),
        ("...", None),
    ],
)
def test_output_checks(text, check):
    problem = readiness.check_output(text)
    assert (problem[0] if problem else None) == check


@pytest.mark.parametrize(
    "text,check",
    [
        ("\n" * 256, None),  # the NEXTN dummy model's answer on an H200 (issue 22)
        ("", None),
        (" 337M" * 40, None),
        ("aaaaaaaa", None),
        ("\ufffd\ufffd\x00\x01", None),
        ("!!!!!!!!!!", "repeated_char"),  # token id 0 from NaN logits: a broken backend, weights or not
        ("! ! !\n! !", "repeated_char"),
        ("!!!", None),
        ("!!!!!a", None),
    ],
)
def test_dummy_weights_refuse_only_the_nan_signature(text, check):
    problem = readiness.check_output(text, dummy=True)
    assert (problem[0] if problem else None) == check
    assert readiness.dummy_weights({"load_format": "dummy"}) and not readiness.dummy_weights({"load_format": "auto"})
    assert not readiness.dummy_weights(None) and not readiness.dummy_weights(["dummy"])


def test_unusable_systemctl_is_reported_as_such(emulator, monkeypatch, capsys):
    emu = emulator(load_s=5.0)

    def broken(unit):
        raise RuntimeError("System has not been booted with systemd as init system (PID 1).")

    monkeypatch.setattr(readiness, "run_systemctl_show", broken)
    failed, res = run_module(sglang_ready, {"url": emu.url, "unit": "sglang.service", "timeout": 30}, capsys)
    assert failed and "cannot read the state of unit sglang.service" in res["msg"] and "died" not in res["msg"]


def test_each_default_has_one_source():
    """The engine's defaults; the module's documentation, its signature and the server role say the same."""
    import inspect

    import yaml

    import sglang_bench
    import sglang_drain
    from ansible_collections.sglang.deploy.plugins.module_utils import server_http

    documented = yaml.safe_load(sglang_ready.DOCUMENTATION)["options"]
    signature = inspect.signature(readiness.wait_ready).parameters
    for name, value in {
        "timeout": readiness.DEFAULT_TIMEOUT_S,
        "delay": readiness.DEFAULT_DELAY_S,
        "sleep": readiness.DEFAULT_SLEEP_S,
    }.items():
        assert documented[name]["default"] == value == signature[name].default, name
    role = REPO / "roles" / "sglang_server"
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    role_default = yaml.safe_load((role / "defaults" / "main.yml").read_text())["sglang_server_ready_timeout"]
    assert role_default == spec["sglang_server_ready_timeout"]["default"] == readiness.DEFAULT_TIMEOUT_S
    for module in (sglang_ready, sglang_bench, sglang_drain):
        assert yaml.safe_load(module.DOCUMENTATION)["options"]["url"]["default"] == server_http.LOCAL_URL
