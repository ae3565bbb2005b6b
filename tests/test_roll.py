"""A rolling deploy behind the smg router (site.yml, playbooks/deploy.yml): what it refuses before anything runs."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from ansible_json import PLAYBOOK_BIN, needs_playbook

from sglang_deploy.paths import REPO

# Every host answers ssh on a closed port: a play that reaches a host fails it as unreachable.
DOWN = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_ssh_args": "-o ConnectTimeout=3"}


def site(tmp_path, replicas: list[str], *args: str) -> subprocess.CompletedProcess:
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
    cmd = [PLAYBOOK_BIN, "-i", str(tmp_path / "inventory.yml"), "site.yml", "-e", "profile=baseline", *args]
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
