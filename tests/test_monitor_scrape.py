"""Prometheus's scrape jobs for the monitoring role (monitor/scrape.py, filters sglang_monitor_*): the jobs the rules
select on, each server labelled with its release, the /health probe's instance joined to the server's, the rule file
for the targets' releases and router; a configuration promtool accepts; bad targets refused; and playbooks/monitoring.yml
matching no host in an inventory without the group monitoring."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from sglang_deploy.monitor import metrics, scrape
from sglang_deploy.monitor.metrics import JOBS, MonitorError
from test_monitor_promtool import promtool  # noqa: F401 (the fixture)

REPO = Path(__file__).resolve().parents[1]
TARGETS = [
    {"host": "a", "node": "10.0.0.1:9100", "server": "10.0.0.1:30000", "release": "0.5.23", "gpu": "10.0.0.1:9835"},
    {"host": "b", "node": "10.0.0.2:9100", "server": "10.0.0.2:30000", "release": "0.5.16", "gpu": ""},
    {"host": "r", "node": "10.0.0.3:9100", "router": "10.0.0.3:29000", "router_version": "1.13.0"},
]


def _jobs(configs: list) -> dict:
    return {job["job_name"]: job for job in configs}


def test_each_job_the_rules_select_on_with_the_release_of_each_server():
    jobs = _jobs(scrape.scrape_configs(TARGETS, "127.0.0.1:9115"))
    assert set(jobs) == set(JOBS.values())
    servers = jobs[JOBS["server"]]["static_configs"]
    assert servers == [
        {"targets": ["10.0.0.1:30000"], "labels": {"sglang_release": "0.5.23"}},
        {"targets": ["10.0.0.2:30000"], "labels": {"sglang_release": "0.5.16"}},
    ]
    probe = jobs[JOBS["health"]]
    assert [g["targets"] for g in probe["static_configs"]] == [
        ["http://10.0.0.1:30000/health"],
        ["http://10.0.0.2:30000/health"],
    ]
    assert probe["relabel_configs"][-1] == {"target_label": "__address__", "replacement": "127.0.0.1:9115"}
    assert [g["targets"] for g in jobs[JOBS["gpu"]]["static_configs"]] == [["10.0.0.1:9835"]]
    assert [g["targets"] for g in jobs[JOBS["router"]]["static_configs"]] == [["10.0.0.3:29000"]]
    assert len(jobs[JOBS["node"]]["static_configs"]) == 3


def test_a_job_without_targets_is_left_out():
    jobs = _jobs(scrape.scrape_configs([TARGETS[1]], "127.0.0.1:9115"))
    assert set(jobs) == {JOBS["server"], JOBS["health"], JOBS["node"]}


def test_the_rules_follow_the_targets_releases_and_router():
    groups = [g["name"] for g in yaml.safe_load(scrape.target_rules(TARGETS))["groups"]]
    assert groups == ["sglang-0.5.23", "sglang-0.5.16", "smg-1.13.0", "gpu"]
    without_router = yaml.safe_load(scrape.target_rules(TARGETS[:1], {"stall_seconds": 120}))
    assert [g["name"] for g in without_router["groups"]] == ["sglang-0.5.23", "gpu"]
    assert "[120s]" in yaml.safe_dump(without_router)


@pytest.mark.parametrize(
    "targets, message",
    [
        ([{"node": "x:1"}], "needs host"),
        ([{"host": "a", "serverr": "x:1"}], "needs host"),
        ([{"host": "a", "server": "http://x:1"}], "is not host:port"),
        ([{"host": "a", "server": "x:30000", "release": ""}], "needs its release"),
        (
            [{"host": "a", "server": "x:1", "release": "0.5.23"}, {"host": "b", "server": "x:1", "release": "0.5.23"}],
            "share",
        ),
        (
            [
                {"host": "r", "router": "x:2", "router_version": "1.13.0"},
                {"host": "s", "router": "y:2", "router_version": "1.12"},
            ],
            "different smg releases",
        ),
    ],
)
def test_bad_targets_are_refused(targets, message):
    with pytest.raises(MonitorError, match=message):
        scrape.scrape_configs(targets, "127.0.0.1:9115")
        scrape.router_version(targets)


def test_promtool_accepts_the_configuration_and_its_rules(promtool, tmp_path):  # noqa: F811
    rules_path = tmp_path / "rules.yml"
    rules_path.write_text(scrape.target_rules(TARGETS))
    config = {
        "global": {"scrape_interval": "15s"},
        "rule_files": [str(rules_path)],
        "scrape_configs": scrape.scrape_configs(TARGETS, "127.0.0.1:9115"),
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    done = subprocess.run([promtool, "check", "config", tmp_path / "prometheus.yml"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_filters_fail_the_task_with_the_refusal():
    sys.path.insert(0, str(REPO / "collections"))
    from ansible_collections.sglang.deploy.plugins.filter.sglang_monitor import FilterModule

    filters = FilterModule().filters()
    assert "groups:" in filters["sglang_monitor_rules"](TARGETS[:1], {})
    with pytest.raises(AnsibleFilterError, match="unknown monitoring setting"):
        filters["sglang_monitor_rules"](TARGETS[:1], {"stall_second": 120})
    with pytest.raises(AnsibleFilterError, match="is not host:port"):
        filters["sglang_monitor_scrape_configs"]([{"host": "a", "node": "a"}], "127.0.0.1:9115")


def test_the_monitoring_plays_match_no_host_without_the_group_monitoring():
    done = subprocess.run(
        [Path(sys.executable).parent / "ansible-playbook", "-i", "inventory/lab.yml", "site.yml", "--list-hosts"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    plays = done.stdout.split("\n  play #")
    watched = [p for p in plays if "Prometheus" in p.splitlines()[0]]
    assert len(watched) == 2 and all("hosts (0):" in p for p in watched)
    assert "monitoring" not in done.stderr  # no warning about a missing group


def _relabel(name: str, rule: dict) -> str:
    """Prometheus's replace action on __name__: the regex anchored at both ends, $1 the first group."""
    found = re.fullmatch(rule["regex"], name)
    return found.expand(re.sub(r"\$(\d)", r"\\\1", rule["replacement"])) if found else name


def test_the_server_job_names_underscore_escaped_sglang_samples_back():
    """prometheus_client answers Prometheus 2.x's OpenMetrics scrape with sglang_<name> samples (client_python
    issue 1177; issue 50): the server job's metric relabelling gives every recorded sample its sglang: name back
    and leaves colon names, and other jobs, alone."""
    jobs = _jobs(scrape.scrape_configs(TARGETS, "127.0.0.1:9115"))
    (rule,) = jobs[JOBS["server"]]["metric_relabel_configs"]
    assert rule["source_labels"] == ["__name__"] and rule["target_label"] == "__name__"
    assert all("metric_relabel_configs" not in job for name, job in jobs.items() if name != JOBS["server"])
    for path in sorted((REPO / "src/sglang_deploy/data").glob("metrics-0.*.json")):
        recorded = metrics.metric_set(path.stem.removeprefix("metrics-"))
        for sample in recorded.series():
            assert sample.startswith("sglang:"), (path.name, sample)  # the relabel would rename an sglang_ one
            assert _relabel(sample, rule) == sample
            assert _relabel("sglang_" + sample.removeprefix("sglang:"), rule) == sample
    assert _relabel("up", rule) == "up"
