"""The lab container the `lab` tests deploy to (./lab setup creates it), and why it is not usable.

`./lab test` runs the lab tests in two lanes at once, each a pytest process with SGLANG_DEPLOY_LAB_LANE=1 or 2 over
its share of the tests (LANE_2: the rest is lane 1's), each deploying only to its own container: lane 1 to
sglang-lab-1 (inventory/lab.yml), lane 2 to sglang-lab-2 (inventory/lab-2.yml; tests/conftest.py makes that the
default inventory of the api and of ansible-playbook in its process). Without the variable (`pytest -m lab` by hand)
every lab test runs, on sglang-lab-1."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

from sglang_deploy.paths import REPO

LANES = ("1", "2")
LANE = os.environ.get("SGLANG_DEPLOY_LAB_LANE", "")
if LANE not in ("", *LANES):
    raise SystemExit(f"SGLANG_DEPLOY_LAB_LANE={LANE!r}: it is 1, 2 or unset (every lab test, on sglang-lab-1)")
LAB_HOST = "sglang-lab-2" if LANE == "2" else "sglang-lab-1"
LAB_INVENTORY = REPO / "inventory" / ("lab-2.yml" if LANE == "2" else "lab.yml")
# The lock that keeps two test runs from deploying to one container at once (tests/conftest.py's lab_lock).
LAB_LOCK = f"/tmp/{LAB_HOST}.lock"

# Each lane's share of the lab tests, by test file: a lane collects only its own files (collecting every test module
# costs about 7 CPU s) and tests/conftest.py refuses a lab test in a file of neither list. All of test_api.py in one
# lane: its module fixture (baseline_with_key) deploys once per lane, and its tests build on each other's deploys.
# Balanced by CPU s (each test's processes and its lab container; 2 cores, so CI's time follows CPU), measured with
# benchmarks/pytest_cpu.py on 2026-12-07, both lanes at once: lane 2: test_api.py 209, test_traffic_lab.py 59: 268;
# lane 1: test_canary.py 88, test_tune_lab.py 82, test_collection_lab.py 51, test_bench_workloads.py 25: 246.
LANE_FILES = {
    "1": (
        "tests/test_bench_workloads.py",
        "tests/test_canary.py",
        "tests/test_collection_lab.py",
        "tests/test_roll.py",
        "tests/test_tune_lab.py",
    ),
    "2": (
        "tests/test_api.py",
        "tests/test_traffic_lab.py",
    ),
}


def lane_of(nodeid: str) -> str | None:
    """The lane ("1" or "2") of a lab test by its pytest node id (relative to the repository's root); None: no lane's."""
    path = nodeid.partition("::")[0]
    return next((lane for lane, files in LANE_FILES.items() if path in files), None)


@cache
def lab_missing() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed (./lab setup installs it)"
    r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", LAB_HOST], capture_output=True, text=True)
    if r.returncode != 0 or r.stdout.strip() != "true":
        how = (
            "./lab setup, or sglang-deploy lab up"
            if LANE != "2"
            else f"ansible-playbook -i {LAB_INVENTORY.relative_to(REPO)} playbooks/lab.yml"
        )
        return f"the lab container {LAB_HOST} is not running ({how})"
    if not (REPO / "plugins" / "action" / "sglang_profile.py").exists():
        return "plugins/action/sglang_profile.py is not there yet: site.yml cannot run"
    return None
