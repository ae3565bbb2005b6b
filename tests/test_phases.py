"""site.yml's phases (tags install, model, configure, restart, benchmark): each selects its own tasks, and the
validation runs with every one of them (ansible-playbook --list-tasks, no host needed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_deploy import api

REPO = Path(__file__).resolve().parents[1]
PLAYBOOK_BIN = Path(sys.executable).parent / "ansible-playbook"
VALIDATE = "sglang_server : Validate the profile and render its launch for this host"
# The server role's writes are included (skipped as one task where nothing is due), so --list-tasks names the include.
UNIT = "Write the server's environment file and the systemd unit of the profile"
LAUNCHER = "Install the launcher"
# phase -> (a task it runs, a task of another phase it leaves out)
PHASE_TASKS = {
    "install": (
        "sglang_server : Find whether the service account or the server's folders differ from what the role creates",
        UNIT,
    ),
    "model": ("Fetch, verify and install the checkpoint of the model lock", LAUNCHER),
    "configure": (UNIT, LAUNCHER),
    "restart": ("sglang_server : Wait for the server to be ready and to answer sanely", UNIT),
    "benchmark": (
        "sglang_benchmark : Run the benchmark sweep",
        "sglang_server : Wait for the server to be ready and to answer sanely",
    ),
}


def listed(*args: str) -> str:
    out = subprocess.run(
        [str(PLAYBOOK_BIN), "site.yml", "--list-tasks", "-e", "profile=baseline", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_phases_are_the_tags_of_site_yml():
    tags = set(re.findall(r"TAGS: \[([^\]]*)\]", listed()))
    used = {t.strip() for group in tags for t in group.split(",") if t.strip()} - {"always"}
    assert used == set(api.PHASES)


@pytest.mark.parametrize("phase", api.PHASES)
def test_each_phase_runs_its_tasks_after_the_validation(phase):
    out = listed("--tags", phase)
    runs, other = PHASE_TASKS[phase]
    assert VALIDATE in out and runs in out and other not in out
    if phase == "benchmark":  # the benchmark reads what the server role published
        assert "sglang_server : Publish what is deployed for the benchmark and the caller" in out
