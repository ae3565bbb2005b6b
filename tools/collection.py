#!/usr/bin/env python3
"""Build, install and test the Ansible collection sglang.deploy from this repository.

    python tools/collection.py build              stage the collection, build its tarball: build/collection/*.tar.gz
    python tools/collection.py install DIR        build, then ansible-galaxy collection install it into DIR
    python tools/collection.py test sanity|units  build the stage, run ansible-test there (docker-free, --venv)
    python tools/collection.py fragment           rewrite sglang_bench's workload doc fragment from the table

The repository is the collection's source (galaxy.yml at its root) but holds more than the collection (tests, results,
the Python CLI) and links (plugins/module_utils -> the host package, roles' files/ -> host programs). `build` copies
what the collection is made of (COLLECTION) into build/collection/ansible_collections/sglang/deploy with every link
resolved, vendors the part of the sglang_deploy package the controller plugins import (vendor/ at the collection's root,
found by following their imports), then runs `ansible-galaxy collection build` on that copy. The tarball holds no
link; `build` checks it.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "sglang_deploy"
# SGLANG_DEPLOY_COLLECTION_BUILD: another work folder (a test builds beside a sanity run of the default one).
WORK = Path(os.environ.get("SGLANG_DEPLOY_COLLECTION_BUILD") or REPO / "build" / "collection")
STAGE = WORK / "ansible_collections" / "sglang" / "deploy"
# What the collection is made of, relative to the repository root. Left out: the lab role and playbook (the test
# bench of this repository), playbooks/group_vars (a link to the repository's group_vars: users bring their own).
COLLECTION = [
    "galaxy.yml",
    "meta",
    "README.md",
    "CHANGELOG.md",
    "changelogs/changelog.yaml",
    "changelogs/config.yaml",
    "changelogs/fragments",
    "requirements.txt",
    "bindep.txt",
    "plugins",
    "roles",
    "playbooks",
    "stacks",
    "docs",
    "tests/unit",
    "tests/sanity",
]
LEFT_OUT = {"roles/lab", "playbooks/lab.yml", "playbooks/group_vars"}
# The controller plugins: what they import from sglang_deploy is vendored.
PLUGIN_FOLDERS = ["plugins/action", "plugins/filter", "plugins/lookup"]
# Outside plugins/: ansible-test imports every file under plugins/ with ansible-core alone installed.
VENDOR = Path("vendor")


def _bin(name: str) -> str:
    """A tool of this Python's environment (the venv), else from PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def _ignored(rel: str) -> bool:
    parts = rel.split("/")
    return rel in LEFT_OUT or "__pycache__" in parts or rel.endswith(".pyc")


def _copy(rel: str) -> None:
    """Copy REPO/rel into the stage, links resolved (a link to a folder becomes that folder's copy)."""
    src = REPO / rel
    if _ignored(rel) or not (src.exists()):
        return
    dest = STAGE / rel
    if src.is_dir():
        for child in sorted(src.iterdir()):
            _copy(f"{rel}/{child.name}")
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        shutil.copymode(src, dest)


def _module_file(name: str) -> Path | None:
    """The source file of sglang_deploy.a.b (a module or a package's __init__), None if there is none."""
    parts = name.split(".")[1:]
    if not parts:
        return PACKAGE / "__init__.py"
    for candidate in (PACKAGE.joinpath(*parts, "__init__.py"), PACKAGE.joinpath(*parts[:-1], parts[-1] + ".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> set:
    """The sglang_deploy modules a file imports (absolute or relative), as dotted names."""
    package = []  # the package a relative import starts from: the file's folder (an __init__'s too)
    if path.resolve().is_relative_to(PACKAGE.resolve()):
        package = ["sglang_deploy", *path.resolve().relative_to(PACKAGE.resolve()).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "sglang_deploy")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if base.split(".")[0] != "sglang_deploy":
                continue
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    return names


def vendored_files() -> list:
    """Every file of sglang_deploy the controller plugins need: their imports followed through the package, with the
    __init__ of each package on the way, and the package's data files."""
    todo = [p for folder in PLUGIN_FOLDERS for p in sorted((REPO / folder).glob("*.py"))]
    seen: set = set()
    while todo:
        for name in _imports(todo.pop()):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(".".join(parts[:i]))
                if found and found not in seen:
                    seen.add(found)
                    todo.append(found)
    data = [p for p in (PACKAGE / "data").glob("*") if p.is_file()]
    return sorted(seen | set(data))


def stage() -> Path:
    """Write the collection's files into STAGE (fresh); return it."""
    shutil.rmtree(WORK / "ansible_collections", ignore_errors=True)
    STAGE.mkdir(parents=True)
    for rel in COLLECTION:
        _copy(rel)
    for path in vendored_files():
        dest = STAGE / VENDOR / "sglang_deploy" / path.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    links = [p for p in STAGE.rglob("*") if p.is_symlink()]
    if links:
        raise SystemExit(f"the staged collection holds links: {links[:5]}")
    return STAGE


def build() -> Path:
    """Stage and build; the tarball's path. Fails when the tarball holds a link."""
    stage()
    dist = WORK / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [_bin("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dist)],
        cwd=STAGE,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (tarball,) = sorted(dist.glob("sglang-deploy-*.tar.gz"), key=lambda p: p.stat().st_mtime)[-1:]
    with tarfile.open(tarball) as tar:
        links = [m.name for m in tar.getmembers() if m.issym() or m.islnk()]
    if links:
        raise SystemExit(f"{tarball} holds links: {links[:5]}")
    return tarball


def install(dest: Path) -> Path:
    """Build, then install the tarball into the collections folder dest (as `ansible-galaxy collection install
    -p dest` does: dest/ansible_collections/sglang/deploy)."""
    tarball = build()
    subprocess.run(
        [_bin("ansible-galaxy"), "collection", "install", "--force", "--offline", "-p", str(dest), str(tarball)],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(dest)},
    )
    return tarball


# ansible-test bootstraps pip in each venv with get-pip.py from ci-files.testing.ansible.com, and runs pip there with
# an environment stripped to PATH and HOME. Where only a package index is reachable (through a proxy with its own CA,
# set in pip's environment), a stand-in in ansible-test's cache takes pip from ensurepip, writes this machine's pip
# settings into the venv's own pip.conf (so every later pip of that venv uses them), then installs what it was
# asked for.
GET_PIP_MARK = "# sglang-deploy: get-pip stand-in"
GET_PIP = """{mark}
import ensurepip, os, pathlib, subprocess, sys
pathlib.Path(sys.prefix, "pip.conf").write_text({conf!r})
ensurepip.bootstrap(upgrade=True)
os.environ.pop("PIP_CONFIG_FILE", None)  # ensurepip set it to os.devnull
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
"""


def _pip_conf() -> str:
    """This machine's pip settings (files and PIP_* variables) as one pip.conf."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    settings = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        settings[key.split(".", 1)[-1]] = value.strip().strip("'")
    return "[global]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(settings.items()))


def _get_pip_stand_in() -> None:
    from ansible_test._internal.python_requirements import get_venv_packages  # noqa: PLC0415

    class _Python:  # get_venv_packages reads only the version
        version = f"{sys.version_info.major}.{sys.version_info.minor}"

    version = get_venv_packages(_Python())["pip"]
    cache = Path.home() / ".ansible" / "test" / "cache" / f"get_pip_{version.replace('.', '_')}.py"
    if cache.exists() and not cache.read_text().startswith(GET_PIP_MARK):
        return  # a real get-pip.py, downloaded where it could be
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(GET_PIP.format(mark=GET_PIP_MARK, conf=_pip_conf()))


def ansible_test(kind: str, extra: list) -> int:
    """ansible-test sanity|units on the staged collection, each test's requirements in a venv of its own."""
    stage()
    # ansible-test lists the files through git: the stage is in this repository's ignored build/, so it gets a
    # repository of its own.
    subprocess.run(["git", "init", "-q", str(STAGE)], check=True)
    (STAGE / ".gitignore").write_text("/tests/output/\n")
    _get_pip_stand_in()
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    cmd = [_bin("ansible-test"), kind, "--venv", "--python", python, "--color", "no", *extra]
    return subprocess.run(cmd, cwd=STAGE).returncode


FRAGMENT = REPO / "plugins" / "doc_fragments" / "bench_workload.py"


def write_fragment() -> None:
    """Rewrite the sglang_bench module's `workload` documentation fragment from the table of the settings (a
    literal: ansible-test reads it without running it)."""
    import yaml  # noqa: PLC0415

    sys.path.insert(0, str(REPO / "src"))
    from sglang_deploy.host.bench.workload import ansible_options  # noqa: PLC0415

    workload = {
        "description": "The workload, by bench_serving's names; a setting left out takes its default.",
        "type": "dict",
        "default": {},
        "suboptions": ansible_options(documented=True),
    }
    head, _sep, _old = FRAGMENT.read_text().partition('    DOCUMENTATION = r"""\n')
    body = yaml.safe_dump({"options": {"workload": workload}}, sort_keys=False, width=110)
    FRAGMENT.write_text(f'{head}{_sep}{body}"""\n')


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="stage the collection and build its tarball (build/collection/dist)")
    p_install = sub.add_parser("install", help="build, then install the tarball into a collections folder")
    p_install.add_argument("dest", type=Path, help="collections folder (gets ansible_collections/sglang/deploy)")
    p_test = sub.add_parser("test", help="ansible-test sanity or units on the staged collection")
    p_test.add_argument("kind", choices=["sanity", "units"])
    p_test.add_argument("extra", nargs=argparse.REMAINDER, help="more ansible-test arguments")
    sub.add_parser("fragment", help="rewrite plugins/doc_fragments/bench_workload.py from the workload table")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build())
    elif args.command == "fragment":
        write_fragment()
    elif args.command == "install":
        print(install(args.dest))
    else:
        return ansible_test(args.kind, args.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
