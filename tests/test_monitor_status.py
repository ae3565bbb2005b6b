"""Issue 50, item 6: `sglang-deploy status` shows the alerts each Prometheus (group monitoring) fires, and `lab monitor`
brings Prometheus up beside the lab. The module against a fake Prometheus in-process; playbooks/status.yml's alert
play run for real on a local host; what a host reports checked as data; the command line's output."""

from __future__ import annotations  # noqa: I001 (emulator_proc must come before the modules)

import contextlib
import http.server
import json
import threading

import pytest
from emulator_proc import free_port, run_module  # first: puts the repo's module_utils on the import path

import sglang_prometheus_alerts
from sglang_deploy import api, cli
from sglang_deploy.api import runner
from ansible_collections.sglang.deploy.plugins.module_utils import prometheus_alerts, server_http
from sglang_deploy.paths import REPO

LOCAL_MONITORING = REPO / "tests" / "fixtures" / "runner" / "monitoring-hosts.yml"


def alert(name: str, state: str = "firing", **labels) -> dict:
    return {
        "labels": {"alertname": name, "instance": "10.0.0.11:30000", "severity": "critical", **labels},
        "annotations": {"summary": f"{name} summary", "description": "what to do"},
        "state": state,
        "activeAt": "2026-12-06T09:40:12.123456789Z",
        "value": "1e+00",
    }


def answer(alerts: list) -> bytes:
    return json.dumps({"status": "success", "data": {"alerts": alerts}}).encode()


@contextlib.contextmanager
def prometheus(body: bytes, status: int = 200):
    """A fake Prometheus on 127.0.0.1 that answers every GET with ``body``; yields its URL and the paths asked."""
    asked = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


# --- the host side: prometheus_alerts and the module


def test_firing_alerts_are_read_clipped_and_counted():
    long = "x" * (prometheus_alerts.MAX_TEXT + 50)
    found = [alert("SGLangStalled"), alert("SGLangTTFTHigh", "pending"), "not an alert", alert(long, instance=7)]
    with prometheus(answer(found)) as (url, asked):
        got = prometheus_alerts.firing(url)
    assert asked == ["/api/v1/alerts"]
    assert got["firing"] == 2 and got["pending"] == 1
    assert got["alerts"][0] == {
        "name": "SGLangStalled",
        "instance": "10.0.0.11:30000",
        "severity": "critical",
        "since": "2026-12-06T09:40:12.123456789Z",
        "summary": "SGLangStalled summary",
    }
    assert got["alerts"][1]["name"] == "x" * prometheus_alerts.MAX_TEXT and got["alerts"][1]["instance"] == ""


def test_alerts_over_the_bound_are_counted_not_listed():
    with prometheus(answer([alert(f"A{i}") for i in range(prometheus_alerts.MAX_ALERTS + 5)])) as (url, _):
        got = prometheus_alerts.firing(url)
    assert len(got["alerts"]) == prometheus_alerts.MAX_ALERTS and got["firing"] == prometheus_alerts.MAX_ALERTS + 5


@pytest.mark.parametrize(
    ("body", "status", "error", "match"),
    [
        (b"<html>not prometheus</html>", 200, prometheus_alerts.AlertsError, "without Prometheus's success JSON"),
        (answer([]), 503, prometheus_alerts.AlertsError, "HTTP 503"),
        (
            json.dumps({"status": "success", "data": {"alerts": {}}}).encode(),
            200,
            prometheus_alerts.AlertsError,
            "list",
        ),
        (json.dumps({"status": "success", "data": []}).encode(), 200, prometheus_alerts.AlertsError, "list"),
        (b"[" * 2000, 200, prometheus_alerts.AlertsError, "success JSON"),
        (answer([alert("A")] * 20), 200, server_http.HttpError, "over 2048 bytes"),
    ],
)
def test_an_answer_that_is_not_prometheus_alerts_is_refused(monkeypatch, body, status, error, match):
    monkeypatch.setattr(prometheus_alerts, "MAX_BODY_BYTES", 2048)
    with prometheus(body, status) as (url, _):
        with pytest.raises(error, match=match):
            prometheus_alerts.firing(url)


def test_the_module_returns_the_alerts_and_names_the_fix_when_nothing_answers(capsys):
    with prometheus(answer([alert("SGLangServerDown")])) as (url, _):
        failed, res = run_module(sglang_prometheus_alerts, {"url": url}, capsys)
    assert not failed and res["firing"] == 1 and res["alerts"][0]["name"] == "SGLangServerDown", res
    url = f"http://127.0.0.1:{free_port()}"
    failed, res = run_module(sglang_prometheus_alerts, {"url": url}, capsys)
    assert failed and res["msg"].startswith(f"Prometheus at {url} did not answer its alerts"), res
    assert "playbooks/monitoring.yml" in res["msg"] and "sglang-deploy lab monitor" in res["msg"]


# --- playbooks/status.yml's alert play, run for real on this machine (no server play: sglang_targets matches none)


def status_run(port: int) -> api.RunResult:
    return runner.run_playbook(
        "playbooks/status.yml",
        inventory=LOCAL_MONITORING,
        extravars={"sglang_targets": "!all", "sglang_monitoring_port": port},
        kind="test-alerts",
    )


def test_status_play_publishes_the_alerts_of_the_monitoring_host():
    alerts = [alert("SGLangStalled"), alert("GPUXidError", instance="10.0.0.12:9835"), alert("Quiet", "pending")]
    with prometheus(answer(alerts)) as (url, _):
        run = status_run(int(url.rsplit(":", 1)[1]))
    assert run.ok, (run.failures, run.error)
    got = api.parse_alerts(run.data)
    assert list(got) == ["local-a"]
    assert (got["local-a"].firing, got["local-a"].pending, got["local-a"].error) == (2, 1, None)
    assert got["local-a"].alerts[1] == api.Alert(
        "GPUXidError", "10.0.0.12:9835", "critical", "2026-12-06T09:40:12Z", "GPUXidError summary"
    )


def test_status_play_reports_a_prometheus_that_does_not_answer_without_failing():
    run = status_run(free_port())
    assert run.ok, (run.failures, run.error)
    got = api.parse_alerts(run.data)["local-a"]
    assert got.alerts == [] and "did not answer its alerts" in got.error and "playbooks/monitoring.yml" in got.error


def test_status_play_without_a_monitoring_group_reports_no_alerts():
    run = runner.run_playbook(
        "playbooks/status.yml",
        inventory=REPO / "tests" / "fixtures" / "runner" / "hosts.yml",
        extravars={"sglang_targets": "!all"},
        kind="test-alerts",
    )
    assert run.status == "successful" and api.parse_alerts(run.data) == {}


# --- what a host reports is data


def report(alerts: list, firing: int | None = None, pending: object = 0, **more) -> dict:
    return {
        "sglang_alerts": {
            "mon-1": {
                "alerts": alerts,
                "firing": len(alerts) if firing is None else firing,
                "pending": pending,
                "error": None,
                **more,
            }
        }
    }


GOOD = prometheus_alerts.brief(alert("SGLangStalled"))


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"sglang_alerts": {"mon-1": ["not", "a", "mapping"]}}, "not a mapping"),
        (report("SGLangStalled"), "alerts is not a list"),
        (report([GOOD] * (prometheus_alerts.MAX_ALERTS + 1)), "at most 100"),
        (report([GOOD], firing=0), "firing: at least the alerts listed"),
        (report([GOOD], pending=True), "not a count"),
        (report([GOOD], pending="1"), "not a count"),
        (report([GOOD], firing=10**7), "not a count"),
        (report(["SGLangStalled"]), "an alert is not a mapping"),
        (report([{**GOOD, "severity": ["critical"]}]), "severity is not text"),
        (report([{**GOOD, "summary": "s" * (prometheus_alerts.MAX_TEXT + 1)}]), "summary is not text of at most 256"),
        (report([{k: v for k, v in GOOD.items() if k != "since"}]), "since is not text"),
    ],
)
def test_an_alert_report_that_breaks_the_schema_is_that_hosts_error(data, named):
    got = api.parse_alerts(data)["mon-1"]
    assert got.alerts == [] and got.error.startswith("its alert report is refused: ") and named in got.error, got


def test_control_characters_in_an_alert_are_escaped_and_the_time_shortened():
    hostile = {**GOOD, "name": "Evil\x1b]0;pwned\x07", "summary": "a\nb\u202ec", "since": "2026-12-06T09:40:12+02:00"}
    got = api.parse_alerts(report([hostile], error=None))["mon-1"].alerts[0]
    assert got.name == "Evil\\x1b]0;pwned\\x07" and got.summary == "a\\nb\\u202ec"
    assert got.since == "2026-12-06T09:40:12+02:00"
    odd = api.parse_alerts(report([{**GOOD, "since": "yesterday\x1b"}]))["mon-1"].alerts[0]
    assert odd.since == "yesterday\\x1b"
    error = api.parse_alerts({"sglang_alerts": {"mon-1": {"error": "down\x1b[2J" + "x" * 5000}}})["mon-1"].error
    assert error.startswith("down\\x1b[2J") and len(error) < 1100


def test_prometheus_urls_keep_only_an_address_and_port():
    data = {
        "sglang_prometheus": {
            "a": "http://172.17.0.2:9090",
            "b": "http://[::1]:9090",
            "c": "http://x:9090/\x1b",
            "d": "javascript:alert(1)",
            "e": ["http://x:1"],
        }
    }
    assert api.prometheus_urls(data) == {"a": "http://172.17.0.2:9090", "b": "http://[::1]:9090"}
    assert api.prometheus_urls({"sglang_prometheus": "http://x:1"}) == {}


# --- the command line


def status_result(alerts: dict, failures: tuple = ()) -> api.StatusResult:
    run = api.RunResult(
        "playbooks/status.yml", "successful", 0, hosts={"mon-1": api.HostOutcome(ok=3)}, failures=list(failures)
    )
    return api.StatusResult(hosts={}, run=run, alerts=alerts)


def test_status_prints_the_firing_alerts_and_exits_0(monkeypatch, capsys):
    many = [prometheus_alerts.brief(alert(f"A{i}")) for i in range(3)]
    data = {
        "sglang_alerts": {
            "mon-1": {"alerts": many[:2], "firing": 3, "pending": 1, "error": None},
            "mon-2": {"alerts": [], "firing": 0, "pending": 0, "error": None},
        }
    }
    monkeypatch.setattr(api, "status", lambda **k: status_result(api.parse_alerts(data)))
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "alerts firing (Prometheus on mon-1): 3 (1 pending)\n" in out
    assert "  A0 on 10.0.0.11:30000 (critical, since 2026-12-06T09:40:12Z): A0 summary\n" in out
    assert "  ... and 1 more (the Prometheus UI lists them)" in out
    assert "alerts firing (Prometheus on mon-2): none\n" in out
    assert cli.main(["status", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["alerts"]
    assert shown["mon-1"]["firing"] == 3 and shown["mon-1"]["alerts"][1]["name"] == "A1"


def test_status_exits_1_when_a_prometheus_was_not_read(monkeypatch, capsys):
    data = {"sglang_alerts": {"mon-1": {"error": "Prometheus at http://127.0.0.1:9090 did not answer its alerts"}}}
    monkeypatch.setattr(api, "status", lambda **k: status_result(api.parse_alerts(data)))
    assert cli.main(["status"]) == 1
    assert "alerts of the Prometheus on mon-1: NOT READ: Prometheus at" in capsys.readouterr().out


def test_lab_monitor_deploys_with_the_monitoring_inventory_and_prints_the_address(monkeypatch, capsys):
    calls = []

    def run_playbook(playbook, **kw):
        calls.append((playbook, kw))
        return api.RunResult(
            playbook,
            "successful",
            0,
            hosts={"sglang-lab-1": api.HostOutcome(ok=1)},
            data={"sglang_prometheus": {"sglang-lab-1": "http://172.17.0.2:9090"}},
        )

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(api.runner, "run_playbook", run_playbook)
    assert cli.main(["lab", "monitor"]) == 0
    ((playbook, kw),) = calls
    assert playbook == "site.yml" and kw["inventory"] == "inventory/lab-monitoring" and kw["profile"] == "baseline"
    assert kw["extravars"]["sglang_benchmark_enabled"] is False
    out = capsys.readouterr().out
    assert "Prometheus on sglang-lab-1: http://172.17.0.2:9090 (" in out
    assert "alerts page: http://172.17.0.2:9090/classic/alerts" in out  # Debian's package: /alerts is a 404
    assert "sglang-deploy status -i inventory/lab-monitoring" in out


def test_lab_monitor_without_a_monitoring_host_and_profile_elsewhere_are_usage_errors(monkeypatch, capsys):
    ok = api.RunResult("site.yml", "successful", 0, hosts={"h": api.HostOutcome(ok=1)})
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: ok)
    assert cli.main(["lab", "monitor", "-i", str(REPO / "inventory" / "lab.yml")]) == 2
    assert "has no host in the group monitoring" in capsys.readouterr().err
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: pytest.fail("a playbook ran"))
    assert cli.main(["lab", "up", "--profile", "nextn"]) == 2
    assert "--profile is for `sglang-deploy lab monitor` only" in capsys.readouterr().err


def test_the_lab_monitoring_inventory_adds_the_group_and_metrics_and_leaves_the_lab_alone():
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    def host_vars(source):
        inv = InventoryManager(loader=DataLoader(), sources=[str(source)])
        host = inv.get_host("sglang-lab-1")
        return [g.name for g in host.get_groups()], VariableManager(loader=DataLoader(), inventory=inv).get_vars(
            host=host
        )

    groups, found = host_vars(api.LAB_MONITORING)
    assert (
        "monitoring" in groups
        and found["sglang_enable_metrics"] is True
        and found["sglang_monitoring_bind"] == "0.0.0.0"
    )
    assert found["ansible_connection"] == "community.docker.docker"  # inventory/lab.yml's, through the link
    groups, found = host_vars(REPO / "inventory" / "lab.yml")
    assert "monitoring" not in groups and "sglang_enable_metrics" not in found
