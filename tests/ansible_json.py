"""Real ansible-playbook runs for the tests: the venv's binary, the project's ansible.cfg, the json callback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_deploy.paths import REPO

PLAYBOOK_BIN = shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) or shutil.which(
    "ansible-playbook"
)
needs_playbook = pytest.mark.skipif(PLAYBOOK_BIN is None, reason="ansible-playbook not installed")


def run_playbook(args: list[str], cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """`ansible-playbook ARGS` in cwd with the project's ansible.cfg; the run and its JSON report."""
    full_env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        **(env or {}),
    }
    out = subprocess.run([PLAYBOOK_BIN, *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=300)
    return out, json.loads(out.stdout[out.stdout.index("{") :])
