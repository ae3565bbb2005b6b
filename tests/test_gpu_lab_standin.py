"""The GPU lab's phases for real on a CPU stand-in (issue 52): tools/gpu_lab.py's fetch and pack, `up` (systemd
booted in a PID + mount namespace over an overlay of this machine's /, a git archive of this tree copied in, the first
deploy), `deploy` again, `restart`, `compare` and `stop`, each run as a GPU session runs it, with not one --dry-run.
The stand-in differs from the GPU machine only where gpu_lab.py lets it: every place under a folder of its own
(SGLANG_GPU_LAB_HOME), inventory/cpu-lab.yml (a lab host: the emulated server, no SGLang, no GPU) and its port.

Marked `standin`: `./lab test` runs it as a part of its own (pytest -m standin). Skipped, with the reason, where
this machine cannot: not root, no PID namespace or overlay mount, no Python 3.12 (the pack's ansible-core wheels),
no package mirror for fetch."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
GPU_LAB = REPO / "tools" / "gpu_lab.py"
PORT = "30700"  # inventory/cpu-lab.yml's sglang_port
LOCK = "/tmp/sglang-gpu-standin.lock"  # one stand-in at a time on a machine: its port is fixed
pytestmark = pytest.mark.standin


def load_gpu_lab():
    """tools/gpu_lab.py as loaded under this test's environment (its places under SGLANG_GPU_LAB_HOME)."""
    spec = importlib.util.spec_from_file_location("gpu_lab_standin", GPU_LAB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cannot() -> str | None:
    """Why this machine cannot boot the lab, or None."""
    if os.geteuid() != 0:
        return "the GPU lab boots systemd with unshare and mount: needs root"
    if sys.version_info < (3, 12):
        return "gpu_lab.py's pack holds ansible-core wheels for Python 3.12: run pytest with Python 3.12 or later"
    missing = [tool for tool in ("unshare", "nsenter", "apt-get", "dpkg-deb") if not shutil.which(tool)]
    if missing:
        return f"no {', '.join(missing)} on this machine"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for name in ("lower", "upper", "work", "merged"):
            os.mkdir(f"{tmp}/{name}")
        probe = f"mount -t overlay overlay -o lowerdir={tmp}/lower,upperdir={tmp}/upper,workdir={tmp}/work {tmp}/merged"
        run = ["unshare", "--fork", "--pid", "--mount", "--mount-proc", "--propagation", "private", "sh", "-c", probe]
        done = subprocess.run(run, capture_output=True, text=True, timeout=30)
        if done.returncode:
            return f"no PID + mount namespace with an overlay mount here: {done.stderr.strip()}"
    return None


def no_mirror(work: Path) -> str | None:
    """Why fetch could not reach a package mirror (a small .deb and a small wheel, as fetch gets them), or None."""
    probes = [
        ["apt-get", "download", "libaudit-common"],
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", ".", "cycler"],
    ]
    for probe in probes:
        done = subprocess.run(probe, cwd=work, capture_output=True, text=True, timeout=120)
        if done.returncode:
            return f"no package mirror for fetch ({' '.join(probe[:3])}): {done.stderr.strip()[-300:]}"
    return None


def lab_host_files(upper: Path) -> None:
    """What roles/lab puts into its image for a lab host, into the lab's upper layer: the local fact sglang_host
    (emulated: the server role runs the emulated server) and the model's stand-in config.json."""
    lab_vars = yaml.safe_load((REPO / "roles" / "lab" / "vars" / "main.yml").read_text())
    files = {
        "etc/ansible/facts.d/sglang_host.fact": lab_vars["__lab_host_fact"],
        lab_vars["__lab_model_dir"].lstrip("/") + "/config.json": lab_vars["__lab_model_config"],
    }
    for rel, data in files.items():
        (upper / rel).parent.mkdir(parents=True, exist_ok=True)
        (upper / rel).write_text(json.dumps(data, indent=2) + "\n")


def archive(tree: Path) -> None:
    """A git archive of this tree as it is (tracked and new files, not ignored ones), as a GPU session carries it."""
    env = {**os.environ, "GIT_INDEX_FILE": str(tree.parent / "index")}
    git = ["git", "-C", str(REPO)]
    subprocess.run([*git, "read-tree", "HEAD"], env=env, check=True)
    subprocess.run([*git, "add", "-A"], env=env, check=True)
    commit = subprocess.run([*git, "write-tree"], env=env, check=True, capture_output=True, text=True).stdout.strip()
    data = subprocess.run([*git, "archive", commit], check=True, capture_output=True).stdout
    tree.mkdir()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=data, check=True)


@pytest.fixture
def standin(monkeypatch, tmp_path):
    """A home for the lab's places (outside /tmp, which the lab mounts a tmpfs over), the environment that moves
    gpu_lab.py's places there, gpu_lab.py loaded under it; the lab stopped and the home removed at the end."""
    reason = cannot()
    if reason:
        pytest.skip(reason)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        home = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="gpu-standin-"))
        monkeypatch.setenv("SGLANG_GPU_LAB_HOME", str(home))
        monkeypatch.setenv("SGLANG_GPU_LAB_INVENTORY", "inventory/cpu-lab.yml")
        monkeypatch.setenv("SGLANG_GPU_LAB_PORT", PORT)
        lab = load_gpu_lab()
        try:
            yield lab, home, tmp_path
        finally:
            if (lab.LAB_ROOT / "unshare.pid").exists():
                subprocess.run([sys.executable, GPU_LAB, "stop", lab.LAB_ROOT], timeout=60, check=False)
            shutil.rmtree(home, ignore_errors=True)


def phase(out: Path, *argv, env: dict | None = None, timeout: int = 600) -> str:
    """gpu_lab.py ARGV... as a GPU session runs it (a session phase with an --out of its own), env added, its wall
    and CPU time printed (not the lab's own processes'); its output, once it exited 0. The timeout only ends a hang:
    beside a whole ./lab test on 2 cores, compare took 196 s."""
    cmd = [sys.executable, GPU_LAB, *argv]
    if argv[0] not in ("fetch", "pack", "exec", "stop"):
        cmd += ["--out", out / argv[0]]
    t0, cpu0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        cmd, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    print(f"gpu_lab.py {argv[0]}: {time.monotonic() - t0:.1f} s wall, {cpu:.1f} CPU s, rc {done.returncode}")
    text = done.stdout + done.stderr
    print("".join(f"  {line}\n" for line in text.splitlines() if line.startswith("phase ")), end="")  # its steps
    if done.returncode:  # the end of the phase's newest log too (a deploy's fatal task): CI keeps no files
        logs = sorted((out / argv[0]).glob("*.log"), key=lambda log: log.stat().st_mtime)
        text += "".join(f"\n--- {log}:\n" + log.read_text(errors="replace")[-3000:] for log in logs[-1:])
    assert done.returncode == 0, f"gpu_lab.py {' '.join(map(str, argv))} exited {done.returncode}:\n{text[-7000:]}"
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_gpu_lab_phases_run_for_real_on_a_cpu_stand_in(standin):
    lab, home, out = standin
    work, parts, tree = home / "work", home / "parts", home / "tree"
    try:
        phase(out, "fetch", work)
    except AssertionError:
        reason = no_mirror(work)
        if reason:
            pytest.skip(reason)
        raise
    phase(out, "pack", work, parts)
    archive(tree)
    assert not (tree / "collections").exists()  # as a GPU session's copy: no link to the collection
    lab_host_files(lab.LAB_ROOT / "upper")

    # up's -e reaches its first deploy: a second benchmark level beside inventory/cpu-lab.yml's one (c=1).
    two_levels = '{"sglang_benchmark_concurrency": [1, 4]}'
    phase(out, "up", "--profile", "baseline", "--tree", tree, "--parts", parts, "-e", two_levels)
    levels = re.findall(r"'\s+c=(\d+)\s+\d+/\d+ ", (lab.LAB_OUT / "deploy-first.log").read_text())
    assert levels == ["1", "4"], levels
    # What the deploy ran with, inside the lab: the collection's modules and the package of the archive's copy (the
    # link `up` made there; LAB_ENV's PYTHONPATH), not of this checkout.
    env = {k: v.value() if isinstance(v, lab.FileText) else v for k, v in lab.LAB_ENV.items()}
    doc = f"{lab.LAB_ROOT}/ansible/bin/ansible-doc -t module sglang.deploy.sglang_ready"
    shown = phase(out, *lab.in_checkout(doc)[2:], env=env)
    assert f"({lab.LAB_SRC}/collections/ansible_collections/sglang/deploy/plugins/modules/sglang_ready.py)" in shown
    where = f"{lab.LAB_ROOT}/ansible/bin/python -c 'import sglang_deploy; print(sglang_deploy.__file__)'"
    assert phase(out, *lab.in_checkout(where)[2:], env=env).split() == [f"{lab.LAB_SRC}/src/sglang_deploy/__init__.py"]

    phase(out, "deploy", "baseline")
    recap = (lab.LAB_OUT / "deploy-baseline.log").read_text().split("PLAY RECAP")[-1]
    assert " changed=0 " in recap and " failed=0 " in recap, recap  # the same profile again changes nothing
    phase(out, "restart", "--repeats", "1")
    (restart,) = [json.loads(line) for line in (lab.LAB_OUT / "restarts.jsonl").read_text().splitlines()]
    assert restart["name"] == "warm-1" and restart["emulated"] is True
    # compare's --bench reaches its benchmarks: the same second level (bench's flags, as a GPU session cuts a trace).
    phase(out, "compare", "baseline", "pcie-ipc", "--repeats", "1", "--bench=--concurrency", "--bench=1,4")
    assert (lab.LAB_OUT / "compare" / "report.md").is_file()
    compared = json.loads((lab.LAB_OUT / "compare" / "comparison.json").read_text())
    assert sorted({row["concurrency"] for row in compared["rows"]}) == [1, 4], compared["rows"]  # --bench's levels

    systemd = lab.gpu_boot._pid(lab.LAB_ROOT.resolve())
    phase(out, "stop", lab.LAB_ROOT)
    assert not Path(f"/proc/{systemd}").exists() and not (lab.LAB_ROOT / "unshare.pid").exists()
    with pytest.raises(OSError):  # the emulated server ended with the lab
        socket.create_connection(("127.0.0.1", int(PORT)), timeout=2).close()
