#!/usr/bin/env python3
"""A GPU lab: boot systemd on an offline GPU host that has none, and run the project's playbook inside it; and the
phases of a GPU session on the device machine (tests/gpu, the benchmark parity, the lab's deploys, restarts and
compares), each a sub-command that records what it ran.

Steps (each a sub-command; stdlib only):

    python tools/gpu_lab.py fetch WORK              # on a networked Debian 12 machine: systemd 252 and the libraries
                                                    # it needs (apt-get download), ansible-core and its wheels for
                                                    # CPython 3.12 (pip download, pinned by constraints.txt)
    python tools/gpu_lab.py pack WORK PARTS         # tar WORK/debs and WORK/whl, sha256, split into parts
    python tools/gpu_lab.py boot PARTS ROOT [--bind PATH]...   # on the GPU host: join and check the parts, unpack the
                                                    # debs beside the host's files, an Ansible venv, then systemd as
                                                    # PID 1 of a new PID + mount namespace over an overlay of /
    python tools/gpu_lab.py exec ROOT -- COMMAND... # run COMMAND inside it (nsenter: systemctl, ansible-playbook -c local)
    python tools/gpu_lab.py stop ROOT               # SIGKILL the namespace's PID 1: everything inside ends

The recipe is shared/research/gpu-systemd-recipe.md (verified on nvidia-h200, 2026-12-01): Debian 12's systemd
unpacked into an overlay's upper folder (only the files the host lacks; top-level lib, bin and sbin moved under usr/
for a merged-usr host), the overlay's lower layer the host's own /, /proc, /sys, /dev, and /usr/local/nvidia (a
separate mount, not part of an overlay's lower layer) mounted inside, tmpfs on /run and /tmp, `container=other`,
`chroot MERGED /usr/lib/systemd/systemd --system`. Writes inside land in ROOT/upper; the host's / stays untouched,
except the paths given with --bind (the checkout, $OUT), which are the host's own. ROOT/ansible is a venv of
ansible-core made with the interpreter that runs `boot`, with a .pth to the checkout's src/ (the controller side
imports sglang_deploy).

PARTS must be inside the checkout and git-ignored (a device call carries at most 64 MiB): build/gpu-lab is.

A GPU session's phases, one device call or more each, from the repository root of the device's copy once
tools/gpu_stage.py's parts are in /root/stage (`gpu_stage.py plan`); each installs the staged SGLang into /root/site
first where it is not there yet, and writes its logs, a `phase NAME: SECONDS s rc N` line per step (phases.txt) and
its files to --out ($OUT, the call's download folder). --dry-run prints the commands and runs none.

    python tools/gpu_lab.py smoke                    # tests/gpu/test_smoke.py on the image's Python and torch
    python tools/gpu_lab.py suite FILE...            # tests/gpu files one by one within one call's 10 minutes
    python tools/gpu_lab.py parity [--timeout S] SOURCE [GPU_PARITY_ARGS...]   # benchmarks/gpu_parity.py
    python tools/gpu_lab.py up [--profile P]         # copy build/gpu-src to /root/gpu-src, boot the lab from
                                                     # build/gpu-lab (this `pack`), first deploy of P (site.yml)
    python tools/gpu_lab.py deploy PROFILE [--name N] [-e VAR=VALUE]...   # site.yml in the lab again
    python tools/gpu_lab.py restart [--caches warm,cold] [--repeats 3]     # restarts through the unit, timed
    python tools/gpu_lab.py compare PROFILE... [--repeats 3]              # sglang-deploy compare in the lab

The lab's phases log to /root/labout (bound into the lab, kept between calls) and copy it, with the unit's journal,
to --out. End a session with `stop /root/gpulab`.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import gzip
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
from pathlib import Path

PART_BYTES = 50_000_000  # a device call carries 64 MiB with the working tree (10.9 MB on 2026-12-02; gpu_stage.plan)
REPO = Path(__file__).resolve().parent.parent

# Debian 12 (bookworm): systemd 252 and the libraries an Ubuntu 24.04 image may lack (libip4tc2 was missing there:
# systemd failed with "libip4tc.so.2: cannot open shared object file"). Only files the host lacks are used.
DEBS = (
    "systemd",
    "libsystemd-shared",
    "libsystemd0",
    "libip4tc2",
    "libkmod2",
    "libapparmor1",
    "libcryptsetup12",
    "libfdisk1",
    "libseccomp2",
    "libaudit1",
    "libaudit-common",
    "libargon2-1",
    "libdevmapper1.02.1",
    "libjson-c5",
    "libpam0g",
    "libacl1",
    "libblkid1",
    "libcap2",
    "libcrypt1",
    "libgcrypt20",
    "libgpg-error0",
    "liblz4-1",
    "liblzma5",
    "libmount1",
    "libp11-kit0",
    "libffi8",
    "libselinux1",
    "libpcre2-8-0",
    "libssl3",
    "libzstd1",
)
# ansible-core and every package it imports, plus what the project's controller code imports (packaging, PyYAML;
# ansible-runner and matplotlib for the sglang-deploy command: compare and tune in the lab).
WHEELS = (
    "ansible-core",
    "Jinja2",
    "MarkupSafe",
    "PyYAML",
    "cryptography",
    "cffi",
    "pycparser",
    "packaging",
    "resolvelib",
    "ansible-runner",
    "pexpect",
    "ptyprocess",
    "python-daemon",
    "lockfile",
    "matplotlib",
    "numpy",
    "pillow",
    "fonttools",
    "kiwisolver",
    "contourpy",
    "cycler",
    "pyparsing",
    "python-dateutil",
    "tzdata",
)
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
TARGET_PYTHON = (3, 12)
# The host's own separate mounts the overlay's lower layer does not show: mounted into the merged root as they are.
HOST_MOUNTS = ("/usr/local/nvidia",)
MERGED_USR = ("bin", "sbin", "lib", "lib64")
BOOT_TIMEOUT = 60.0


class LabError(RuntimeError):
    pass


_PIN = re.compile(r"([A-Za-z0-9._-]+)==([^\s;]+)\s*(?:;\s*python_version\s*(>=|<)\s*\"([0-9]+)\.([0-9]+)\")?\s*$")


def pins(constraints: str, names: tuple[str, ...] = WHEELS, python: tuple[int, int] = TARGET_PYTHON) -> list[str]:
    """`name==version` for each name, from a constraints file's lines (markers `python_version >= "X.Y"` and
    `< "X.Y"` decided for python); LabError names a package without a pin."""
    found: dict[str, str] = {}
    for line in constraints.splitlines():
        match = _PIN.match(line.split("#", 1)[0].strip())
        if not match:
            continue
        name, version, op, major, minor = match.groups()
        if op and not ((python >= (int(major), int(minor))) == (op == ">=")):
            continue
        found[name.lower()] = f"{name}=={version}"
    missing = [name for name in names if name.lower() not in found]
    if missing:
        raise LabError(
            f"constraints.txt pins no {', '.join(missing)} for Python {python[0]}.{python[1]}: pin them there"
        )
    return [found[name.lower()] for name in names]


def fetch(work: Path) -> None:
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *DEBS], cwd=debs, check=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
    cmd += ["--implementation", "cp", "-d", str(work / "whl")]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    subprocess.run(cmd + pins((REPO / "constraints.txt").read_text()), check=True)


def split(data: Path, parts: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """Cut data into parts/partNN of part_bytes (old parts removed) and write parts/<stem>.sha256 of the whole, as
    `sha256sum -c` reads it; data is removed. tools/gpu_stage.py packs its wheels with it too."""
    parts.mkdir(parents=True, exist_ok=True)
    for old in parts.glob("part*"):
        old.unlink()
    digest, written = hashlib.sha256(), []
    with data.open("rb") as src:
        while chunk := src.read(part_bytes):
            digest.update(chunk)
            part = parts / f"part{len(written):02d}"
            part.write_bytes(chunk)
            written.append(part)
    (parts / f"{data.stem}.sha256").write_text(f"{digest.hexdigest()}  {data.name}\n")
    data.unlink()
    return written


def pack(work: Path, parts: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    tar_path = work / "lab.tar"
    with tarfile.open(tar_path, "w") as tar:
        for folder in ("debs", "whl"):
            for path in sorted((work / folder).glob("*")):
                tar.add(path, arcname=f"{folder}/{path.name}")
    return split(tar_path, parts, part_bytes)


def _regular(path: Path) -> Path:
    """path, if it is a regular file (a link to one included); LabError otherwise: a device or a FIFO never ends."""
    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError as exc:
        raise LabError(f"{path} is missing or unreadable ({exc.strerror}): run `pack` again") from exc
    if not regular:
        raise LabError(f"{path} is not a regular file: run `pack` again")
    return path


def expected_sha256(path: Path) -> str:
    """The sha256 a `sha256sum` line in path names (only its first 200 bytes are read); LabError otherwise."""
    with _regular(path).open("rb") as handle:
        words = handle.read(200).split()
    if not words or not re.fullmatch(rb"[0-9a-f]{64}", words[0]):
        raise LabError(f"{path} holds no sha256 (64 hex digits, as sha256sum writes it): run `pack` again")
    return words[0].decode()


def join(parts: Path, tar_path: Path) -> None:
    """Join parts/part* into tar_path, check it against parts/<stem>.sha256, unpack it beside itself and remove it."""
    expected = expected_sha256(parts / f"{tar_path.stem}.sha256")
    digest = hashlib.sha256()
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    with tar_path.open("wb") as out:
        for part in sorted(parts.glob("part*")):
            data = _regular(part).read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != expected:
        raise LabError(f"sha256 of the joined parts {digest.hexdigest()} != {expected}: a part is missing or broken")
    with tarfile.open(tar_path) as tar:
        # the data filter where this Python has it (3.11.4+, 3.12): no links or paths out of the folder
        tar.extractall(tar_path.parent, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    tar_path.unlink()


def merged_usr_path(rel: str) -> str:
    """A package path as a merged-usr host holds it: bin/x -> usr/bin/x, lib/x -> usr/lib/x (a real /lib folder in
    the upper layer would hide the host's /lib -> usr/lib link)."""
    top, _, rest = rel.partition("/")
    return f"usr/{top}/{rest}" if top in MERGED_USR and rest else rel


def upper_plan(tree: Path, host: Path = Path("/")) -> list[str]:
    """Paths (relative, merged-usr) of files and links under tree that the host lacks: what goes into the upper
    layer. The host's own files are never replaced (its libraries stay the ones its programs were built with)."""
    wanted = []
    for folder, dirs, files in os.walk(tree):
        for name in files + [d for d in dirs if (Path(folder) / d).is_symlink()]:
            rel = merged_usr_path(str((Path(folder) / name).relative_to(tree)))
            if not os.path.lexists(host / rel):
                wanted.append(rel)
    return sorted(wanted)


def fill_upper(tree: Path, upper: Path, host: Path = Path("/")) -> list[str]:
    """Copy upper_plan's files into the upper layer; those a lab booted before on this root left there are kept (its
    state, the stack and the unit included, survives a stop and a boot)."""
    wanted = upper_plan(tree, host)
    for rel in wanted:
        if os.path.lexists(upper / rel):
            continue
        src = tree / rel if os.path.lexists(tree / rel) else tree / rel.removeprefix("usr/")
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, upper / rel, follow_symlinks=False)
    return wanted


def boot_script(merged: Path, upper: Path, work: Path, binds: list[str]) -> str:
    """The script unshare runs (as root): overlay, mounts, then exec systemd as the namespace's PID 1. Every path is
    shell-quoted; LabError names one with a line break."""
    for path in (merged, upper, work, *binds):
        if "\n" in str(path) or "\r" in str(path):
            raise LabError(f"{str(path)!r} holds a line break: give the root and --bind paths without one")
    q = shlex.quote
    lines = [
        "set -e",
        f"mount -t overlay overlay -o {q(f'lowerdir=/,upperdir={upper},workdir={work}')} {q(str(merged))}",
        f"mount -t proc proc {q(f'{merged}/proc')}",
        f"mount --rbind /sys {q(f'{merged}/sys')}",
        f"mount --rbind /dev {q(f'{merged}/dev')}",
        f"mount -t tmpfs tmpfs {q(f'{merged}/run')}",
        f"mount -t tmpfs tmpfs {q(f'{merged}/tmp')}",
    ]
    for path in [p for p in HOST_MOUNTS if os.path.isdir(p)] + binds:
        lines.append(f"mkdir -p {q(f'{merged}{path}')} && mount --rbind {q(path)} {q(f'{merged}{path}')}")
    lines += ["export container=other", f"exec chroot {q(str(merged))} /usr/lib/systemd/systemd --system"]
    return "\n".join(lines) + "\n"


def _pid(root: Path) -> int:
    """Host PID of the lab's systemd (the child of the unshare process recorded at boot)."""
    try:
        unshare = int((root / "unshare.pid").read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"no lab booted under {root} (no unshare.pid): run boot first") from exc
    children = Path(f"/proc/{unshare}/task/{unshare}/children")
    pids = children.read_text().split() if children.exists() else []
    if not pids:
        raise LabError(f"the lab under {root} is not running (unshare pid {unshare} has no child): boot it again")
    return int(pids[0])


# What the GPU machine's own environment sets that a GPU host's root shell does not: with PYTHONDONTWRITEBYTECODE
# inherited, the roles' root runs of the stack's Python (its probe, check_argv.py) wrote no bytecode beside the
# image's modules, so every start of the unit compiled them again (results/gpu-h200/pycache-2026-12-02).
MACHINE_ONLY_ENV = ("PYTHONDONTWRITEBYTECODE",)


def lab_env(environ: dict) -> dict:
    """The environment of a command in the lab: this one without what only the GPU machine sets (MACHINE_ONLY_ENV)."""
    return {k: v for k, v in environ.items() if k not in MACHINE_ONLY_ENV}


def nsenter(root: Path, command: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", lab_env(os.environ))
    return subprocess.run(["nsenter", "-t", str(_pid(root)), "-m", "-p", "-r", "-w", "--", *command], **kwargs)


def ansible_venv(stage: Path, root: Path, python: str) -> Path:
    venv = root / "ansible"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    wheels = sorted(str(w) for w in (stage / "whl").glob("*.whl"))
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir"]
    subprocess.run(pip + wheels, check=True)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "sglang_deploy_src.pth").write_text(f"{REPO / 'src'}\n")
    return venv


def boot(parts: Path, root: Path, binds: list[str], python: str, timeout: float = BOOT_TIMEOUT) -> dict:
    """Unpack, build the upper layer, start systemd and wait until it reports running (or degraded)."""
    if (root / "unshare.pid").exists():
        raise LabError(f"{root} holds a lab already: stop it first (gpu_lab.py stop {root})")
    started = time.monotonic()
    stage, debroot, upper, work, merged = (root / name for name in ("stage", "debroot", "upper", "work", "merged"))
    for folder in (debroot, upper, work, merged):
        folder.mkdir(parents=True, exist_ok=True)
    join(parts, stage / "lab.tar")
    for deb in sorted((stage / "debs").glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(debroot)], check=True)
    copied = fill_upper(debroot, upper)
    (upper / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    venv = ansible_venv(stage, root, python) if any((stage / "whl").glob("*.whl")) else None
    unpacked = time.monotonic()
    script = root / "boot.sh"
    script.write_text(boot_script(merged, upper, work, binds))
    log = (root / "boot.log").open("wb")
    proc = subprocess.Popen(
        ["unshare", "--fork", "--pid", "--mount", "--propagation", "private", "bash", str(script)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (root / "unshare.pid").write_text(f"{proc.pid}\n")
    state, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"unshare exited {proc.returncode}: {(root / 'boot.log').read_text()[-2000:]}")
        try:
            run = nsenter(root, ["systemctl", "is-system-running"], capture_output=True, text=True, timeout=10)
            state = run.stdout.strip()
        except (LabError, subprocess.TimeoutExpired):
            state = ""
        if state in ("running", "degraded"):
            break
        time.sleep(0.5)
    else:
        raise LabError(f"systemd did not reach running in {timeout:.0f} s (last state {state!r}); see {root}/boot.log")
    return {
        "state": state,
        "files_added": len(copied),
        "unpack_s": round(unpacked - started, 1),
        "boot_s": round(time.monotonic() - unpacked, 1),
        "systemd_pid": _pid(root),
        "ansible": str(venv / "bin") if venv else "",
    }


def stop(root: Path, timeout: float = 30.0) -> None:
    try:
        unshare = int((root / "unshare.pid").read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"no lab booted under {root} (no unshare.pid)") from exc
    try:
        os.kill(_pid(root), signal.SIGKILL)
    except LabError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Path(f"/proc/{unshare}").exists():
        try:
            if os.waitpid(unshare, os.WNOHANG)[0]:
                break
        except ChildProcessError:  # not our child: wait for it to go
            pass
        time.sleep(0.2)
    (root / "unshare.pid").unlink()


# A GPU session's places on the device machine.
STAGE = Path("/root/stage")  # tools/gpu_stage.py's parts, carried there (gpu_stage.py plan)
SITE = Path("/root/site")  # where gpu_stage.py install puts SGLang: PYTHONPATH of tests/gpu and of the parity
IMAGE_PYTHON = "/opt/torch/.venv/bin/python"  # the image's Python, with its torch
GPU_OUT = Path("/root/gpu-out")  # tests/gpu's --gpu-out
LAB_ROOT = Path("/root/gpulab")  # the lab's root (boot, exec, stop)
LAB_SRC = Path("/root/gpu-src")  # the checkout the lab's playbook runs from: a copy of the carried tree
LAB_OUT = Path("/root/labout")  # bound into the lab: the lab phases' logs and results, kept between calls
KEYFILE = Path("/root/gpulab.key")  # the lab server's API key (inventory/gpu-lab.yml reads SGLANG_LAB_API_KEY)
CALL_BUDGET = 560  # seconds of a device call's 10 minutes that a suite's pytest files may take together
PARITY_TIMEOUT = 470  # seconds for gpu_parity.py, its server's stop on SIGTERM included
SITE_ENV = {"PYTHONPATH": str(SITE), "PYTHONUNBUFFERED": "1"}
# The stack's JIT and compile caches (FlashInfer, Triton, TorchInductor, DeepGEMM, ...), one folder per stack venv.
CACHES = "/var/cache/sglang/*/*"


class FileText:
    """A value read from a file when the command runs, shown as $(cat FILE): the API key is never printed."""

    def __init__(self, path: Path):
        self.path = path

    def __str__(self) -> str:
        return f"$(cat {self.path})"

    def value(self) -> str:
        return self.path.read_text().strip()


def shown_word(word: str) -> str:
    """A word as a shell line shows it: quoted where needed, a glob and $OUT left bare."""
    return word if re.fullmatch(r"[\w@%+=:,./*$-]+", word) else shlex.quote(word)


def expand(word: str) -> list[str]:
    """A word with * as a shell expands it: the paths it matches, or the word itself where none does."""
    return (sorted(glob.glob(word)) or [word]) if "*" in word else [word]


LAB_ENV = {
    "SGLANG_LAB_API_KEY": FileText(KEYFILE),
    "SGLANG_DEPLOY_RESULTS": f"{LAB_OUT}/results",
    "ANSIBLE_CONFIG": f"{LAB_SRC}/ansible.cfg",
}


class Session:
    """Runs a GPU session's commands from the repository root, each printed first (with dry_run only printed).
    A named phase is timed: `phase NAME: SECONDS s rc N` on stdout and in LOGS/phases.txt."""

    def __init__(self, logs: Path, out: Path, dry_run: bool):
        self.logs, self.out, self.dry_run = logs, out, dry_run
        if not dry_run:
            for folder in (logs, out):
                folder.mkdir(parents=True, exist_ok=True)

    def run(self, argv, *, phase="", log=None, append=False, errors=None, env=None, tail=0) -> int:
        """argv (a word with * is a glob where it matches, as in a shell) with env added to this environment;
        stdout to log (appended with append; gzip-compressed when log ends in .gz), stderr to errors or log."""
        env = env or {}
        shown = [f"{k}={v}" for k, v in env.items()] + [shown_word(str(a)) for a in argv]
        if log and str(log).endswith(".gz"):
            shown.append(f"2>&1 | gzip > {log}")
        elif log:
            shown.append(f"{'>>' if append else '>'} {log} " + (f"2> {errors}" if errors else "2>&1"))
        print("+ " + " ".join(shown), flush=True)
        if self.dry_run:
            return 0
        words = [w for a in argv for w in expand(str(a))]
        full = dict(os.environ) | {k: v.value() if isinstance(v, FileText) else v for k, v in env.items()}
        plain = Path(str(log).removesuffix(".gz")) if log else None
        started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.monotonic()
        with contextlib.ExitStack() as stack:
            stdout = stack.enter_context(plain.open("a" if append else "w")) if plain else None
            stderr = stack.enter_context(Path(errors).open("w")) if errors else subprocess.STDOUT if plain else None
            rc = subprocess.run(words, stdout=stdout, stderr=stderr, env=full, cwd=REPO, check=False).returncode
        if plain and plain != log:
            with plain.open("rb") as src, gzip.open(log, "wb") as dst:
                shutil.copyfileobj(src, dst)
            plain.unlink()
        if phase:
            line = f"phase {phase}: {time.monotonic() - t0:.1f} s rc {rc}, started {started}"
            print(line, flush=True)
            with (self.logs / "phases.txt").open("a") as handle:
                handle.write(line + "\n")
        if tail and plain == log:
            print("".join(log.read_text(errors="replace").splitlines(keepends=True)[-tail:]), end="", flush=True)
        return rc

    def do(self, what: str, action) -> None:
        """A step this process does itself, printed as what."""
        print(f"+ {what}", flush=True)
        if not self.dry_run:
            action()


def ensure_site(s: Session) -> None:
    """The staged SGLang installed into SITE, once per machine (gpu_stage.py install also joins the wheels into
    STAGE/whl, the GPU lab inventory's wheelhouse)."""
    if (SITE / "sglang").is_dir():
        return
    cmd = [sys.executable, "tools/gpu_stage.py", "install", STAGE, SITE]
    if s.run(cmd, phase="install", log=s.logs / "install.log", tail=5):
        raise LabError(f"gpu_stage.py install failed: {s.logs / 'install.log'}")


def suite(s: Session, files: list[str], budget: int = CALL_BUDGET) -> int:
    """tests/gpu's FILEs one after the other, each under a timeout that keeps them all within budget seconds."""
    ensure_site(s)
    start, failed = time.monotonic(), 0
    for name in files:
        left = budget - int(time.monotonic() - start)
        if left <= 0:
            print(f"{name}: not run, the call's {budget} s are spent", flush=True)
            failed += 1
            continue
        cmd = ["timeout", left, IMAGE_PYTHON, "-m", "pytest", f"tests/gpu/{name}", "-v", "-p", "no:cacheprovider"]
        log = s.logs / f"pytest-{Path(name).stem}.log"
        if s.run([*cmd, "--gpu-out", GPU_OUT], phase=name, log=log, env=SITE_ENV, tail=1):
            failed += 1
    s.run(["cp", "-r", GPU_OUT, s.out / "gpu-out"])
    return int(failed > 0)


def parity(s: Session, source: str, args: list[str], timeout: int = PARITY_TIMEOUT) -> int:
    """benchmarks/gpu_parity.py, then its table, raw figures, server logs and runs (not the dataset) into --out."""
    ensure_site(s)
    work = Path(f"/root/parity-{int(time.time())}")
    cmd = ["timeout", timeout, IMAGE_PYTHON, "benchmarks/gpu_parity.py", "--out", work, "--source", source, *args]
    rc = s.run(cmd, phase="gpu_parity", log=s.out / "parity-stdout.log", env=SITE_ENV, tail=30)
    s.run(["cp", work / "parity-raw.json", work / "parity-table.md", s.out])
    s.run(["cat", work / "logs" / "*.log"], log=s.out / "parity-server.log.gz")
    s.run(["tar", "czf", s.out / "runs.tar.gz", "--exclude=dataset-*", "-C", work, "runs"])
    s.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"])  # what is left on the GPU
    return rc


def in_lab(*command) -> list:
    """A command run inside the lab (exec)."""
    return [sys.executable, "tools/gpu_lab.py", "exec", LAB_ROOT, "--", *command]


def in_checkout(shell: str) -> list:
    """A shell line run inside the lab from its checkout."""
    return in_lab("bash", "-c", f"cd {LAB_SRC} && {shell}")


def collect(s: Session, journal: bool = True) -> None:
    """The lab phases' logs and results, and the unit's journal, into --out."""
    s.run(["cp", "-r", f"{LAB_OUT}/.", s.out])
    if journal:
        s.run(
            in_lab("journalctl", "-u", "sglang", "--no-pager", "-o", "short-iso"), log=s.out / "journal-sglang.txt.gz"
        )


def deploy(s: Session, profile: str, name: str = "", extra: tuple = ()) -> int:
    """site.yml -e profile=PROFILE inside the lab; its recap, and the start's summary into LAB_OUT/startup.txt."""
    name = name or f"deploy-{profile}"
    if not re.fullmatch(r"[\w][\w.+=-]*", name, re.ASCII) or ".." in name:
        raise LabError(
            f"the phase name {name!r} (--name, else deploy-PROFILE) is no plain file name: letters, digits and "
            f"_ . + = - only, no '/' or '..' (its log is {LAB_OUT}/NAME.log)"
        )
    args = shlex.join(["-e", f"profile={profile}", *[w for e in extra for w in ("-e", e)]])
    playbook = f"{LAB_ROOT}/ansible/bin/ansible-playbook -i inventory/gpu-lab.yml site.yml {args}"
    rc = s.run(in_checkout(playbook), phase=name, log=s.logs / f"{name}.log", env=LAB_ENV)
    if not s.dry_run:
        text = (s.logs / f"{name}.log").read_text(errors="replace")
        recap = text.split("PLAY RECAP")[-1].strip().splitlines()[1:2] if "PLAY RECAP" in text else []
        ready = re.findall(r"ready [0-9.]+ s after its (?:start|first log line).*", text)[-1:]
        for line in recap + [f"{name}: {r}" for r in ready]:
            print(line, flush=True)
        with (s.logs / "startup.txt").open("a") as handle:
            handle.writelines(f"{name}: {r}\n" for r in ready)
    collect(s)
    return rc


def up(s: Session, profile: str, tree: str, parts: str) -> int:
    """A copy of the tree as the lab's checkout, the staged SGLang, a new API key, the models, the lab booted and
    the first deploy."""
    s.run(["rm", "-rf", LAB_SRC])
    if s.run(["cp", "-r", tree, LAB_SRC]):
        raise LabError(f"no {tree} to copy: carry it (a git archive of the commit to run)")
    ensure_site(s)

    def new_key() -> None:
        KEYFILE.unlink(missing_ok=True)
        fd = os.open(KEYFILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(24) + "\n")

    s.do(f"a new API key into {KEYFILE} (0600)", new_key)
    s.run([sys.executable, LAB_SRC / "tools" / "make_models.py", "/data/models"], log=s.logs / "models.log")
    boot_cmd = [sys.executable, "tools/gpu_lab.py", "boot", parts, LAB_ROOT, "--bind", LAB_OUT]
    if s.run(boot_cmd, phase="boot", log=s.logs / "boot.txt", tail=2):
        collect(s, journal=False)
        return 1
    return deploy(s, profile, "deploy-first")


def restart(s: Session, caches: list[str], repeats: int) -> int:
    """repeats rounds of one restart through the unit per caches kind (warm: kept, cold: emptied first), each one
    JSON line in LAB_OUT/restarts.jsonl (restart-unit)."""
    if set(caches) - {"warm", "cold"}:
        raise LabError(f"--caches takes warm and cold, not {','.join(caches)}")
    failed = 0
    for i in range(1, repeats + 1):
        for kind in caches:
            name = f"{kind}-{i}"
            shell = f"PYTHONPATH={LAB_SRC}/src python3 tools/gpu_lab.py restart-unit {name} {kind}"
            log, errors = s.logs / "restarts.jsonl", s.logs / f"{name}.err"
            if s.run(in_checkout(shell), phase=name, log=log, append=True, errors=errors, env=LAB_ENV, tail=1):
                failed += 1
    collect(s)
    return int(failed > 0)


def restart_unit(name: str, caches: str, unit: str = "sglang", url: str = "http://127.0.0.1:30000") -> dict:
    """Inside the lab: one `systemctl restart` of the unit (its caches emptied first when cold), the readiness wait
    of the sglang_ready module with the unit watched, and where the start went, read from the journal as the role
    reads it (host/startup.py)."""
    from sglang_deploy.host import readiness, startup  # the lab's checkout's src/, on PYTHONPATH

    if caches == "cold":
        for path in glob.glob(CACHES):
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    t0 = time.monotonic()
    # The unit allows a few starts in a row (StartLimitBurst); the role clears the count before a deliberate restart.
    subprocess.run(["systemctl", "reset-failed", unit], check=False)
    subprocess.run(["systemctl", "restart", unit], check=True)
    readiness.wait_ready(url, timeout=900, api_key=os.environ["SGLANG_LAB_API_KEY"], unit=unit)
    ready = time.monotonic()
    report = startup.read_journal(unit, ready_at=ready)
    return {"name": name, "caches": caches, "restart_to_ready_s": round(ready - t0, 1), **report}


def compare(s: Session, profiles: list[str], repeats: int) -> int:
    """sglang-deploy compare of the profiles inside the lab (its Ansible on PATH), its report under LAB_OUT/compare."""
    cli = shlex.join(["compare", *profiles, "--repeats", str(repeats), "-i", "inventory/gpu-lab.yml"])
    shell = f"PATH={LAB_ROOT}/ansible/bin:$PATH python -m sglang_deploy.cli {cli} --out {LAB_OUT}/compare"
    rc = s.run(in_checkout(shell), phase="compare", log=s.logs / "compare.log", env=LAB_ENV, tail=20)
    collect(s)
    return rc


def run_phase(args: argparse.Namespace) -> int:
    """A session phase with its Session: the lab's log to LAB_OUT, the others' to --out."""
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    if out is None and not args.dry_run:
        raise LabError("no --out and no $OUT (the device call's download folder)")
    out = out or Path("$OUT")
    lab = args.cmd in ("up", "deploy", "restart", "compare")
    s = Session(LAB_OUT if lab else out, out, args.dry_run)
    if args.cmd in ("smoke", "suite"):
        return suite(s, getattr(args, "files", ["test_smoke.py"]), getattr(args, "budget", CALL_BUDGET))
    if args.cmd == "parity":
        return parity(s, args.source, args.args, args.timeout)
    if args.cmd == "up":
        return up(s, args.profile, args.tree, args.parts)
    if args.cmd == "deploy":
        return deploy(s, args.profile, args.name, tuple(args.extra))
    if args.cmd == "restart":
        return restart(s, args.caches.split(","), args.repeats)
    return compare(s, args.profiles, args.repeats)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch").add_argument("work", type=Path)
    p = sub.add_parser("pack")
    p.add_argument("work", type=Path)
    p.add_argument("parts", type=Path)
    p.add_argument("--part-bytes", type=int, default=PART_BYTES, help=f"bytes per part ({PART_BYTES})")
    p = sub.add_parser("boot")
    p.add_argument("parts", type=Path)
    p.add_argument("root", type=Path)
    p.add_argument("--bind", action="append", default=[], help="a host folder shown as itself inside (repeatable)")
    p.add_argument("--python", default=sys.executable, help="interpreter of the Ansible venv (this one)")
    p.add_argument("--timeout", type=float, default=BOOT_TIMEOUT, help=f"seconds to reach running ({BOOT_TIMEOUT:.0f})")
    p = sub.add_parser("exec")
    p.add_argument("root", type=Path)
    p.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("stop").add_argument("root", type=Path)
    # A GPU session's phases: --out and --dry-run each.
    phase = argparse.ArgumentParser(add_help=False)
    phase.add_argument("--out", type=Path, help="where the call's files go (default: $OUT, the call's download folder)")
    phase.add_argument("--dry-run", action="store_true", help="print the commands, run none")
    sub.add_parser("smoke", parents=[phase], help="tests/gpu/test_smoke.py (suite test_smoke.py)")
    p = sub.add_parser("suite", parents=[phase], help="tests/gpu files one by one within one call")
    p.add_argument("files", nargs="+", metavar="FILE", help="a file of tests/gpu, e.g. test_dense.py")
    p.add_argument("--budget", type=int, default=CALL_BUDGET, help=f"seconds for all of them ({CALL_BUDGET})")
    p = sub.add_parser("parity", parents=[phase], help="benchmarks/gpu_parity.py")
    p.add_argument("--timeout", type=int, default=PARITY_TIMEOUT, help=f"seconds ({PARITY_TIMEOUT}), then SIGTERM")
    p.add_argument("source", help="what ran, for the record: e.g. 'commit 1234abc'")
    p.add_argument("args", nargs=argparse.REMAINDER, help="gpu_parity.py's, e.g. --levels 1:16 (this one's go first)")
    p = sub.add_parser("up", parents=[phase], help="boot the lab over a copy of the tree, first deploy")
    p.add_argument("--profile", default="dense", help="the first deploy's profile (dense)")
    p.add_argument("--tree", default="build/gpu-src", help="the checkout the lab runs (build/gpu-src)")
    p.add_argument("--parts", default="build/gpu-lab", help="this tool's `pack` of the lab (build/gpu-lab)")
    p = sub.add_parser("deploy", parents=[phase], help="site.yml -e profile=PROFILE in the lab")
    p.add_argument("profile")
    p.add_argument("--name", default="", help="the phase's and its log's name (deploy-PROFILE)")
    p.add_argument("-e", dest="extra", action="append", default=[], metavar="VAR=VALUE", help="more extra vars")
    p = sub.add_parser("restart", parents=[phase], help="restarts through the lab's unit, timed")
    p.add_argument("--caches", default="warm", help="per round, comma-separated: warm (kept), cold (emptied first)")
    p.add_argument("--repeats", type=int, default=3, help="rounds (3)")
    p = sub.add_parser("restart-unit", help="inside the lab (restart runs it): one restart, a JSON line")
    p.add_argument("name")
    p.add_argument("caches", choices=("warm", "cold"))
    p = sub.add_parser("compare", parents=[phase], help="sglang-deploy compare in the lab")
    p.add_argument("profiles", nargs="+", metavar="PROFILE")
    p.add_argument("--repeats", type=int, default=3, help="runs of each profile (3)")
    args = ap.parse_args(argv)
    try:
        if hasattr(args, "dry_run"):
            return run_phase(args)
        if args.cmd == "fetch":
            fetch(args.work)
        elif args.cmd == "pack":
            for part in pack(args.work, args.parts, args.part_bytes):
                print(f"{part} {part.stat().st_size}")
        elif args.cmd == "boot":
            binds = [str(Path(b).resolve()) for b in args.bind]
            print(boot(args.parts.resolve(), args.root.resolve(), binds, args.python, args.timeout))
        elif args.cmd == "exec":
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            return nsenter(args.root.resolve(), command).returncode
        elif args.cmd == "restart-unit":
            print(json.dumps(restart_unit(args.name, args.caches)))
        else:
            stop(args.root.resolve())
    except LabError as exc:
        print(f"gpu_lab {args.cmd}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
