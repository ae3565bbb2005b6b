"""Test tiers, one marker each: `unit` (this machine only: Python, ansible-playbook on localhost, local processes),
`lab` (deploys to the lab container sglang-lab-1; skipped, with the reason, without it) and `gpu` (tests/gpu, its
own conftest). `./lab test` runs `-m "not lab"` and `-m lab` side by side."""

from __future__ import annotations

import fcntl

import pytest
from lab_host import lab_missing

LAB_LOCK = "/tmp/sglang-lab-1.lock"


def pytest_configure(config):
    config.addinivalue_line("markers", "unit: needs neither the lab container nor a GPU")
    config.addinivalue_line("markers", "lab: deploys to the lab container sglang-lab-1 (./lab setup creates it)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("lab"):
            if lab_missing():
                item.add_marker(pytest.mark.skip(reason=lab_missing()))
        elif not item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="module")
def lab_lock():
    """Hold the lab container for the rest of a module: two test runs deploying to sglang-lab-1 at once fail each
    other, and a module's lab tests build on each other's deploys."""
    with open(LAB_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(autouse=True)
def lab_exclusive(request):
    """Lab tests take the lab lock (from their module's first lab test to its end); the other tests never wait
    for it (the unit lane of ./lab test runs beside the lab lane)."""
    if request.node.get_closest_marker("lab"):
        request.getfixturevalue("lab_lock")
