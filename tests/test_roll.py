"""A rolling deploy behind the smg router (site.yml, playbooks/deploy.yml): what it refuses before anything runs."""

from __future__ import annotations

import importlib.util
import os
import subprocess

import pytest
import yaml

from ansible_json import PLAYBOOK_BIN, needs_playbook

from sglang_deploy import api
from sglang_deploy import fleet
from sglang_deploy.cli import runs
from sglang_deploy.paths import REPO

# Every host answers ssh on a closed port: a play that reaches a host fails it as unreachable.
DOWN = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_ssh_args": "-o ConnectTimeout=3"}


def site(tmp_path, replicas: list[str], *args: str, playbook: str = "site.yml") -> subprocess.CompletedProcess:
    inventory = {
        "all": {
            "vars": DOWN,
            "children": {
                "sglang_replicas": {"hosts": {h: {} for h in replicas}},
                "sglang_router": {"hosts": {"rt": {}}},
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    cmd = [PLAYBOOK_BIN, "-i", str(tmp_path / "inventory.yml"), playbook, "-e", "profile=baseline", *args]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


@needs_playbook
@pytest.mark.parametrize(
    ("replicas", "serial", "named"),
    [
        (["r1", "r2", "r3"], "3", "This batch (r1, r2, r3, sglang_fleet_serial 3) is every server of the router on rt"),
        (["r1", "r2"], "100%", "Use a smaller sglang_fleet_serial (default 1)"),
        (["r1"], "1", "The router has this one server: add replicas"),
    ],
)
def test_a_batch_that_is_every_server_of_the_router_is_refused_before_anything_runs(tmp_path, replicas, serial, named):
    """Refused in the plan, before the stack and router plays of site.yml reach any host (it used to come after
    the router play had run)."""
    out = site(tmp_path, replicas, "-e", f"sglang_fleet_serial={serial}")
    text = " ".join(out.stdout.split())
    assert out.returncode != 0 and named in text and "Nothing was run." in text
    assert "UNREACHABLE" not in out.stdout and "Install CUDA" not in out.stdout


@needs_playbook
def test_a_batch_that_leaves_the_router_a_server_passes_the_plan(tmp_path):
    out = site(tmp_path, ["r1", "r2", "r3"], "-e", '{"sglang_fleet_serial": [1, "100%"]}')
    assert "Nothing was run" not in out.stdout
    assert "UNREACHABLE" in out.stdout  # the stack play went on to the hosts


def test_a_host_the_run_did_not_restart_is_unchanged_and_behind_a_router_not_drained():
    results = {"a": {"restarted": False}, "b": {"restarted": True}}
    rows = fleet.summary(["a", "b"], {"a": "nextn", "b": "baseline"}, results, "nextn", True)
    assert [(r["outcome"], r["state"]) for r in rows] == [
        ("unchanged", "unchanged, not drained"),
        ("deployed", "deployed"),
    ]
    alone = fleet.summary(["a"], {}, {"a": {"failed": True, "rolled_back_to": None, "serves": None}}, "nextn", False)
    assert [(r["outcome"], r["state"]) for r in alone] == [("failed", "nextn failed here; not serving")]


def failed_roll_status() -> dict:
    """What playbooks/status.yml publishes after a roll of baseline that stopped at the 2nd replica: the 1st
    updated, the 2nd rolled back to nextn (its record says so), the 3rd untouched."""
    unit = "LoadState=loaded\nActiveState=active\nSubState=running\n"
    records = {
        "r1": {"profile": "baseline", "asked": "baseline", "last_good_profile": "baseline"},
        "r2": {
            "profile": "nextn",
            "asked": "baseline",
            "last_good_profile": "nextn",
            "rolled_back": {"from": "baseline", "to": "nextn", "at": "2026-12-01T12:00:00Z"},
        },
        "r3": {"profile": "nextn", "asked": "nextn", "last_good_profile": "nextn"},
    }
    router = {
        "deployed": True,
        "url": "http://rt:8000",
        "unit": unit,
        "readiness": {"status": 200, "body": {}},
        "workers": {h: {"url": f"http://{h}:30000", "status": "ready", "healthy": True} for h in records},
        "members": [{"id": h, "url": f"http://{h}:30000"} for h in records],
    }
    return {
        "sglang_status": {h: {"unit": unit, "local": {"sglang_server": r}, "manifest": {}} for h, r in records.items()},
        "sglang_router_status": {"rt": router},
    }


def test_status_after_a_failed_roll_names_the_host_that_rolled_back_and_the_one_the_roll_did_not_reach():
    """It named r1, the one replica that got what was asked, as the odd one, and said nothing of r2's rollback."""
    data = failed_roll_status()
    hosts = api.parse_status(data)
    view = api.parse_fleet(data, hosts)["rt"]
    assert [(m["kind"], m["subject"]) for m in view["mismatches"]] == [
        ("rolled_back", "r2"),
        ("roll_stopped_before", "r3"),
    ]
    assert "baseline failed there (2026-12-01T12:00:00Z) and it serves nextn again" in view["mismatches"][0]["message"]
    table = runs.format_status(hosts)
    assert "r1    baseline  baseline" in table
    assert "r2    nextn     baseline (failed, rolled back to nextn)" in table
    assert "r3    nextn     nextn" in table


def test_the_summary_says_a_host_restarted_when_the_role_found_a_change_the_check_had_not():
    """Another run changed the host between the check and the restart: it restarted, so it was not "unchanged"."""
    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "filter_plugins" / "sglang.py")
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    hostvars = {
        "a": {"sglang_fleet_done": True, "sglang_fleet_restarted": True},
        "b": {"sglang_fleet_done": True, "sglang_fleet_restarted": False},
        "c": {"sglang_fleet_failed": "baseline", "sglang_server_rolled_back_to": "baseline"},
    }
    rows = filters.fleet_summary(["a", "b", "c"], hostvars, "nextn", False)
    assert [r["outcome"] for r in rows] == ["deployed", "unchanged", "rolled back"]


@needs_playbook
def test_deploy_yml_alone_refuses_the_outage_too(tmp_path):
    """Its import of the plan had a `when` on the plan's own fact, which skipped the refusal after the plan was made."""
    out = site(tmp_path, ["r1", "r2"], "-e", "sglang_fleet_serial=0", playbook="playbooks/deploy.yml")
    assert out.returncode != 0 and "is every server of the router on rt" in " ".join(out.stdout.split())
    assert "UNREACHABLE" not in out.stdout
