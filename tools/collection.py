#!/usr/bin/env python3
"""What the standard tools do not do for the collection sglang.deploy (galaxy.yml at the repository's root; build it
with plain `ansible-galaxy collection build`):

    python tools/collection.py test sanity|units  ansible-test on the built collection, installed under build/collection
    python tools/collection.py fragment           rewrite sglang_bench's workload doc fragment from the table

ansible-test wants the collection at ansible_collections/NAMESPACE/NAME in a git repository of its own: `test` builds
the tarball (ansible-galaxy collection build, build_ignore leaving out the rest of the repository), installs it under
build/collection and runs ansible-test there, each test's requirements in a venv of its own (docker-free, --venv).
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "collection"
STAGE = WORK / "ansible_collections" / "sglang" / "deploy"


def _bin(name: str) -> str:
    """A tool of this Python's environment (the venv), else from PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def stage() -> Path:
    """Build the collection with ansible-galaxy and install it fresh into STAGE; return STAGE."""
    if WORK.is_symlink():
        raise SystemExit(f"collection build: {WORK} is a link: the build would empty where it points; remove it")
    shutil.rmtree(WORK, ignore_errors=True)
    dist = WORK / "dist"
    galaxy = [_bin("ansible-galaxy"), "collection"]
    subprocess.run([*galaxy, "build", "--output-path", str(dist)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    (tarball,) = dist.glob("sglang-deploy-*.tar.gz")
    # cwd outside the checkout: its ansible.cfg's collections_path would have the install find sglang.deploy there.
    subprocess.run(
        [*galaxy, "install", "--offline", "--force", "-p", str(WORK), str(tarball)],
        cwd=dist,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return STAGE


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

    sys.path.insert(0, str(REPO / "collections"))  # its sglang/deploy links here (tools/fetch_collections.py)
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
    """ansible-test sanity|units on the built collection, each test's requirements in a venv of its own."""
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

    sys.path.insert(0, str(REPO / "collections"))  # its sglang/deploy links here (tools/fetch_collections.py)
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
    p_test = sub.add_parser("test", help="ansible-test sanity or units on the built collection")
    p_test.add_argument("kind", choices=["sanity", "units"])
    p_test.add_argument("extra", nargs=argparse.REMAINDER, help="more ansible-test arguments")
    sub.add_parser("fragment", help="rewrite plugins/doc_fragments/bench_workload.py from the workload table")
    args = parser.parse_args(argv)
    if args.command == "fragment":
        write_fragment()
    else:
        return ansible_test(args.kind, args.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
