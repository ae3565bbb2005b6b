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
found by following their imports), then runs `ansible-galaxy collection build` on that copy. A build reads git's
index, never the work tree: each tracked file's content is its blob (`git cat-file`), each link the target git
records for it (mode 120000), so a work-tree file swapped for a hard link, a sparse file or a FIFO ships what git
holds (the files that differ are named). A link that leaves the repository or leads to what git does not track, a
submodule, and a collection over MAX_BYTES stop the build naming the path. The tarball holds no link; `build` checks
it.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

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


def _outside(rel: str, where: str) -> SystemExit:
    return _refuse(rel, f"leads to {where}, outside the repository: git add what it needs, or remove the link")


# At most this much is written into the stage: a build is a few MiB.
MAX_BYTES = 64 * 1024 * 1024
LINK, SUBMODULE = "120000", "160000"


class Index:
    """What git's index records in REPO: each tracked path's mode and blob, and the blobs' contents (read from git,
    never from the work tree). Counts the bytes written into the stage against MAX_BYTES."""

    def __init__(self) -> None:
        self.entries: dict = {}  # path -> (mode, blob id)
        try:
            listed = subprocess.run(["git", "-C", REPO, "ls-files", "-s", "-z"], capture_output=True, check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise _refuse(str(REPO), f"is no git checkout git can list ({exc}): build from a clone") from exc
        for line in listed.stdout.split(b"\0"):
            if line:
                meta, _tab, name = line.partition(b"\t")
                mode, blob, merge_stage = meta.decode().split()
                if merge_stage != "0":
                    raise _refuse(os.fsdecode(name), "is in a merge conflict: resolve it, then build")
                self.entries[os.fsdecode(name)] = (mode, blob)
        self.folders = {p.as_posix() for name in self.entries for p in PurePosixPath(name).parents}
        self.written = 0
        self.shipped: set = set()  # the tracked files, and links followed, that the stage holds
        self._cache: dict = {}
        self._cat = subprocess.Popen(
            ["git", "-C", REPO, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def close(self) -> None:
        self._cat.kill()
        self._cat.wait()

    def _check(self, rel: str, size: int) -> None:
        """Refuse size bytes more of rel when they take the stage over MAX_BYTES."""
        if self.written + size > MAX_BYTES:
            raise _refuse(rel, f"would take the collection over MAX_BYTES ({MAX_BYTES} bytes): git rm it")

    def blob(self, rel: str) -> bytes:
        """The content git records for rel; one over what is left of MAX_BYTES is refused before it is read."""
        oid = self.entries[rel][1]
        if oid not in self._cache:
            self._cat.stdin.write(oid.encode() + b"\n")
            self._cat.stdin.flush()
            size = int(self._cat.stdout.readline().split()[2])
            self._check(rel, size)
            self._cache[oid] = self._cat.stdout.read(size + 1)[:-1]  # the content, then a newline
        return self._cache[oid]

    def resolve(self, rel: str) -> str:
        """rel with each link on its way replaced by the target git records for it (mode 120000: the link's text),
        as the kernel would follow it; refused when it leaves the repository or loops."""
        done: list = []
        todo = rel.split("/")
        hops = 0
        while todo:
            part = todo.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if not done:
                    raise _outside(rel, os.path.normpath(REPO / "/".join(["..", *todo])))
                done.pop()
                continue
            here = "/".join([*done, part])
            if self.entries.get(here, ("",))[0] != LINK:
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                raise _refuse(rel, "is a link that cannot be followed (a loop of links): remove it")
            target = os.fsdecode(self.blob(here))
            self.shipped.add(here)
            if target.startswith("/"):
                raise _outside(rel, target)
            todo = [*target.split("/"), *todo]
        return "/".join(done)

    def follow(self, rel: str) -> str:
        """The tracked file or folder rel is or leads to; a submodule, or a link to what git does not track, is
        refused."""
        real = self.resolve(rel)
        mode = self.entries.get(real, ("",))[0]
        if mode == SUBMODULE:
            raise _refuse(rel, "is a link loop or a git submodule: the collection holds neither")
        if not mode and real not in self.folders:
            raise _refuse(rel, f"leads to {real}, which git does not track: git add it or remove the link")
        return real

    def write(self, rel: str, dest: Path) -> None:
        """The regular file rel as git records it, written to dest (mode 0755 or 0644, as git keeps it)."""
        content = self.blob(rel)
        self._check(rel, len(content))
        self.written += len(content)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
        dest.chmod(0o755 if self.entries[rel][0] == "100755" else 0o644)
        self.shipped.add(rel)


def _copy(index: Index, rel: str, dest: str, chain: tuple = ()) -> None:
    """Copy the tracked files at or under rel into STAGE/dest as git records them, links resolved (a link to a folder
    becomes the copy of that folder's tracked files); chain: the folders links led through, against a loop."""
    for entry in sorted(t for t in index.entries if t == rel or t.startswith(f"{rel}/")):
        out = dest + entry[len(rel) :]
        if out in LEFT_OUT or any(out.startswith(f"{left}/") for left in LEFT_OUT):
            continue
        real = index.follow(entry)
        if real in chain:
            raise _refuse(entry, "is a link loop or a git submodule: the collection holds neither")
        if real in index.folders:
            _copy(index, real, out, (*chain, real))
        else:
            index.write(real, STAGE / out)


def _module_file(index: Index, name: str) -> str | None:
    """The tracked source file of sglang_deploy.a.b (a module or a package's __init__), None if there is none."""
    package = PACKAGE.relative_to(REPO).as_posix()
    parts = name.split(".")[1:]
    candidates = [f"{package}/{'/'.join(parts)}/__init__.py", f"{package}/{'/'.join(parts)}.py"]
    return next((c for c in candidates if c in index.entries), None) if parts else f"{package}/__init__.py"


def _imports(index: Index, rel: str) -> set:
    """The sglang_deploy modules a tracked file imports (absolute or relative), as dotted names."""
    package = []  # the package a relative import starts from: the file's folder (an __init__'s too)
    path, root = PurePosixPath(rel), PurePosixPath(PACKAGE.relative_to(REPO).as_posix())
    if path.is_relative_to(root):
        package = ["sglang_deploy", *path.relative_to(root).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(index.blob(index.follow(rel)).decode("utf-8"))):
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


def vendored_files(index: Index) -> list:
    """Every module of sglang_deploy the controller plugins need (paths in the repository): their imports followed
    through the package, with the __init__ of each package on the way (the package's data files are vendored whole)."""
    todo = sorted(r for r in index.entries if str(PurePosixPath(r).parent) in PLUGIN_FOLDERS and r.endswith(".py"))
    seen: set = set()
    while todo:
        for name in _imports(index, todo.pop()):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(index, ".".join(parts[:i]))
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


def check_work() -> None:
    """Refuse a work folder that is a link, or has a link or a tracked file on its way: the build empties it."""
    for path in (WORK.parent, WORK, WORK / "ansible_collections"):
        if path.is_symlink():
            raise _refuse(str(path), "is a link: the build would empty and write where it points; remove it")
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--", str(WORK)], capture_output=True, text=True, check=False
    ).stdout
    if tracked.strip():
        raise _refuse(str(WORK), "holds files git tracks: the build empties it; untrack them (git rm --cached)")


def stage() -> Path:
    """Write the collection's files into STAGE (fresh) from git's index, never the work tree; return it. Names, on
    stderr, the files it ships whose work-tree copy differs from the index (git add them to ship them)."""
    check_work()
    shutil.rmtree(WORK / "ansible_collections", ignore_errors=True)
    STAGE.mkdir(parents=True)
    index = Index()
    try:
        for rel in COLLECTION:
            _copy(index, rel, rel)
        package = PACKAGE.relative_to(REPO).as_posix()
        vendor = f"{VENDOR}/sglang_deploy"
        for rel in vendored_files(index):
            _copy(index, rel, f"{vendor}/{rel[len(package) + 1 :]}")
        _copy(index, f"{package}/data", f"{vendor}/data")
    finally:
        index.close()
    _check_stage()
    changed = subprocess.run(
        ["git", "--no-optional-locks", "-C", REPO, "diff", "--name-only", "-z"], capture_output=True
    ).stdout
    differ = sorted(index.shipped & {os.fsdecode(n) for n in changed.split(b"\0") if n})
    if differ:
        print(
            f"collection build: shipped as git's index holds them, not as the work tree does: {', '.join(differ)}"
            " (git add them to ship your changes)",
            file=sys.stderr,
        )
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
    from ansible_collections.sglang.deploy.plugins.module_utils.files import write_file  # noqa: PLC0415

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
    from ansible_collections.sglang.deploy.plugins.module_utils.bench.workload import ansible_options  # noqa: PLC0415

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
