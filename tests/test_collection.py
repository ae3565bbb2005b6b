"""The collection sglang.deploy as tools/collection.py builds it (no lab needed): what the tarball holds, its
changelog, and the execution environment's definition (checked with ansible-builder, which also reads the needs the
installed collection declares). The lab deploy from the installed tarball: tests/test_collection_lab.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from sglang_deploy.paths import REPO


BIN = Path(sys.executable).parent
# Import name -> the distribution requirements.txt names.
DISTRIBUTIONS = {"yaml": "PyYAML", "packaging": "packaging"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, installed collection folder), built into a folder of this test's own."""
    tmp = tmp_path_factory.mktemp("collection")
    env = {**os.environ, "SGLANG_DEPLOY_COLLECTION_BUILD": str(tmp / "build")}
    out = subprocess.run(
        [sys.executable, REPO / "tools" / "collection.py", "install", tmp / "c"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()), tmp / "c"


def test_the_tarball_is_the_collection_without_links_or_the_repository(installed):
    tarball, _ = installed
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert not [n for n, m in members.items() if m.issym() or m.islnk()]
    names = set(members)
    for expected in (
        "meta/runtime.yml",
        "playbooks/site.yml",
        "plugins/modules/sglang_bench.py",
        "plugins/module_utils/bench/workload.py",
        "roles/sglang/defaults/main/profiles.yml",
        "vendor/sglang_deploy/launch/profiles.py",
        "changelogs/changelog.yaml",
        "requirements.txt",
        "bindep.txt",
        "stacks/README.md",
        "roles/sglang_server/files/launch.py",
    ):
        assert expected in names, expected
    assert not [n for n in names if n.startswith(("src/", "results/", "roles/lab/", "tests/output", "collections/"))]
    assert "playbooks/lab.yml" not in names


def test_the_vendored_package_is_what_the_plugins_import_and_its_needs_are_declared(installed):
    """Every module-level third-party import of the vendored package and the plugins is ansible-core's or in
    requirements.txt (an import inside a function, e.g. matplotlib for the CLI's plots, is not reached by the
    plugins), and ansible-builder reads requirements.txt and bindep.txt from the installed collection."""
    _, folder = installed
    root = folder / "ansible_collections" / "sglang" / "deploy"
    third = set()
    for path in [*(root / "vendor").rglob("*.py"), *(root / "plugins").glob("[afl]*/*.py")]:
        body = ast.parse(path.read_text()).body
        for node in body + [n for t in body if isinstance(t, ast.Try) for n in t.body]:
            if isinstance(node, ast.Import):
                third |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                third.add((node.module or "").split(".")[0])
    third -= set(sys.stdlib_module_names) | {"ansible", "ansible_collections", "sglang_deploy", "__future__"}
    required = {
        line.split(">")[0].split("=")[0].strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {DISTRIBUTIONS.get(name, name) for name in third} <= required, third
    out = subprocess.run([BIN / "ansible-builder", "introspect", folder], capture_output=True, text=True, check=True)
    needs = yaml.safe_load(out.stdout[out.stdout.index("---") :])
    # ansible-builder leaves out what ansible-core itself brings (PyYAML).
    assert {r.split()[0].split(">")[0] for r in needs["python"]} == required - {"PyYAML"}
    assert any(r.startswith("openssh-client") for r in needs["system"])


def test_the_execution_environment_installs_the_collection_and_its_needs(installed, tmp_path):
    tarball, _ = installed
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    (source,) = [f["src"] for f in ee["additional_build_files"] if f["src"].endswith(".tar.gz")]
    assert Path(source).name == tarball.name  # the version galaxy.yml builds
    assert ee["dependencies"]["python"] == "requirements.txt" and ee["dependencies"]["system"] == "bindep.txt"
    assert ee["dependencies"]["ansible_core"]["package_pip"].startswith("ansible-core==")
    (REPO / source).parent.mkdir(parents=True, exist_ok=True)
    if not (REPO / source).exists():
        (REPO / source).write_bytes(tarball.read_bytes())
    subprocess.run(
        [BIN / "ansible-builder", "create", "-f", REPO / "execution-environment.yml", "--context", tmp_path / "ctx"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    build = tmp_path / "ctx" / "_build"
    assert (build / "collections" / tarball.name).is_file()
    assert (build / "requirements.txt").read_text() == (REPO / "requirements.txt").read_text()
    assert (build / "bindep.txt").read_text() == (REPO / "bindep.txt").read_text()


def test_the_changelog_lints():
    subprocess.run([BIN / "antsibull-changelog", "lint"], cwd=REPO, check=True)
