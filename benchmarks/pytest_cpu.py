#!/usr/bin/env python3
"""What each test costs in CPU: a pytest plugin that writes one JSON line a test, and a summary of such files.

CI's time on 2 cores is set by the CPU all its parts need together (benchmarks/ci_cpu.py says which part); this says
which tests inside a pytest part spend it: the test process with the processes it waited for (ansible-playbook and its
workers, ansible-runner, the CLI) and the lab container its lane deploys to (tests/lab_host.py), in CPU seconds.

    pytest -p pytest_cpu -m lab        # appends to pytest-cpu.jsonl (PYTEST_CPU_OUT names another file)
    python3 benchmarks/pytest_cpu.py pytest-cpu.jsonl [--top 25]    # a test found twice counts by its newest row

As root, for the container's figure (Docker's cgroup in the unified hierarchy; without it, 0). A process the test
started but did not wait for (a server left running) is not counted, nor the pytest process's own start and
collection; the machine's busy time is, for reference.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import resource
import subprocess
import time
from pathlib import Path

import pytest
from ci_cpu import busy_s, container_folders, unified_root, usage_s


def _own_s() -> float:
    return sum(
        r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )


@functools.cache
def _cgroup(name: str) -> Path | None:
    """The cgroup folder of container ``name``, looked up once (a `docker inspect` is CPU of its own)."""
    try:
        run = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, timeout=30)
        root = unified_root()
    except (OSError, subprocess.TimeoutExpired, SystemExit):  # no docker, no cgroup v2 hierarchy
        return None
    cid = run.stdout.strip()
    return next((f for f in container_folders(root, cid) if usage_s(f) is not None), None) if cid else None


def _container_s(name: str) -> float:
    """CPU seconds container ``name`` has used; 0 where it cannot be read."""
    folder = _cgroup(name)
    return (usage_s(folder) or 0.0) if folder else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    from lab_host import LAB_HOST  # tests/ is on the path once its conftest is loaded

    box = _container_s(LAB_HOST)  # first: its one `docker inspect` is no test's
    own, busy, wall = _own_s(), busy_s(), time.monotonic()
    yield
    row = {
        "test": item.nodeid,
        "process_s": round(_own_s() - own, 2),
        "container_s": round(_container_s(LAB_HOST) - box, 2),
        "machine_s": round(busy_s() - busy, 2),
        "wall_s": round(time.monotonic() - wall, 2),
    }
    with open(os.environ.get("PYTEST_CPU_OUT", "pytest-cpu.jsonl"), "a") as out:
        out.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25, help="the costliest tests to list (default 25)")
    args = parser.parse_args(argv)
    # The plugin appends (two lanes may write one file): a test run again counts once, by its newest row.
    newest = {}
    for f in args.files:
        for line in f.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                newest[row["test"]] = row
    rows = list(newest.values())
    cost = {r["test"]: r["process_s"] + r["container_s"] for r in rows}
    by_file = collections.Counter()
    for test, s in cost.items():
        by_file[test.partition("::")[0]] += s
    print(f"{len(rows)} tests, {sum(cost.values()):.1f} CPU s (test processes + lab container)")
    print("\nby file (CPU s):")
    for name, s in by_file.most_common(args.top):
        print(f"{s:8.1f}  {name}")
    print("\nthe costliest tests (CPU s: process + container, wall s):")
    for r in sorted(rows, key=lambda r: -cost[r["test"]])[: args.top]:
        print(f"{r['process_s']:7.1f} +{r['container_s']:6.1f}  {r['wall_s']:7.1f}  {r['test']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
