"""pip against uv building one locked stack venv from the same local wheelhouse, on this machine.

    python benchmarks/stack_install.py --bundle stable-0.5.23-2026-11-30 --wheelhouse /var/tmp/sglang-wheelhouse \
        --work /var/tmp/sglang-bench-venvs [--python python3.11]

Run `sglang-deploy stack fetch BUNDLE --wheelhouse DIR` first. Each installer gets a fresh venv and the same
hash-checked offline install the sglang_stack role runs (stack.install_argv: no index, no dependency resolution,
--require-hashes); the venv is deleted after each run. pip compiles bytecode by default and the role asks uv to
(--compile-bytecode: the service account cannot write __pycache__ in the venv); uv is also timed without it.
Prints wall time, CPU time (children) and the venv's size per run. The stable stack writes about 11 GB: run it on
a quiet machine (the installers run under nice).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]  # the package; the collection (its link)

from sglang_deploy.locks import stack_files, stack_lock  # noqa: E402
from ansible_collections.sglang.deploy.plugins.module_utils import stack, wheel_fetch  # noqa: E402
from sglang_deploy.paths import STACKS  # noqa: E402


def du(path: Path) -> int:
    return int(subprocess.run(["du", "-sb", str(path)], check=True, capture_output=True, text=True).stdout.split()[0])


def run(label: str, argv: list[str], venv: Path, python: str) -> dict:
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run(["sync"], check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(
        ["nice", "-n", "10", *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **stack.INSTALL_ENV},
    )
    subprocess.run(["sync"], check=True)  # the data on disk is part of the cost
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = du(venv)
    shutil.rmtree(venv)
    return {"installer": label, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "venv_gb": round(size / 1e9, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a locked bundle in stacks/")
    parser.add_argument("--wheelhouse", type=Path, default=stack_files.default_wheelhouse())
    parser.add_argument("--work", type=Path, default=Path("/var/tmp/sglang-bench-venvs"))
    parser.add_argument("--python", default="", help="interpreter for the venvs (default python<bundle python>)")
    args = parser.parse_args()

    bundle = yaml.safe_load((STACKS / f"{args.bundle}.yml").read_text())
    lock = stack_files.load_lock(bundle, STACKS)
    problems = wheel_fetch.wheelhouse_problems(str(args.wheelhouse), lock["packages"])
    if problems:
        sys.exit(f"wheelhouse does not match the lock: {problems[:3]} (run sglang-deploy stack fetch {args.bundle})")
    python = args.python or f"python{bundle['python']}"
    args.work.mkdir(parents=True, exist_ok=True)
    requirements = args.work / "requirements.txt"
    requirements.write_text(stack.requirements_text(lock, str(args.wheelhouse.resolve())))
    venv = args.work / "venv"
    uv = stack_lock.uv_binary()
    size = sum((args.wheelhouse / entry["file"]).stat().st_size for entry in lock["packages"])
    print(
        f"bundle {args.bundle}: {len(lock['packages'])} wheels, {size / 1e9:.2f} GB; {os.cpu_count()} CPUs; "
        f"uv {stack_lock.uv_version(uv)}; pip of {python}"
    )
    runs = [
        ("pip", stack.install_argv("pip", str(venv), str(requirements))),
        ("uv", stack.install_argv("uv", str(venv), str(requirements), uv)),
        (
            "uv, no bytecode",
            [arg for arg in stack.install_argv("uv", str(venv), str(requirements), uv) if arg != "--compile-bytecode"],
        ),
    ]
    print(f"{'installer':24} {'wall s':>8} {'cpu s':>8} {'venv GB':>8}")
    for label, argv in runs:
        result = run(label, argv, venv, python)
        print(
            f"{result['installer']:24} {result['wall_s']:8.1f} {result['cpu_s']:8.1f} {result['venv_gb']:8.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
