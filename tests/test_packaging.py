"""The project as one wheel: built offline from this tree and installed into a fresh venv, it gives the CLI and the
collection sglang.deploy (ansible_collections.sglang.deploy beside the package), so `sglang-deploy` and
`ansible-playbook sglang.deploy.site` work from a folder outside any checkout (issue 52, item 2). The dependencies
pyproject.toml declares are the ones the package and the plugins import."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from outside import outside_env

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
# What the wheel ships besides the package: the collection, imported by the package and its plugins alike.
SHIPPED = {"sglang_deploy", "ansible_collections"}


def site_of(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3*/site-packages")
    return site


def run(venv: Path, cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """argv as a fresh user in cwd: HOME there, so no sglang.deploy in ~/.ansible/collections (Ansible's first place
    to look, before the Python path) stands in for the wheel's."""
    env = outside_env(venv, **{"HOME": str(cwd), **env})
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_one_install_gives_the_cli_and_the_collection(wheel_venv, tmp_path):
    """From a folder outside the checkout: the command, the package from the venv, and the project paths find is the
    collection the wheel installed."""
    site = site_of(wheel_venv)
    assert run(wheel_venv, tmp_path, "sglang-deploy", "--help").returncode == 0
    where = run(
        wheel_venv,
        tmp_path,
        "python",
        "-c",
        "import sglang_deploy, sglang_deploy.paths as p, ansible_collections.sglang.deploy.plugins.module_utils as m\n"
        "import sglang_deploy.api.runner as r\n"
        "print(sglang_deploy.__file__, p.PROJECT, m.__file__, p.RESULTS, r.RUNNER_DIR, sep='\\n')",
    )
    assert where.returncode == 0, where.stderr
    package, project, host, results, runner = where.stdout.splitlines()
    collection = site / "ansible_collections" / "sglang" / "deploy"
    assert package.startswith(str(site)) and Path(project) == collection and host.startswith(str(collection))
    # A run's files go to the user's folder, not site-packages.
    assert Path(results) == tmp_path / "results" and Path(runner) == tmp_path / ".runner"
    assert not [p for p in collection.rglob("*") if p.is_symlink()]
    for part in ("roles/sglang_server/tasks/main.yml", "playbooks/site.yml", "plugins/modules/sglang_ready.py"):
        assert (collection / part).is_file(), part
    assert not [n for n in ("tests", "src", "results", "molecule", "collections") if (collection / n).exists()]


def test_the_installed_collection_runs_its_playbook(wheel_venv, tmp_path):
    r = run(wheel_venv, tmp_path, "ansible-playbook", "sglang.deploy.site", "--syntax-check", "-i", "localhost,")
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(site_of(wheel_venv) / "ansible_collections" / "sglang" / "deploy" / "playbooks") in r.stdout


def test_the_cli_reads_the_installed_collections_profiles(wheel_venv, tmp_path):
    r = run(wheel_venv, tmp_path, "sglang-deploy", "validate", "nextn")
    assert r.returncode == 0 and "OK: profile nextn" in r.stdout, r.stderr
    # The recorded flag lists are package data.
    data = run(
        wheel_venv, tmp_path, "python", "-c", "from sglang_deploy.launch import flags; print(flags.recorded_releases())"
    )
    assert "0.5.23" in data.stdout, data.stderr


def test_the_wheel_states_the_licence_and_ships_its_text(wheel_venv):
    """Apache-2.0, galaxy.yml's licence, as the wheel's License-Expression, with LICENSE's text beside it."""
    (info,) = site_of(wheel_venv).glob("sglang_deploy-*.dist-info")
    assert "License-Expression: Apache-2.0" in (info / "METADATA").read_text().splitlines()
    assert (info / "licenses" / "LICENSE").read_text() == (REPO / "LICENSE").read_text()


def test_a_home_without_the_project_names_the_fix(wheel_venv, tmp_path):
    r = run(wheel_venv, tmp_path, "sglang-deploy", "validate", "nextn", SGLANG_DEPLOY_HOME=str(tmp_path))
    assert r.returncode == 2 and "SGLANG_DEPLOY_HOME" in r.stderr and "site.yml" in r.stderr


@pytest.mark.parametrize("how", ["SGLANG_DEPLOY_HOME", "a folder inside the checkout"])
def test_a_checkout_comes_before_the_installed_collection(wheel_venv, tmp_path, how):
    where = "import sglang_deploy.paths as p; print(p.PROJECT)"
    if how == "SGLANG_DEPLOY_HOME":
        r = run(wheel_venv, tmp_path, "python", "-c", where, SGLANG_DEPLOY_HOME=str(REPO))
    else:
        r = run(wheel_venv, REPO / "roles" / "sglang_server", "python", "-c", where, HOME=str(tmp_path))
    assert Path(r.stdout.strip()) == REPO, r.stderr


PLAY = """- name: A lookup of the collection, which imports its requirement
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The emulator's files
      ansible.builtin.debug:
        msg: "{{ lookup('sglang.deploy.sglang_emulator_sources', wantlist=True) }}"
"""


def test_the_plain_collection_runs_with_its_declared_requirement(plain_collection, wheel_venv, tmp_path):
    """The tarball plain `ansible-galaxy collection build` makes, installed into a collections path of its own, with
    sglang_deploy from the wheel (requirements.txt's one line): its playbook, not the wheel's copy, passes, and its
    lookup runs with the package."""
    collections = str(plain_collection[1])
    r = run(
        wheel_venv,
        tmp_path,
        "ansible-playbook",
        "sglang.deploy.site",
        "--syntax-check",
        "-i",
        "localhost,",
        ANSIBLE_COLLECTIONS_PATH=collections,
    )
    assert r.returncode == 0 and collections in r.stdout, r.stdout + r.stderr
    (tmp_path / "play.yml").write_text(PLAY)
    r = run(
        wheel_venv,
        tmp_path,
        "ansible-playbook",
        "play.yml",
        "-i",
        "localhost,",
        "-c",
        "local",
        ANSIBLE_COLLECTIONS_PATH=collections,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{collections}/ansible_collections/sglang/deploy/plugins/module_utils/sglang_defaults.py" in r.stdout
    assert f"{site_of(wheel_venv)}/sglang_deploy/emulator/server.py" in r.stdout


def imported_distributions() -> set:
    names = set()
    for path in [*PACKAGE.rglob("*.py"), *(REPO / "plugins").rglob("*.py")]:
        if path.name in HOST_SCRIPTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
    third_party = names - set(sys.stdlib_module_names) - SHIPPED - {"__future__"}
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
