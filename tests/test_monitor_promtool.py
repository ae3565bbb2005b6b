"""The rendered rules through Prometheus's own promtool (Debian's prometheus package, unpacked by tools/promtool.py):
``promtool check rules`` for every recorded release, and ``promtool test rules`` with input series for every alert,
one case where it fires and one where it stays quiet, for every recorded release's metric names."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from sglang_deploy.launch.flags import recorded_releases
from sglang_deploy.monitor import dashboard, metrics, rules

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"router_version": "1.13.0"}
HOST = 'instance="h1:30000"'


def unpacked(program: str) -> Path:
    """``promtool`` or ``prometheus`` from tools/promtool.py; the test is skipped where apt cannot fetch them."""
    spec = importlib.util.spec_from_file_location("promtool_tool", REPO / "tools" / "promtool.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    try:
        return getattr(tool, program)()
    except tool.Unavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def promtool() -> Path:
    return unpacked("promtool")


def _series(name: str, labels: str, values: str) -> dict:
    return {"series": f"{name}{{{labels}}}", "values": values}


def _sglang(m: metrics.MetricSet, base: str, suffix: str, extra: str, values: str, host: str = HOST) -> dict:
    labels = f'job="sglang", {host}, model_name="m", tp_rank="0"' + (f", {extra}" if extra else "")
    return _series(m.sample(base, suffix), labels, values)


def _latency(m, base: str, top: str) -> tuple:
    """The case of a p99 alert: every request lands above the top finite bucket (p99 = the top bound, over the SLA)
    or in the bottom one."""
    rising = "0+10x40"

    def histogram(slow: bool) -> list:
        bounds = (("0.01", "0x40" if slow else rising), (top, "0x40" if slow else rising), ("+Inf", rising))
        return [_sglang(m, base, "_bucket", f'le="{le}"', values) for le, values in bounds]

    return histogram(True), histogram(False), "20m", SERVER, top


def _gpu(key: str, values: str, dcgm_values: str) -> list:
    return [
        _series(metrics.GPU_METRICS[key].name, 'job="sglang-gpu", instance="h1:9835", gpu="0"', values),
        _series(metrics.GPU_METRICS[key].dcgm, 'job="sglang-gpu", instance="h2:9400", gpu="1"', dcgm_values),
    ]


GPU_FIRING = [
    {"job": "sglang-gpu", "instance": "h1:9835", "gpu": "0"},
    {"job": "sglang-gpu", "instance": "h2:9400", "gpu": "1"},
]
SERVER = [{"job": "sglang", "instance": "h1:30000"}]


def cases(m: metrics.MetricSet) -> dict:
    """alert -> (series when it fires, series when it must not, eval time, the labels it fires with, $value)."""
    pending = [_sglang(m, "num_running_reqs", "", "", "2x40"), _sglang(m, "num_queue_reqs", "", "", "1x40")]
    idle = [
        _sglang(m, base, suffix, extra, values, host='instance="h2:30000"')
        for base, suffix, extra, values in (
            ("num_running_reqs", "", "", "0x40"),
            ("num_queue_reqs", "", "", "0x40"),
            ("realtime_tokens", "_total", 'mode="decode"', "100x40"),
        )
    ]
    return {
        "SGLangServerDown": (
            [_series("up", f'job="sglang", {HOST}', "0x40")],
            [_series("up", f'job="sglang", {HOST}', "1x40")],
            "5m",
            SERVER,
            "0",
        ),
        "SGLangNotReady": (
            [
                _series("probe_success", f'job="sglang-health", {HOST}', "0x40"),
                _series("up", f'job="sglang", {HOST}', "1x40"),
            ],
            # a server that is down is not also "not ready"
            [
                _series("probe_success", f'job="sglang-health", {HOST}', "0x40"),
                _series("up", f'job="sglang", {HOST}', "0x40"),
            ],
            "15m",
            [{"job": "sglang-health", "instance": "h1:30000"}],
            "0",
        ),
        "SGLangStalled": (
            [*pending, _sglang(m, "realtime_tokens", "_total", 'mode="decode"', "100x40")],
            # busy and making progress, or idle
            [*pending, _sglang(m, "realtime_tokens", "_total", 'mode="decode"', "100+50x40"), *idle],
            "10m",
            SERVER,
            "3",
        ),
        "SGLangTTFTHigh": _latency(m, "time_to_first_token_seconds", "10"),
        "SGLangTPOTHigh": _latency(m, "inter_token_latency_seconds", "1"),
        "SGLangKVCacheNearFull": (
            [_sglang(m, "token_usage", "", "", "0.99x40")],
            [_sglang(m, "token_usage", "", "", "0.5x40")],
            "15m",
            SERVER,
            "99%",
        ),
        "SGLangRouterDown": (
            [_series("up", 'job="smg", instance="r:29000"', "0x40")],
            [_series("up", 'job="smg", instance="r:29000"', "1x40")],
            "5m",
            [{"job": "smg", "instance": "r:29000"}],
            "0",
        ),
        "SGLangRouterWorkerUnhealthy": (
            [_series("smg_worker_health", 'job="smg", instance="r:29000", worker="http://h1:30000"', "0x40")],
            [_series("smg_worker_health", 'job="smg", instance="r:29000", worker="http://h1:30000"', "1x40")],
            "5m",
            [{"job": "smg", "instance": "r:29000", "worker": "http://h1:30000"}],
            "0",
        ),
        "GPUXidError": (_gpu("xid", "0 0 0 1x20", "0 0 0 79x20"), _gpu("xid", "0x40", "0x40"), "5m", GPU_FIRING, None),
        "GPUEccUncorrected": (
            _gpu("ecc", "0 0 0 2x20", "0 0 0 1x20"),
            _gpu("ecc", "3x40", "1x40"),
            "5m",
            GPU_FIRING,
            None,
        ),
        # 64: hardware thermal slowdown; 32: software thermal. 4 (the power cap) and 1 (idle) are no fault.
        "GPUThrottled": (_gpu("throttle", "64x40", "32x40"), _gpu("throttle", "4x40", "5x40"), "10m", GPU_FIRING, None),
        "GPUTemperatureHigh": (
            _gpu("temperature", "90x40", "90x40"),
            _gpu("temperature", "70x40", "60x40"),
            "10m",
            GPU_FIRING,
            "90",
        ),
        "GPUExporterDown": (
            [_series("up", 'job="sglang-gpu", instance="h1:9835"', "0x40")],
            [_series("up", 'job="sglang-gpu", instance="h1:9835"', "1x40")],
            "5m",
            [{"job": "sglang-gpu", "instance": "h1:9835"}],
            "0",
        ),
    }


def _expand(text: str, labels: dict, value: str | None) -> str:
    """The alert's annotation as Prometheus expands it, for the labels and $value of the case."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda mt: labels[mt.group(1)], text)
    return re.sub(r"\{\{ \$value( \| humanizePercentage)? \}\}", lambda mt: value, text)


def _expected(alert: rules.Alert, fired: list, value: str | None) -> list:
    extra = {"severity": alert.severity, "component": alert.group}
    if value is None:  # the GPU alerts name no $value
        assert "$value" not in alert.summary
    return [
        {
            "exp_labels": {**labels, **extra},
            "exp_annotations": {k: _expand(getattr(alert, k), labels, value) for k in ("summary", "description")},
        }
        for labels in fired
    ]


def unit_tests(m: metrics.MetricSet, rule_file: Path) -> dict:
    """promtool's test file: for each alert a case where it fires and one where it does not."""
    tests = []
    for alert in rules.ALERTS:
        firing, quiet, at, fired, value = cases(m)[alert.name]
        for series, expected in ((firing, _expected(alert, fired, value)), (quiet, [])):
            tests.append(
                {
                    "name": f"{alert.name} {'fires' if expected else 'quiet'}",
                    "interval": "1m",
                    "input_series": series,
                    "alert_rule_test": [{"eval_time": at, "alertname": alert.name, "exp_alerts": expected}],
                }
            )
    return {"rule_files": [str(rule_file)], "evaluation_interval": "1m", "tests": tests}


def test_every_alert_has_a_case():
    assert set(cases(metrics.metric_set(recorded_releases()[-1]))) == set(rules.alert_names())


def _run(promtool: Path, *args) -> str:
    done = subprocess.run([str(promtool), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("version", recorded_releases())
def test_promtool_checks_and_tests_the_rules_of_each_release(promtool, tmp_path, version):
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(rules.render_rules([version], SETTINGS))
    assert "SUCCESS" in _run(promtool, "check", "rules", rule_file)
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(unit_tests(metrics.metric_set(version), rule_file), sort_keys=False))
    assert "SUCCESS" in _run(promtool, "test", "rules", test_file)


def test_promtool_checks_the_rules_of_several_releases_at_once(promtool, tmp_path):
    """Hosts on different releases: one group each, selected by the sglang_release target label, no duplicate
    rules (promtool's lint)."""
    rule_file = tmp_path / "rules.yml"
    releases = recorded_releases()
    rule_file.write_text(rules.render_rules([releases[0], releases[-1]], SETTINGS))
    assert "SUCCESS" in _run(promtool, "check", "rules", rule_file)


def test_promtool_test_fails_when_an_alert_does_not_fire(promtool, tmp_path):
    """The harness would catch a dead rule: the stall alert with a threshold no server reaches fires no more."""
    version = recorded_releases()[-1]
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(rules.render_rules([version], {**SETTINGS, "kv_usage_ratio": 1}))
    test_file = tmp_path / "test.yml"
    test_file.write_text(yaml.safe_dump(unit_tests(metrics.metric_set(version), rule_file), sort_keys=False))
    done = subprocess.run([str(promtool), "test", "rules", str(test_file)], capture_output=True, text=True)
    assert done.returncode != 0 and "SGLangKVCacheNearFull" in done.stdout + done.stderr


def _grafana_to_promql(expr: str) -> str:
    """A dashboard query as Prometheus sees it once Grafana fills its variables in."""
    return expr.replace("$__rate_interval", "5m").replace("$instance", ".+")


@pytest.mark.parametrize("version", [recorded_releases()[0], recorded_releases()[-1]])
def test_every_dashboard_query_parses(promtool, tmp_path, version):
    """Each query of the dashboard, as a recording rule, passes promtool check rules."""
    model = dashboard.dashboard(version, rules.settings_from(SETTINGS))
    records = [
        {"record": f"dashboard:query_{i}:check", "expr": _grafana_to_promql(e)}
        for i, e in enumerate(dashboard.exprs(model))
    ]
    rule_file = tmp_path / "dashboard.yml"
    rule_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": records}]}))
    assert f"SUCCESS: {len(records)} rules found" in _run(promtool, "check", "rules", rule_file)
