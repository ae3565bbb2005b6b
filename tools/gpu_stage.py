#!/usr/bin/env python3
"""Stage real SGLang 0.5.16 on an offline GPU host that already has Python 3.12 and torch 2.11.0.

Steps (each a sub-command; stdlib only):

    python tools/gpu_stage.py download WORK       # on a networked machine: wheels into WORK/whl (pip download)
    python tools/gpu_stage.py pack WORK PARTS     # tar WORK/whl, sha256, split into 50,000,000-byte parts
    python tools/gpu_stage.py plan PARTS          # the transfer plan: per part, the paths to carry and a command
    python tools/gpu_stage.py install STAGE SITE  # on the GPU host: join STAGE/part*, check, pip install to SITE, byte-compile

then `export PYTHONPATH=SITE` (sglang 0.5.16 pins torch==2.11.0, the host's own torch, so the torch stack is
not carried). Measured 2026-11-30 (H200 machine, 64 MiB per transfer): the wheel set is 76 files, 514 MiB
(sglang-kernel 0.4.5 alone 383 MB); `download` took 15-37 s on the networked machine, `pack` 6 s; 9 parts (see
`plan`). On nvidia-h200-x2 a fresh machine took about 30 s to start, each part's transfer call about 4 s back to
back (9 parts: about 40 s), `install` 15 s; the whole staging about 1.5 minutes of machine time. Measured again
2026-12-01 on nvidia-h200 (twice): `pack` 4.5 s, first call with the start 35 s, each part 4.5 s, `install` 14-16 s.

PARTS must be inside the checkout (a transfer carries only its working tree) and git-ignored (else every part
travels with every call): build/gpu-parts is. `plan` refuses anything else and names the fix.

The set is sglang's runtime needs that the host's image lacks, all installed with --no-deps (the image's
torch, triton, numpy, flashinfer's CUDA libraries stay). tokenizers 0.22.2 is pinned because transformers
5.12.1 (sglang 0.5.16's pin) refuses the image's tokenizers 0.23.2.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tarfile
from pathlib import Path

# The parts are cut and joined by tools/gpu_boot.py's split and join (checked against the whole's sha256).
_spec = importlib.util.spec_from_file_location("gpu_boot", Path(__file__).resolve().parent / "gpu_boot.py")
gpu_boot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_boot)

PART_BYTES = gpu_boot.PART_BYTES  # a transfer carries 64 MiB with the working tree: leave room for it
PLATFORMS = (
    "manylinux_2_34_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)

WHEELS = (
    # sglang and its pinned kernels
    "sglang==0.5.16",
    "sglang-kernel==0.4.5",
    "flashinfer-python==0.6.14",
    "apache-tvm-ffi==0.1.11",
    "nvidia-cudnn-frontend==1.32.0",
    "sgl-deep-gemm==0.1.4.post1",
    "torchao==0.17.0",
    "torch_memory_saver==0.0.10",
    "quack-kernels==0.6.5",
    "xgrammar==0.2.1",
    "llguidance==1.6.1",
    "outlines==0.1.11",
    # tokenizer / model config
    "transformers==5.12.1",
    "tokenizers==0.22.2",
    "compressed-tensors==0.20.1",
    "gguf==0.19.0",
    "mistral_common==1.13.1",
    "datasets==5.2.0",
    "dill==0.4.1",
    "multiprocess==0.70.19",
    # HTTP server and API
    "fastapi==0.165.0",
    "starlette==1.10.0",
    "uvicorn==0.54.0",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "sniffio==1.3.1",
    "python-multipart==0.0.34",
    "watchfiles==1.3.0",
    "openai==2.6.1",
    "jiter==0.19.0",
    "openai-harmony==0.0.4",
    "anthropic==2.14.0",
    "docstring-parser==0.18.0",
    "distro==1.9.0",
    "smg-grpc-servicer==0.14.1",
    # IPC, serialization, utilities
    "pyzmq==27.3.0",
    "orjson==3.13.0",
    "msgspec==0.23.0",
    "setproctitle==1.3.8",
    "partial_json_parser==0.2.1.1.post7",
    "pybase64==1.5.1",
    "interegular==0.3.3",
    "loguru==0.7.3",
    "blobfile==3.0.0",
    "pycryptodomex==3.24.2",
    "zstandard==0.25.0",
    "easydict==1.14",
    "frozendict==2.5.1",
    # imported at top level by sglang modules
    "soundfile==0.13.1",
    "cffi==2.1.1",
    "pycparser==3.12",
    "ipython==9.18.1",
    "asttokens==3.0.2",
    "decorator==5.3.1",
    "executing==2.3.0",
    "jedi==0.20.1",
    "parso==0.8.7",
    "matplotlib-inline==0.2.2",
    "pexpect==4.9.0",
    "ptyprocess==0.7.0",
    "prompt_toolkit==3.0.53",
    "pure_eval==0.2.4",
    "stack_data==0.6.3",
    "traitlets==5.16.1",
    "wcwidth==0.9.4",
    "ipython-pygments-lexers==1.1.1",
    "opentelemetry-api==1.45.2",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-semantic-conventions==0.66b2",
    "importlib-metadata==10.2.0",
    "jsonschema==4.26.0",
    "jsonschema-specifications==2025.9.1",
    "referencing==0.37.0",
    "rpds-py==2026.9.1",
)


def download(work: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "-d",
        str(work / "whl"),
    ]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + list(WHEELS), check=True)


def pack(work: Path, parts: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    tar_path = work / "wheels.tar"
    with tarfile.open(tar_path, "w") as tar:
        for wheel in sorted((work / "whl").glob("*.whl")):
            tar.add(wheel, arcname=f"whl/{wheel.name}")
    return gpu_boot.split(tar_path, parts, part_bytes)  # parts/partNN and parts/wheels.sha256


TRANSFER_BYTES = 64 * 2**20  # what one device call carries: the working tree and the carried paths
# The device counts more than the files' sizes (an archive's headers and padding, so per file): it refused a tree of
# 6,751,500 bytes in 599 files with a 60,000,000-byte part (2026-12-02), 356 KB under the limit by sizes alone.
PER_FILE = 1024
HEADROOM = 2**20


class PlanError(ValueError):
    pass


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def tree_bytes(repo: Path) -> int:
    """Bytes of what travels with every call (tracked files and untracked files git does not ignore), with
    PER_FILE for each file's share of the transfer's archive."""
    listed = _git(repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
    files = [repo / name for name in listed.split("\0") if name and (repo / name).is_file()]
    return sum(f.stat().st_size + PER_FILE for f in files)


def plan(parts: Path) -> list[str]:
    """One transfer per part: the part travels as a carried path of the working copy (so PARTS must be inside
    the repository and git-ignored) and the command moves it out of the copy at once. PlanError names the fix."""
    parts = parts.resolve()
    top = _git(parts if parts.is_dir() else parts.parent, "rev-parse", "--show-toplevel")
    if not parts.is_dir() or top.returncode != 0:
        raise PlanError(
            f"{parts} is not a folder inside a git checkout: the device machine receives only the repository's "
            "working tree, so pack the parts into a git-ignored folder of it (e.g. build/gpu-parts)"
        )
    repo = Path(top.stdout.strip())
    rel = parts.relative_to(repo).as_posix()
    names = sorted(p.name for p in parts.glob("part*"))
    if not names or not (parts / "wheels.sha256").is_file():
        raise PlanError(f"{rel} holds no part* files and wheels.sha256: run `pack` first")
    if _git(repo, "check-ignore", "-q", f"{rel}/{names[0]}").returncode != 0:
        raise PlanError(
            f"{rel} is not git-ignored: every part would travel with every call (over the 64 MiB a call carries); "
            f"ignore it (echo /{rel}/ >> .git/info/exclude) or pack into build/gpu-parts (ignored by .gitignore)"
        )
    tree = tree_bytes(repo)
    largest = max((parts / n).stat().st_size for n in names)
    if tree + largest + PER_FILE > TRANSFER_BYTES - HEADROOM:
        raise PlanError(
            f"the working tree ({tree} bytes) and a part ({largest} bytes) exceed the {TRANSFER_BYTES - HEADROOM} "
            "bytes a call carries: pack with a smaller --part-bytes"
        )
    lines = [
        f"# from the repository root {repo}; PARTS = {rel} (git-ignored); working tree {tree} bytes per call",
        "# one device call per part, back to back: carry the listed paths, run the command",
    ]
    for i, name in enumerate(names):
        carry = [f"{rel}/{name}"] + ([f"{rel}/wheels.sha256"] if i == len(names) - 1 else [])
        lines.append(f"carry={','.join(carry)}  command: mkdir -p /root/stage && mv {' '.join(carry)} /root/stage/")
    return lines


def install(stage: Path, site: Path) -> None:
    try:
        gpu_boot.join(stage, stage / "wheels.tar")  # stage/part* and stage/wheels.sha256 -> stage/whl
    except gpu_boot.LabError as exc:
        sys.exit(f"gpu_stage install: {exc}")
    wheels = sorted(str(w) for w in (stage / "whl").glob("*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--upgrade",
            "--target",
            str(site),
            *wheels,
        ],
        check=True,
    )
    # Bytecode once, on every core: the H200 image sets PYTHONDONTWRITEBYTECODE=1, so without it every process that
    # imports sglang compiles its 14,441 modules again. A file that does not compile (a wheel's template or example)
    # is only reported: Python never imports it, or compiles it as before.
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(site)], check=False)
    if done.returncode:
        print(f"gpu_stage install: compileall could not compile some files of {site} (above); installed anyway")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("download").add_argument("work", type=Path)
    p = sub.add_parser("pack")
    p.add_argument("work", type=Path)
    p.add_argument("parts", type=Path)
    p.add_argument("--part-bytes", type=int, default=PART_BYTES, help=f"bytes per part ({PART_BYTES})")
    sub.add_parser("plan").add_argument("parts", type=Path)
    p = sub.add_parser("install")
    p.add_argument("stage", type=Path)
    p.add_argument("site", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "download":
        download(args.work)
    elif args.cmd == "pack":
        for part in pack(args.work, args.parts, args.part_bytes):
            print(f"{part} {part.stat().st_size}")
    elif args.cmd == "plan":
        try:
            print("\n".join(plan(args.parts)))
        except PlanError as exc:
            print(f"gpu_stage plan: {exc}", file=sys.stderr)
            return 2
    else:
        install(args.stage, args.site)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
