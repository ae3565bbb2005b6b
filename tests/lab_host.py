"""The lab container the `lab` tests deploy to (./lab setup creates it), and why it is not usable."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache

from sglang_deploy.paths import REPO

LAB_HOST = "sglang-lab-1"


@cache
def lab_missing() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed (./lab setup installs it)"
    r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", LAB_HOST], capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != "true":
        return f"the lab container {LAB_HOST} is not running (./lab setup, or sglang-deploy lab up)"
    if not (REPO / "plugins" / "action" / "sglang_profile.py").exists():
        return "plugins/action/sglang_profile.py is not there yet: site.yml cannot run"
    return None
