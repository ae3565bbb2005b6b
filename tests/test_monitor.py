"""Monitoring rules follow the release: the recorded metric sets (tools/record_metrics.py), the release a version
uses, every rule's names checked against the release's recorded set, the settings' checks, the GPU exporter's
names. promtool's checks are in test_monitor_promtool.py."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from sglang_deploy.launch.flags import DATA, recorded_releases
from sglang_deploy.monitor import dashboard, metrics, rules
from sglang_deploy.monitor.metrics import MonitorError

REPO = Path(__file__).resolve().parents[1]
SETTINGS = rules.Settings(router_version="1.13.0")


def _tool():
    spec = importlib.util.spec_from_file_location("record_metrics", REPO / "tools" / "record_metrics.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_metrics_are_recorded_for_every_release_with_a_flag_list():
    recorded = sorted(p.name[len("metrics-") : -len(".json")] for p in DATA.glob("metrics-0*.json"))
    assert sorted(recorded) == sorted(recorded_releases())
    for release in recorded:
        doc = json.loads((DATA / f"metrics-{release}.json").read_text())
        assert doc["sglang_version"] == release and doc["source"].endswith("(ast)")
        assert doc["prefix"] in metrics.PREFIXES
        ttft = doc["prefix"] + "time_to_first_token_seconds"
        assert doc["metrics"][ttft]["series"] == [ttft + s for s in ("_bucket", "_sum", "_count")]


SOURCE = """
from collections import Counter as Tally
from prometheus_client import Counter, Gauge, Histogram
from sglang.srt.utils.gauge_histogram import GaugeHistogram

class Collector:
    def __init__(self, labels):
        self.tokens = Counter(name="sglang_tokens_total", documentation="t", labelnames=list(labels.keys()) + ["mode"])
        self.running = Gauge(name="sglang_num_running_reqs", documentation="r", labelnames=labels.keys())
        self.ttft = Histogram(name="sglang_time_to_first_token_seconds", documentation="x", labelnames=["a"])
        self.keys = GaugeHistogram(name="sglang_keys", documentation="k", labelnames=labels.keys(), bucket_bounds=[1])
        self.side = Gauge(name=f"sglang_side_{labels['m']}", documentation="s")
        self.tally = Tally(x for x in labels)
"""


def test_the_recorder_reads_constructors_types_labels_and_sample_names():
    tool = _tool()
    found, unresolved = {}, []
    tool.scan("collector.py", SOURCE, found, unresolved)
    assert found["sglang_tokens"] == {
        "type": "counter",
        "labels": ["mode"],
        "collector_labels": True,
        "series": ["sglang_tokens_total"],
    }
    assert found["sglang_time_to_first_token_seconds"]["series"] == [
        "sglang_time_to_first_token_seconds_bucket",
        "sglang_time_to_first_token_seconds_sum",
        "sglang_time_to_first_token_seconds_count",
    ]
    assert found["sglang_time_to_first_token_seconds"]["collector_labels"] is False
    assert found["sglang_keys"]["labels"] == ["gt", "le"] and found["sglang_keys"]["type"] == "gauge"
    assert set(found) == {
        "sglang_tokens",
        "sglang_num_running_reqs",
        "sglang_time_to_first_token_seconds",
        "sglang_keys",
    }
    assert len(unresolved) == 1 and unresolved[0].startswith("collector.py:12 f") and "sglang_side_" in unresolved[0]
    assert tool.prefix(found) == "sglang_"


def test_an_unrecorded_patch_uses_the_nearest_lower_release_and_an_older_one_is_refused():
    newest = recorded_releases()[-1]
    later = metrics.metric_set(newest + ".post9")
    assert (later.release, later.asked) == (newest, newest + ".post9")
    with pytest.raises(MonitorError, match="record_flags.py and tools/record_metrics.py"):
        metrics.metric_set("0.4.0")
    with pytest.raises(MonitorError, match=r"run tools/record_metrics.py --version 9\.9"):
        metrics._load("metrics-9.9.json", "sglang", "9.9", "9.9")
    with pytest.raises(MonitorError, match="record_metrics.py --router"):
        metrics.router_metric_set("0.0.1")


def _known(version: str) -> set:
    """The names a rule may read, from the recorded files themselves (not from the code under test)."""
    doc = json.loads((DATA / f"metrics-{metrics.metric_set(version).release}.json").read_text())
    smg = json.loads((DATA / "metrics-smg-1.13.0.json").read_text())
    names = {s for m in [*doc["metrics"].values(), *smg["metrics"].values()] for s in m["series"]}
    records = {r.name for group in rules.RECORDS.values() for r in group}
    return names | records | metrics.gpu_series() | metrics.PROBE_SERIES | {"up"}


@pytest.mark.parametrize("version", recorded_releases())
def test_every_rule_names_only_metrics_the_release_exposes(version):
    groups = rules.rule_groups([version], SETTINGS)
    exprs = [r["expr"] for g in groups for r in g["rules"]]
    assert {r["alert"] for g in groups for r in g["rules"] if "alert" in r} == set(rules.alert_names())
    for expr in exprs:
        assert metrics.expr_metrics(expr) <= _known(version), expr


def _wrong(expr) -> rules.Alert:
    return rules.Alert("Wrong", "sglang", "warning", lambda c: "1m", expr, "s", "d")


def test_a_rule_naming_a_metric_the_release_lacks_is_refused():
    version = recorded_releases()[0]
    typo = _wrong(lambda s: 'sglang:num_runing_reqs{job="sglang"} > 0')
    with pytest.raises(MonitorError, match=rf"Wrong names sglang:num_runing_reqs, which sglang {version} does not"):
        rules.rule_groups([version], SETTINGS, alerts=(*rules.ALERTS, typo))
    # a metric only a later release has (0.5.23's per-request TPOT histogram)
    later = _wrong(lambda s: f"{s.sel('request_time_per_output_token_seconds', '_count')} > 0")
    with pytest.raises(MonitorError, match="exposes no metric sglang:request_time_per_output_token_seconds"):
        rules.rule_groups([version], SETTINGS, alerts=(later,))
    assert rules.rule_groups([recorded_releases()[-1]], SETTINGS, alerts=(later,))


def test_rules_follow_the_prefix_of_the_release(monkeypatch):
    """sglang: and sglang_ alternated between releases (sgl-project/sglang#12618, #15758, #36428): a release that
    exposes sglang_ names gets rules with sglang_ names."""
    colon = metrics.metric_set(recorded_releases()[-1])

    def underscored(m: metrics.Metric) -> metrics.Metric:
        rename = m.name.replace("sglang:", "sglang_")
        return dataclasses.replace(m, name=rename, series=tuple(s.replace("sglang:", "sglang_") for s in m.series))

    families = {n.replace("sglang:", "sglang_"): underscored(m) for n, m in colon.families.items()}
    monkeypatch.setattr(rules, "metric_set", lambda v: dataclasses.replace(colon, prefix="sglang_", families=families))
    text = "\n".join(r["expr"] for g in rules.rule_groups(["0.6.0"]) for r in g["rules"])
    assert "sglang_num_running_reqs{" in text and "sglang:" not in text.replace("instance:sglang_", "")


def test_several_releases_select_their_targets_by_release_label():
    old, new = recorded_releases()[0], recorded_releases()[-1]
    groups = rules.rule_groups([old, new, old], SETTINGS)
    assert [g["name"] for g in groups] == [f"sglang-{old}", f"sglang-{new}", "smg-1.13.0", "gpu"]
    down = next(r for r in groups[1]["rules"] if r.get("alert") == "SGLangServerDown")
    assert down["expr"] == f'up{{job="sglang", sglang_release="{new}"}} == 0'
    assert down["labels"]["sglang_release"] == new
    single = rules.rule_groups([new])
    assert [g["name"] for g in single] == [f"sglang-{new}", "gpu"]
    assert "sglang_release" not in rules.render_rules([new])


@pytest.mark.parametrize(
    "given, message",
    [
        ({"ttft_p99": 2000}, "unknown monitoring setting(s) ttft_p99: known are ttft_p99_ms"),
        ({"stall_for": "90"}, "stall_for='90': give a Prometheus duration such as '1m'"),
        ({"kv_usage_ratio": 1.5}, "at most 1"),
        ({"stall_seconds": 10}, "at least 60"),
        ({"tpot_p99_ms": True}, "a positive number"),
        ({"router_version": 1.13}, "the smg version as a string"),
    ],
)
def test_settings_are_checked(given, message):
    with pytest.raises(MonitorError) as err:
        rules.settings_from(given)
    assert message in str(err.value)


def test_settings_reach_the_rules():
    text = rules.render_rules([recorded_releases()[-1]], {"ttft_p99_ms": 2000, "stall_seconds": 300})
    assert "instance:sglang_ttft_seconds:p99 > 2\n" in text and "[300s]" in text


def test_expr_metrics_reads_names_not_functions_labels_or_durations():
    expr = (
        'histogram_quantile(0.99, sum by (job, le) (rate(sglang:x_bucket{job="a", le=~"1e3"}[5m]))) > 1e3 '
        "unless on (instance) up offset 5m or floor(DCGM_FI_DEV_X / 8) % 2 == 1"
    )
    assert metrics.expr_metrics(expr) == {"sglang:x_bucket", "up", "DCGM_FI_DEV_X"}


def test_the_gpu_exporter_writes_the_names_the_rules_read():
    """host/gpu_exporter.py's METRICS table holds every name of GPU_METRICS, with the same type."""
    path = REPO / "plugins" / "module_utils" / "gpu_exporter.py"
    tree = ast.parse(path.read_text())
    table = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "METRICS"
    )
    for metric in metrics.GPU_METRICS.values():
        assert table[metric.name][0] == metric.type, metric.name


@pytest.mark.parametrize("version", recorded_releases())
def test_the_dashboard_names_only_metrics_the_release_exposes(version):
    model = json.loads(dashboard.render_dashboard(version, {"router_version": "1.13.0"}))
    assert model["title"] == f"SGLang {version}" and model["schemaVersion"] >= 36
    assert {v["name"] for v in model["templating"]["list"]} == {"datasource", "instance"}
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids)) and len({(p["gridPos"]["x"], p["gridPos"]["y"]) for p in model["panels"]}) == len(
        ids
    )
    for panel in model["panels"]:
        assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}"
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    for expr in dashboard.exprs(model):
        assert metrics.expr_metrics(expr) <= _known(version), expr


def test_a_dashboard_query_naming_a_missing_metric_is_refused(monkeypatch):
    """A required panel whose metric the release lacks fails; an optional one is left out."""
    lacking = dashboard.Panel(
        "TPOT", "s", (("x", lambda s: dashboard._s(s, "request_time_per_output_token_seconds", "_count")),)
    )
    typo = dashboard.Panel("typo", "s", (("x", lambda s: "sglang:num_runing_reqs"),))
    old = recorded_releases()[0]
    for panel in (lacking, typo):
        monkeypatch.setattr(dashboard, "PANELS", (panel,))
        with pytest.raises(MonitorError):
            dashboard.dashboard(old)
    monkeypatch.setattr(dashboard, "PANELS", (dataclasses.replace(lacking, optional=True),))
    assert dashboard.dashboard(old)["panels"] == []
    assert len(dashboard.dashboard(recorded_releases()[-1])["panels"]) == 1
