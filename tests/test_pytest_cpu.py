"""benchmarks/pytest_cpu.py: a row per test with the CPU its processes took, and the summary of such rows."""

from __future__ import annotations

import json

import pytest_cpu

pytest_plugins = ["pytester"]


def test_each_test_gets_a_row_with_the_cpu_of_its_processes_and_of_the_lab_container(pytester, monkeypatch):
    out = pytester.path / "cpu.jsonl"
    monkeypatch.setenv("PYTEST_CPU_OUT", str(out))
    # the lab container's CPU s at each test's start and end: 2.5 used during the first test, none in the second
    readings = iter([10.0, 12.5, 12.5, 12.5])
    monkeypatch.setattr(pytest_cpu, "_container_s", lambda name: next(readings))
    pytester.makepyfile(
        """
        import subprocess, sys

        def test_busy():
            subprocess.run([sys.executable, "-c", "sum(range(10**7))"], check=True)

        def test_idle():
            pass
        """
    )
    pytester.runpytest_inprocess("-p", "pytest_cpu").assert_outcomes(passed=2)
    busy, idle = map(json.loads, out.read_text().splitlines())
    assert [busy["test"].split("::")[1], idle["test"].split("::")[1]] == ["test_busy", "test_idle"]
    assert set(busy) == {"test", "process_s", "container_s", "machine_s", "wall_s"}
    assert busy["process_s"] >= 0.1 > 0.05 >= idle["process_s"]  # the child's 10 million additions; pytest's own
    assert (busy["container_s"], idle["container_s"]) == (2.5, 0.0)
    assert busy["machine_s"] >= busy["process_s"] - 0.05  # the machine's busy time holds the test's own


def test_the_summary_ranks_files_and_tests_by_process_and_container_cpu(tmp_path, capsys):
    rows = [
        {"test": "tests/a.py::one", "process_s": 1.0, "container_s": 5.0, "machine_s": 7, "wall_s": 9},
        {"test": "tests/a.py::two", "process_s": 2.0, "container_s": 0.0, "machine_s": 2, "wall_s": 2},
        {"test": "tests/b.py::three", "process_s": 7.0, "container_s": 0.0, "machine_s": 7, "wall_s": 7},
    ]
    f = tmp_path / "cpu.jsonl"
    old = {**rows[2], "process_s": 50.0}  # an earlier run of the same test: the newest row counts
    f.write_text("".join(json.dumps(r) + "\n" for r in [old, *rows]))
    assert pytest_cpu.main([str(f), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("3 tests, 15.0 CPU s")
    by_file, tests = text.split("by file (CPU s):")[1].split("the costliest tests")
    assert [line.split()[1] for line in by_file.strip().splitlines()] == ["tests/a.py", "tests/b.py"]
    assert [line.split()[-1] for line in tests.strip().splitlines()[1:]] == ["tests/b.py::three", "tests/a.py::one"]
