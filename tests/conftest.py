"""Test tiers, one marker each: `unit` (this machine only: Python, ansible-playbook on localhost, local processes),
`lab` (deploys to the lab container sglang-lab-1; skipped, with the reason, without it) and `gpu` (tests/gpu, its
own conftest). `./lab test` runs `-m "not lab"` and `-m lab` side by side."""

from __future__ import annotations

import pytest
from lab_host import lab_missing


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
