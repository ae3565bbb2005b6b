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
found by following their imports), then runs `ansible-galaxy collection build` on that copy. Only files git tracks
are copied; a link that leaves the repository or leads to a file git does not track, and anything that is neither a
regular file nor a folder (a FIFO, a device), stop the build naming the path. The tarball holds no link; `build`
checks it.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import shutil
import stat
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
    "LICENSE",
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


def _refuse(rel: str, why: str) -> SystemExit:
    return SystemExit(f"collection build: {rel} {why}")


def _tracked() -> set:
    """The paths git tracks in REPO (a link as itself): the only files a build copies."""
    try:
        listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise _refuse(str(REPO), f"is no git checkout git can list ({exc}): build from a clone") from exc
    return {os.fsdecode(name) for name in listed.split(b"\0") if name}


# What a path is, for a refusal: anything but a regular file or a folder.
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


def _copy_file(src: Path, rel: str, dest: Path) -> None:
    """Copy the regular file src (rel in the repository) to dest, read without following a link or blocking."""
    before = os.lstat(src)
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(rel, f"is {KINDS.get(stat.S_IFMT(before.st_mode), 'no regular file')}: remove it")
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise _refuse(rel, f"cannot be read ({exc.strerror}): make it readable or remove it") from exc
    with open(fd, "rb") as handle:
        if os.fstat(handle.fileno())[:2] != before[:2]:  # mode and inode: swapped since the look
            raise _refuse(rel, "changed while the build read it: build again")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with dest.open("wb") as out:
            shutil.copyfileobj(handle, out)
    dest.chmod(stat.S_IMODE(before.st_mode))


def _copy(tracked: set, rel: str, dest: str, chain: tuple = ()) -> None:
    """Copy the tracked files at or under REPO/rel into STAGE/dest, links resolved (a link to a folder becomes the
    copy of that folder's tracked files); chain: the folders links led through, against a loop."""
    for entry in sorted(t for t in tracked if t == rel or t.startswith(f"{rel}/")):
        out = dest + entry[len(rel) :]
        if out in LEFT_OUT or any(out.startswith(f"{left}/") for left in LEFT_OUT):
            continue
        try:
            real = (REPO / entry).resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of links, before Python 3.13
            raise _refuse(entry, f"is a link that cannot be followed ({exc}): remove it") from exc
        if not real.is_relative_to(REPO.resolve()):
            raise _refuse(entry, f"leads to {real}, outside the repository: git add what it needs, or remove the link")
        if not os.path.lexists(real):
            continue  # deleted in the work tree
        real_rel = real.relative_to(REPO.resolve()).as_posix()
        if real.is_dir():
            if real in chain or real_rel in tracked:
                raise _refuse(entry, "is a link loop or a git submodule: the collection holds neither")
            _copy(tracked, real_rel, out, (*chain, real))
        elif real_rel not in tracked:
            raise _refuse(entry, f"leads to {real_rel}, which git does not track: git add it or remove the link")
        else:
            _copy_file(real, entry, STAGE / out)


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
    """Every module of sglang_deploy the controller plugins need: their imports followed through the package, with the
    __init__ of each package on the way (the package's data files are vendored whole)."""
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
    return sorted(seen)


# Not plugins of their own: a collection of only these is empty.
HELPERS = {"module_utils", "plugin_utils", "doc_fragments"}


def _check_stage() -> None:
    """galaxy.yml names sglang.deploy (the name the roles, playbooks and plugins call each other by) and the collection
    holds a plugin or a role."""
    import yaml  # noqa: PLC0415

    galaxy = STAGE / "galaxy.yml"
    try:
        meta = yaml.safe_load(galaxy.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise _refuse(
            "galaxy.yml", f"is missing or unreadable ({exc}): git tracks it at the repository's root"
        ) from exc
    names = (meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) else (None, None)
    if names != ("sglang", "deploy"):
        raise _refuse("galaxy.yml", f"names the collection {names[0]}.{names[1]}: set namespace: sglang, name: deploy")
    plugins = [p for p in STAGE.glob("plugins/*/*") if p.parent.name not in HELPERS]
    if not plugins and not any(STAGE.glob("roles/*/*/*")):
        raise _refuse(str(REPO), "holds no plugin or role git tracks: git add them (a build copies tracked files only)")


def stage() -> Path:
    """Write the collection's files into STAGE (fresh); return it."""
    shutil.rmtree(WORK / "ansible_collections", ignore_errors=True)
    STAGE.mkdir(parents=True)
    tracked = _tracked()
    for rel in COLLECTION:
        _copy(tracked, rel, rel)
    vendor = f"{VENDOR}/sglang_deploy"
    for path in vendored_files():
        rel = path.relative_to(REPO).as_posix()
        _copy(tracked, rel, f"{vendor}/{path.relative_to(PACKAGE).as_posix()}")
    data = (PACKAGE / "data").relative_to(REPO).as_posix()
    _copy(tracked, data, f"{vendor}/data")
    links = [p for p in STAGE.rglob("*") if p.is_symlink()]
    if links:
        raise SystemExit(f"the staged collection holds links: {links[:5]}")
    _check_stage()
    return STAGE


def build() -> Path:
    """Stage and build; the tarball's path. Fails when the tarball holds a link."""
    stage()
    dist = WORK / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(
        [_bin("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dist)],
        cwd=STAGE,
        stdout=subprocess.DEVNULL,
    )
    if built.returncode:
        raise SystemExit(f"ansible-galaxy collection build failed (rc {built.returncode}): its message is above")
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
# asked for. The settings may hold an index's credentials: the stand-in and each pip.conf are 0600, written by the
# package's write_file (its source goes into the stand-in).
GET_PIP_MARK = "# sglang-deploy: get-pip stand-in"
GET_PIP = """{mark}
import ensurepip, os, subprocess, sys, tempfile
{write_file}
write_file({conf!r}, os.path.join(sys.prefix, "pip.conf"))
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

    sys.path.insert(0, str(REPO / "src"))
    from sglang_deploy.host.files import write_file  # noqa: PLC0415

    class _Python:  # get_venv_packages reads only the version
        version = f"{sys.version_info.major}.{sys.version_info.minor}"

    version = get_venv_packages(_Python())["pip"]
    cache = Path.home() / ".ansible" / "test" / "cache" / f"get_pip_{version.replace('.', '_')}.py"
    if cache.exists() and not cache.read_text().startswith(GET_PIP_MARK):
        return  # a real get-pip.py, downloaded where it could be
    write_file(
        GET_PIP.format(mark=GET_PIP_MARK, write_file=inspect.getsource(write_file), conf=_pip_conf()), str(cache)
    )


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
