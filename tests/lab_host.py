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

# Lane 2's share of the lab tests: test files, or single tests of a file whose module fixture deploys once per lane
# (test_api.py's baseline_with_key). Balanced by the durations of CI's run of 2026-12-06 (pytest --durations, s):
# lane 1: test_api.py's setup 178, rerun 250, crashing server 112, the rest ~40; test_tune_lab.py ~165,
# test_traffic_lab.py ~90, test_bench_workloads.py ~30, test_collection_lab.py ~100: ~965. Lane 2: test_api.py's
# setup 178, compare repeats 246, answers wrong 62, compare ranks 140; test_canary.py 149: ~775 (lane 2 ended 197 s
# after lane 1 with test_collection_lab.py in it: its compare repeats took 692 s beside the molecule scenarios).
# test_api.py's tests keep their order in each lane: answers-wrong needs the keyless baseline compare leaves.
LANE_2 = (
    "tests/test_api.py::test_compare_repeats_each_profile_interleaved_and_calls_only_what_the_noise_allows",
    "tests/test_api.py::test_a_profile_that_answers_wrong_is_refused_and_rolled_back",
    "tests/test_api.py::test_compare_ranks_the_profile_that_answers_right",
    "tests/test_canary.py",
)


def lane_of(nodeid: str) -> str:
    """The lane ("1" or "2") of a lab test by its pytest node id (relative to the repository's root)."""
    for entry in LANE_2:
        if nodeid == entry or nodeid.startswith(entry + "::") or nodeid.startswith(entry + "["):
            return "2"
    return "1"


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
