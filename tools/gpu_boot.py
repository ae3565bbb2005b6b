"""The GPU lab's machinery (tools/gpu_lab.py fetch, pack, boot, exec, stop): systemd booted on an offline GPU host
that has none, in a namespace over an overlay of its own /, and the parts that carry it there. Stdlib only.

The recipe is shared/research/gpu-systemd-recipe.md (verified on nvidia-h200, 2026-12-01): Debian 12's systemd
unpacked into an overlay's upper folder (only the files the host lacks; top-level lib, bin and sbin moved under usr/
for a merged-usr host), the overlay's lower layer the host's own /, /proc, /sys, /dev, and /usr/local/nvidia (a
separate mount, not part of an overlay's lower layer) mounted inside, tmpfs on /run and /tmp, `container=other`,
`chroot MERGED /usr/lib/systemd/systemd --system`. Writes inside land in ROOT/upper; the host's / stays untouched,
except the paths given with --bind (the checkout, $OUT), which are the host's own. ROOT/ansible is a venv of
ansible-core made with the interpreter that runs `boot`, with a .pth to the checkout's src/ (the controller side
imports sglang_deploy).

PARTS must be inside the checkout and git-ignored (a device call carries at most 64 MiB): build/gpu-lab is.
"""

from __future__ import annotations

import hashlib
import os
import re
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


def mask_host_units(upper: Path, host: Path = Path("/")) -> list[str]:
    """Mask in the upper layer every unit the host's /etc/systemd/system enables (its *.wants and *.requires): on a
    host that has systemd installed but not as PID 1 (a container, such as the CI machine the CPU stand-in runs on),
    the lab's systemd would start them, dockerd or a database among them, in the host's network namespace. The lab
    starts what the playbook starts. A name already in the upper layer is left as it is."""
    names = sorted(
        {link.name for pattern in ("*.wants/*", "*.requires/*") for link in host.glob(f"etc/systemd/system/{pattern}")}
    )
    for name in names:
        mask = upper / "etc/systemd/system" / name
        if not os.path.lexists(mask):
            mask.parent.mkdir(parents=True, exist_ok=True)
            mask.symlink_to("/dev/null")
    return names


def boot_script(merged: Path, upper: Path, work: Path, binds: list[str]) -> str:
    """The script unshare runs (as root): overlay, mounts, then exec systemd as the namespace's PID 1. Every path is
    shell-quoted; LabError names one with a line break, and an overlay layer with a character the overlay's options
    read as a separator or an escape (shell quoting does not guard inside -o: a comma adds an option)."""
    for path in (merged, upper, work, *binds):
        if "\n" in str(path) or "\r" in str(path):
            raise LabError(f"{str(path)!r} holds a line break: give the root and --bind paths without one")
    for path in (upper, work):
        if any(c in str(path) for c in ",:\\"):
            raise LabError(
                f"{str(path)!r} holds a comma, colon or backslash, which the overlay mount would read as part of its "
                "options: give a root path without one"
            )
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
    masked = mask_host_units(upper)
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
        "host_units_masked": masked,
        "unpack_s": round(unpacked - started, 1),
        "boot_s": round(time.monotonic() - unpacked, 1),
        "systemd_pid": _pid(root),
        "ansible": str(venv / "bin") if venv else "",
    }


def stop(root: Path, timeout: float = 120.0) -> None:
    try:
        unshare = int((root / "unshare.pid").read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"no lab booted under {root} (no unshare.pid)") from exc
    try:
        systemd = _pid(root)
        os.kill(systemd, signal.SIGKILL)
    except LabError:
        systemd = None
    # Until both are gone: the namespace's processes end with its PID 1, which a loaded machine can take a while over.
    left = [pid for pid in (unshare, systemd) if pid]
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        try:
            os.waitpid(unshare, os.WNOHANG)
        except ChildProcessError:  # not our child: wait for it to go
            pass
        left = [pid for pid in left if Path(f"/proc/{pid}").exists()]
        time.sleep(0.2)
    if left:
        raise LabError(f"the lab under {root} did not end within {timeout:g} s (pids {left} still there)")
    (root / "unshare.pid").unlink()
