"""The package as a wheel: built from this tree, installed apart from the checkout, it finds the project (the
playbooks, roles and group_vars) in the defined places, or says how to point it there. The dependencies
pyproject.toml declares are the ones the package imports."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "sglang_deploy"
# Import name -> distribution name, where they differ.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "ansible": "ansible-core",
    "ansible_runner": "ansible-runner",
    "ruamel": "ruamel.yaml",
}
# Needed without an import from the package: ansible-runner starts ansible-playbook, and the project's plugins
# import ansible.
COMMANDS = {"ansible-core"}
# Host-side programs that run with the stack's Python (SGLang, nvidia-ml-py installed there), not with this package's.
HOST_SCRIPTS = {"check_argv.py", "gpu_exporter.py"}


@pytest.fixture(scope="module")
def wheel_site(tmp_path_factory) -> Path:
    """The wheel of this tree installed into a folder of its own (no dependencies: the venv has them)."""
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    shutil.copytree(PACKAGE, src / "src" / "sglang_deploy", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp / "dist").glob("sglang_deploy-*.whl")
    site = tmp / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True, timeout=300
    )
    return site


def run(site: Path, cwd: Path, *argv: str, home: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SGLANG_DEPLOY_HOME")}
    env["PYTHONPATH"] = str(site)
    if home:
        env["SGLANG_DEPLOY_HOME"] = home
    return subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_wheel_runs_from_its_own_folder(wheel_site, tmp_path):
    where = run(
        wheel_site,
        tmp_path,
        "-c",
        "import sglang_deploy.cli, sglang_deploy.paths as p; print(sglang_deploy.cli.__file__); print(p.PROJECT)",
    )
    lines = where.stdout.splitlines()
    assert lines[0].startswith(str(wheel_site)) and lines[1] == "None", where.stderr
    # The recorded flag lists are package data: `bench` and `--help` need no project.
    data = run(wheel_site, tmp_path, "-c", "from sglang_deploy.launch import flags; print(flags.recorded_releases())")
    assert "0.5.23" in data.stdout, data.stderr
    assert run(wheel_site, tmp_path, "-m", "sglang_deploy.cli", "bench", "--help").returncode == 0


def test_the_wheel_states_the_licence_and_ships_its_text(wheel_site):
    """Apache-2.0, galaxy.yml's licence, as the wheel's License-Expression, with LICENSE's text beside it."""
    (info,) = wheel_site.glob("sglang_deploy-*.dist-info")
    assert "License-Expression: Apache-2.0" in (info / "METADATA").read_text().splitlines()
    assert (info / "licenses" / "LICENSE").read_text() == (REPO / "LICENSE").read_text()


def test_without_a_project_it_names_the_fix(wheel_site, tmp_path):
    r = run(wheel_site, tmp_path, "-m", "sglang_deploy.cli", "validate", "nextn")
    assert r.returncode == 2 and "SGLANG_DEPLOY_HOME" in r.stderr and "site.yml" in r.stderr
    r = run(wheel_site, tmp_path, "-m", "sglang_deploy.cli", "status")
    assert r.returncode == 2 and "project not found" in r.stderr


@pytest.mark.parametrize("how", ["SGLANG_DEPLOY_HOME", "a folder inside the checkout"])
def test_it_finds_the_project(wheel_site, tmp_path, how):
    if how == "SGLANG_DEPLOY_HOME":
        r = run(wheel_site, tmp_path, "-m", "sglang_deploy.cli", "validate", "nextn", home=str(REPO))
    else:
        r = run(wheel_site, REPO / "roles" / "sglang_server", "-m", "sglang_deploy.cli", "validate", "nextn")
    assert r.returncode == 0 and "OK: profile nextn" in r.stdout, r.stderr


def imported_distributions() -> set:
    names = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name in HOST_SCRIPTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    third_party = names - set(sys.stdlib_module_names) - {"sglang_deploy", "__future__"}
    return {DISTRIBUTIONS.get(n, n) for n in third_party}


def test_declared_dependencies_are_the_imported_ones():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    optional = [d for extra, deps in project["optional-dependencies"].items() if extra != "test" for d in deps]
    declared = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() for d in [*project["dependencies"], *optional]}
    assert declared == imported_distributions() | COMMANDS


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    """Modules at most 600 lines (the project's rule): every .py file under src/, plugins/ and tools/."""
    files = {p.resolve() for top in ("src", "plugins", "tools") for p in (REPO / top).rglob("*.py")}
    long = {str(p.relative_to(REPO)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these along a seam: {long}"
