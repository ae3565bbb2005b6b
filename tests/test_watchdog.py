"""The stall watchdog (host/watchdog.py, issue 50): its decisions on a simulated clock (a number of seconds the test
moves on), a run with the unit, the probe, the journal and systemctl faked, and the probe against a stalled emulator."""

from __future__ import annotations

import json
import os

import pytest

from emulator_proc import Emulator
from ansible_collections.sglang.deploy.plugins.module_utils import host_record, watch_router, watchdog
from sglang_deploy.launch.formats import env_file

BASE = {"service": "sglang", "failures": 3, "max_restarts": 2, "window_s": 3600, "grace_s": 600}
SETTINGS = watchdog.Settings.parse(BASE)
FAIL = watchdog.Seen(False, 10_000.0, False, "no token from POST /generate within 30 s", "1")
GOOD = watchdog.Seen(False, 10_000.0, True, "", "1")


class Clock:
    """The watchdog's runs on a simulated clock: each run ``every`` seconds after the last."""

    def __init__(self, settings=SETTINGS, now: float = 1_000_000.0):
        self.settings, self.now, self.state, self.actions = settings, now, {}, []

    def run(self, seen: watchdog.Seen, every: float = 60.0) -> str:
        self.now += every
        self.state, action = watchdog.decide(self.state, seen, self.settings, self.now)
        self.actions.append(action)
        return action


def test_the_nth_failure_in_a_row_restarts_and_a_good_probe_resets_the_count():
    clock = Clock()
    assert [clock.run(FAIL), clock.run(FAIL), clock.run(GOOD), clock.run(FAIL), clock.run(FAIL)] == [
        "failing", "failing", "none", "failing", "failing"
    ]  # fmt: skip
    assert clock.run(FAIL) == "restart" and clock.state["failures"] == 0 and clock.state["restarts"] == [clock.now]


def test_restarts_are_rate_limited_per_window_and_resume_when_the_window_has_room():
    clock = Clock()
    for _ in range(2):
        while clock.run(FAIL) != "restart":
            pass
        clock.run(GOOD)  # the restarted server answers once, then stalls again
    actions = [clock.run(FAIL) for _ in range(3)]
    assert actions == ["failing", "failing", "rate_limited"]
    assert "2 restarts within 3600 s" in clock.state["rate_limited"]
    assert "restart the unit yourself" in clock.state["rate_limited"]
    assert clock.run(FAIL) == "rate_limited"  # it stays stopped while the window is full
    assert clock.run(FAIL, every=3600) == "restart"  # the first restart has left the window


def test_a_host_held_by_a_deploy_is_left_alone_and_its_count_starts_over():
    clock = Clock()
    clock.run(FAIL), clock.run(FAIL)
    held = watchdog.Seen(True, None, False)
    assert [clock.run(held) for _ in range(10)] == ["held"] * 10
    assert [clock.run(FAIL), clock.run(FAIL)] == ["failing", "failing"]


def test_a_start_that_has_not_answered_gets_its_grace_and_one_that_answered_does_not():
    clock = Clock()
    loading = watchdog.Seen(False, 120.0, False, "connection refused", "7")
    assert [clock.run(loading) for _ in range(5)] == ["starting"] * 5
    assert clock.run(watchdog.Seen(False, 420.0, True, "", "7")) == "none"
    stalled = watchdog.Seen(False, 480.0, False, "no token", "7")  # same start, young, but it answered once
    assert [clock.run(stalled) for _ in range(3)] == ["failing", "failing", "restart"]


def test_after_its_own_restart_the_watchdog_waits_for_the_stop_and_the_load():
    clock = Clock()
    for _ in range(3):
        clock.run(FAIL)
    stopping = watchdog.Seen(False, None, False, "unit sglang is deactivating", "")
    assert [clock.run(stopping) for _ in range(9)] == ["starting"] * 9  # 540 s < grace_s 600
    assert clock.run(stopping) == "failing"


def test_an_inactive_unit_is_a_failure_even_after_status_0():
    state = {"ActiveState": "inactive", "SubState": "dead", "ExecMainStatus": "0", "LoadState": "loaded"}
    assert "inactive (dead, exit status 0)" in watchdog.unit_problem(state, "sglang")
    assert watchdog.unit_problem({**state, "ActiveState": "active"}, "sglang") is None
    assert watchdog.unit_problem({"LoadState": "not-found"}, "sglang") == "unit sglang not found"


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({}, "'service'"),
        ({**BASE, "failures": 0}, "'failures'"),
        ({**BASE, "deadline_s": "30"}, "'deadline_s'"),
        ({**BASE, "service": "--root=/"}, "'service'"),
        ({**BASE, "failures_in_a_row": 3}, "'failures_in_a_row'"),
        ({**BASE, "router_url": "http://r:8000"}, "'worker_id'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(raw, named):
    with pytest.raises(watchdog.WatchError, match=named):
        watchdog.Settings.parse(raw)


def test_the_api_key_is_read_back_from_the_environment_file_the_role_writes(tmp_path):
    key = 'k3y"with$odd`chars\\and-more'
    path = tmp_path / "sglang.env"
    path.write_text("# managed\n" + env_file({"HF_HOME": "/x", "SGLANG_API_KEY": key}))
    assert watchdog.env_value(str(path), "SGLANG_API_KEY") == key
    assert watchdog.env_value(str(path), "SGLANG_ADMIN_API_KEY") == ""


def faked_run(monkeypatch, tmp_path, unit: dict, problem: str | None, **settings):
    """run_once with the unit, the probe, the journal and systemctl faked; (action, lines, systemctl calls)."""
    calls = []
    monkeypatch.setattr(watchdog, "run_systemctl_show", lambda service, properties: unit)
    monkeypatch.setattr(watchdog, "probe", lambda url, key, deadline: problem)
    monkeypatch.setattr(watchdog, "journal", lambda service: ["line one", "\x1b]0;pwned\x07 traceback", "x" * 2000])
    monkeypatch.setattr(watchdog, "restart", lambda service, stop_timeout_s: (calls.append(service), (False, None))[1])
    values = {
        **BASE,
        "failures": 1,
        "state_path": str(tmp_path / "state.json"),
        "record_path": str(tmp_path / "facts.d" / "sglang_server.fact"),
        "hold_path": str(tmp_path / "hold"),
        **settings,
    }
    action, lines = watchdog.run_once(watchdog.Settings.parse(values), 2_000_000.0, 50_000.0)
    return action, lines, calls


def test_a_restart_writes_the_reason_and_an_escaped_bounded_excerpt_into_the_host_record(monkeypatch, tmp_path):
    unit = {"ActiveState": "active", "LoadState": "loaded", "ExecMainStartTimestampMonotonic": "1000000"}
    action, lines, calls = faked_run(monkeypatch, tmp_path, unit, "no token from POST /generate within 30 s")
    assert action == "restart" and calls == ["sglang"] and "restarted sglang" in lines[-1]
    fact = json.loads((tmp_path / "facts.d" / "sglang_server.fact").read_text())
    entry = host_record.read({"sglang_server": fact})["watchdog"]  # the record passes its own schema
    assert entry["reason"].startswith("no token from POST /generate within 30 s; restarted after 1 failures")
    assert entry["excerpt"][1] == "\\x1b]0;pwned\\x07 traceback" and len(entry["excerpt"][2]) == host_record.MAX_LINE
    assert (entry["restarts"], entry["at"]) == (1, "1970-01-24T03:33:20Z")
    assert json.loads((tmp_path / "state.json").read_text())["restarts"] == [2_000_000.0]


def test_a_held_host_is_not_probed(monkeypatch, tmp_path):
    (tmp_path / "hold").write_text("deploy\n")
    os.utime(tmp_path / "hold", (2_000_000.0 - 60, 2_000_000.0 - 60))
    action, _, calls = faked_run(monkeypatch, tmp_path, {}, "no token")
    assert action == "held" and calls == []
    os.utime(tmp_path / "hold", (2_000_000.0 - 7200, 2_000_000.0 - 7200))  # a deploy that died long ago holds no more
    assert faked_run(monkeypatch, tmp_path, {"ActiveState": "failed"}, None)[0] == "restart"


def test_a_record_with_a_hostile_watchdog_entry_is_refused():
    bad = {"at": "t", "reason": "r", "excerpt": ["a\x1b[2J"], "restarts": 1, "failures": 0}
    with pytest.raises(host_record.RecordError, match="'watchdog'"):
        host_record.read({"sglang_server": {"watchdog": bad}})


def test_a_deploy_keeps_the_watchdog_entry():
    entry = {"at": "t", "reason": "stalled", "excerpt": [], "restarts": 1, "failures": 0, "rate_limited": None}
    values = dict.fromkeys(host_record.EVENT_FIELDS["deployed"], "x") | {"profile": "p", "service": "sglang"}
    assert host_record.update({"watchdog": entry}, "deployed", values)["watchdog"] == entry


def test_the_probe_finds_a_stalled_server_whose_health_is_200(tmp_path):
    from ansible_collections.sglang.deploy.plugins.module_utils.readiness import probe as health

    emulator = Emulator(tmp_path, fault="stall").wait_ready()
    try:
        assert health(emulator.url)[0] == "ready"
        assert watchdog.probe(emulator.url, "", 1.0) == "no token from POST /generate within 1 s"
    finally:
        emulator.stop()
    healthy = Emulator(tmp_path).wait_ready()
    try:
        assert watchdog.probe(healthy.url, "", 10.0) is None
    finally:
        healthy.stop()


@pytest.mark.parametrize("drains", [True, False])
def test_a_restart_kills_a_server_whose_drain_does_not_end(monkeypatch, drains):
    """A stalled server's SIGTERM drain never ends (its requests never finish): the restart waits stop_timeout_s,
    not the unit's TimeoutStopSec, then kills it (found by molecule/watch)."""
    calls = []

    def run(argv, timeout, **kwargs):
        calls.append(argv[1:])
        if argv[1:] == ["stop", "sglang"] and len(calls) == 1 and not drains:
            assert timeout == 2.0
            raise watchdog.subprocess.TimeoutExpired(argv, timeout)
        return watchdog.subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(watchdog.subprocess, "run", run)
    assert watchdog.restart("sglang", 2.0) == (not drains, None)
    killed = [] if drains else [["kill", "--signal=SIGKILL", "sglang"], ["stop", "sglang"]]
    assert calls == [["stop", "sglang"], *killed, ["reset-failed", "sglang"], ["start", "--no-block", "sglang"]]


def test_the_excerpt_leaves_out_request_log_lines(monkeypatch):
    """Red team (2026-12-06, MEDIUM): the excerpt copied the unit's journal (readable by root and the journal's
    groups) into the 0644 host record that status brings to the controller, prompts and outputs included where
    request logging was on (--log-requests, or a traffic capture's level 3). Those lines are left out now."""
    import subprocess

    prompt = "my card number is 4111 1111 1111 1111"
    journal = "\n".join(
        [
            "2026-12-06T09:00:00+0000 host sglang[1]: Scheduler hit an exception: Traceback",
            f'2026-12-06T09:00:01+0000 host sglang[1]: {{"timestamp": "x", "event": "request.finished", '
            f'"obj": {{"text": "{prompt}"}}}}',
            f"2026-12-06T09:00:02+0000 host sglang[1]: [2026-12-06] Receive: obj=GenerateReqInput(text='{prompt}')",
            f"2026-12-06T09:00:03+0000 host sglang[1]: [2026-12-06] Finish: obj=GenerateReqInput(text='{prompt}')",
        ]
    )
    monkeypatch.setattr(
        subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=journal + "\n", stderr="")
    )
    lines = watchdog.journal("sglang")
    assert len(lines) == 4 and "Scheduler hit an exception" in lines[0]
    assert not any(prompt in line for line in lines)


def test_leave_escapes_the_routers_worker_id_in_the_delete_path(monkeypatch):
    """The router's own id goes into the path as one segment: '/', '?' and '#' escaped (issue 50)."""
    settings = watchdog.Settings.parse({**BASE, "router_url": "http://127.0.0.1:30080", "worker_id": "w1"})
    calls = []
    monkeypatch.setattr(watch_router, "router_workers", lambda url, key: {"w1": {"worker_id": "a/b?c#d"}})
    monkeypatch.setattr(watch_router, "_call", lambda s, method, path, body=None: calls.append(path) or 204)
    monkeypatch.setattr(watch_router, "wait_router", lambda *args, **kwargs: None)
    assert watch_router.leave(settings).startswith("took w1 out")
    assert calls == ["/workers/a%2Fb%3Fc%23d"]


def test_a_unit_that_does_not_stop_after_sigkill_fails_the_run_with_one_line(monkeypatch, tmp_path, capsys):
    """The stop after SIGKILL timing out: recorded in the host record, not started, exit 1 and one line, no
    traceback (issue 50, item 1)."""
    unit = {"ActiveState": "active", "LoadState": "loaded", "ExecMainStartTimestampMonotonic": "1000000"}
    monkeypatch.setattr(watchdog, "run_systemctl_show", lambda service, properties: unit)
    monkeypatch.setattr(watchdog, "probe", lambda url, key, deadline: "no token")
    monkeypatch.setattr(watchdog, "journal", lambda service: ["line one"])
    calls = []

    def run(argv, timeout, **kwargs):
        calls.append(argv[1])
        if argv[1] == "stop":
            raise watchdog.subprocess.TimeoutExpired(argv, timeout)
        return watchdog.subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(watchdog.subprocess, "run", run)
    config = {
        **BASE,
        "failures": 1,
        "grace_s": 0,
        "state_path": str(tmp_path / "state.json"),
        "record_path": str(tmp_path / "sglang_server.fact"),
        "hold_path": str(tmp_path / "hold"),
    }
    (tmp_path / "watch.json").write_text(json.dumps(config))
    assert watchdog.main(["--config", str(tmp_path / "watch.json")]) == 1
    out, err = capsys.readouterr()
    assert err == "" and out.splitlines() == [
        "restart failed: sglang did not stop after SIGKILL (systemctl stop sglang took over 60 s): not started"
    ]
    assert calls == ["stop", "kill", "stop"]
    fact = json.loads((tmp_path / "sglang_server.fact").read_text())
    assert "did not stop after SIGKILL" in host_record.read({"sglang_server": fact})["watchdog"]["reason"]


def test_rejoin_posts_the_servers_key_and_is_done_only_once_the_router_lists_the_host(monkeypatch):
    """smg registers a worker POSTed without a key as keyless: against a server with an API key its registration
    failed on 401 and stayed pending (a later POST: 409), so the host never came back (molecule/fleet, issue 50).
    The POST carries the server's key; left_router stays until a run finds the host in the router's list."""
    settings = watchdog.Settings.parse(
        {**BASE, "router_url": "http://r:8000", "worker_id": "w1", "worker_url": "http://w1:30000"}
    )
    listed, calls = {}, []
    monkeypatch.setattr(watch_router, "router_workers", lambda url, key: listed)
    monkeypatch.setattr(watch_router, "_call", lambda s, method, path, body=None: calls.append(body) or 202)
    state = {"left_router": "w1"}
    watchdog.act(settings, {}, state, "none", 0.0, "sk-server-key")
    assert calls == [{"url": "http://w1:30000", "api_key": "sk-server-key"}] and state["left_router"] == "w1"
    listed["w1"] = {"url": "http://w1:30000"}
    action, lines = watchdog.act(settings, {}, state, "none", 0.0, "sk-server-key")
    assert "left_router" not in state and len(calls) == 1 and lines == ["w1 is in the router's list again"]
    monkeypatch.setattr(watch_router, "router_workers", lambda url, key: {})
    monkeypatch.setattr(watch_router, "_call", lambda s, method, path, body=None: 409)
    assert watch_router.rejoin(settings, "") == (False, "the router is still adding w1")
