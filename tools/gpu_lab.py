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

The machinery of fetch, pack, boot, exec and stop is tools/gpu_boot.py's.

A GPU session's phases, one device call or more each, from the repository root of the device's copy once
tools/gpu_stage.py's parts are in /root/stage (`gpu_stage.py plan`); each installs the staged SGLang into /root/site
first where it is not there yet, and writes its logs, a `phase NAME: SECONDS s rc N` line per step (phases.txt) and
its files to --out ($OUT, the call's download folder). --dry-run prints the commands and runs none.

    python tools/gpu_lab.py smoke                    # tests/gpu/test_smoke.py on the image's Python and torch
    python tools/gpu_lab.py suite FILE...            # tests/gpu files one by one within one call's 10 minutes
    python tools/gpu_lab.py parity [--timeout S] SOURCE [GPU_PARITY_ARGS...]   # benchmarks/gpu_parity.py
    python tools/gpu_lab.py up [--profile P] [-e VAR=VALUE]...   # copy build/gpu-src to /root/gpu-src, boot the lab from
                                                                 # build/gpu-lab (this `pack`), first deploy of P (site.yml)
    python tools/gpu_lab.py deploy PROFILE [--name N] [-e VAR=VALUE]...   # site.yml in the lab again
    python tools/gpu_lab.py restart [--caches warm,cold] [--repeats 3]     # restarts through the unit, timed
    python tools/gpu_lab.py traffic [--duration 90] [--rate 3]            # a seeded mixed load, captured as a trace
    python tools/gpu_lab.py compare PROFILE... [--repeats 3] [--trace [FILE]]   # sglang-deploy compare in the lab

The lab's phases log to /root/labout (bound into the lab, kept between calls) and copy it, with the unit's journal,
to --out. End a session with `stop /root/gpulab`.

The CPU stand-in (tests/test_gpu_lab_standin.py) runs the lab's phases on a machine without a GPU with three
variables: SGLANG_GPU_LAB_HOME (every /root place under that folder), SGLANG_GPU_LAB_INVENTORY=inventory/cpu-lab.yml
(the emulated server: no staged SGLang, no models) and SGLANG_GPU_LAB_PORT (that inventory's sglang_port).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import gzip
import importlib.util
import json
import os
import random
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpu_boot", Path(__file__).resolve().parent / "gpu_boot.py")
gpu_boot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_boot)
LabError, REPO = gpu_boot.LabError, gpu_boot.REPO


# A GPU session's places on the device machine: under /root, or under SGLANG_GPU_LAB_HOME where that is set (the CPU
# stand-in, tests/test_gpu_lab_standin.py, keeps them in a folder of its own).
HOME = Path(os.environ.get("SGLANG_GPU_LAB_HOME") or "/root")
STAGE = HOME / "stage"  # tools/gpu_stage.py's parts, carried there (gpu_stage.py plan)
SITE = HOME / "site"  # where gpu_stage.py install puts SGLang: PYTHONPATH of tests/gpu and of the parity
IMAGE_PYTHON = "/opt/torch/.venv/bin/python"  # the image's Python, with its torch
GPU_OUT = HOME / "gpu-out"  # tests/gpu's --gpu-out
LAB_ROOT = HOME / "gpulab"  # the lab's root (boot, exec, stop)
LAB_SRC = HOME / "gpu-src"  # the checkout the lab's playbook runs from: a copy of the carried tree
LAB_OUT = HOME / "labout"  # bound into the lab: the lab phases' logs and results, kept between calls
KEYFILE = HOME / "gpulab.key"  # the lab server's API key (the inventory reads SGLANG_LAB_API_KEY)
# The lab's inventory: the GPU machine's, or SGLANG_GPU_LAB_INVENTORY where that is set (the CPU stand-in's
# inventory/cpu-lab.yml: an emulated server, which needs neither the staged SGLang nor the models).
GPU_INVENTORY = "inventory/gpu-lab.yml"
INVENTORY = os.environ.get("SGLANG_GPU_LAB_INVENTORY") or GPU_INVENTORY
# The lab server's port on the machine's network, which the lab shares: the inventory's sglang_port (the stand-in's
# inventory/cpu-lab.yml keeps off 30000, where the docker lab's server listens on a CI machine).
PORT = int(os.environ.get("SGLANG_GPU_LAB_PORT") or 30000)
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
    """A word with * as a shell expands it: the paths it matches, or the word itself where none does. A word with
    whitespace (a command line for bash -c, an extra variable) is never a glob."""
    return (sorted(glob.glob(word)) or [word]) if "*" in word and not re.search(r"\s", word) else [word]


LAB_ENV = {
    "SGLANG_LAB_API_KEY": FileText(KEYFILE),
    "SGLANG_DEPLOY_RESULTS": f"{LAB_OUT}/results",
    "ANSIBLE_CONFIG": f"{LAB_SRC}/ansible.cfg",
    # The package and the collection (the link `up` makes) of the lab's own checkout, whatever tree boot ran from (its
    # .pth names that one, gone by a later call): sglang-deploy compare and restart-unit import both.
    "PYTHONPATH": f"{LAB_SRC}/src{os.pathsep}{LAB_SRC}/collections",
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
    """This checkout as the collection sglang.deploy (the collections/ link a carried tree lacks: tests/gpu and
    gpu_parity.py import its module_utils), and the staged SGLang installed into SITE, once per machine
    (gpu_stage.py install also joins the wheels into STAGE/whl, the GPU lab inventory's wheelhouse)."""
    s.run([sys.executable, "tools/fetch_collections.py", "--self-only"])
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
    work = HOME / f"parity-{int(time.time())}"
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
    playbook = f"{LAB_ROOT}/ansible/bin/ansible-playbook -i {INVENTORY} site.yml {args}"
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


def up(s: Session, profile: str, tree: str, parts: str, extra: tuple = ()) -> int:
    """A copy of the tree as the lab's checkout, the staged SGLang, a new API key, the models, the lab booted and
    the first deploy (extra: its -e VAR=VALUE)."""
    s.run(["rm", "-rf", LAB_SRC])
    if s.run(["cp", "-r", tree, LAB_SRC]):
        raise LabError(f"no {tree} to copy: carry it (a git archive of the commit to run)")
    # The playbooks name their modules sglang.deploy.*: the lab's checkout is that collection (a git archive has no link).
    s.run([sys.executable, LAB_SRC / "tools" / "fetch_collections.py", "--self-only"])
    gpu = INVENTORY == GPU_INVENTORY  # a CPU stand-in's emulated server needs neither SGLang nor the models
    if gpu:
        ensure_site(s)

    def new_key() -> None:
        KEYFILE.unlink(missing_ok=True)
        fd = os.open(KEYFILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(24) + "\n")

    s.do(f"a new API key into {KEYFILE} (0600)", new_key)
    if gpu:
        s.run([sys.executable, LAB_SRC / "tools" / "make_models.py", "/data/models"], log=s.logs / "models.log")
    boot_cmd = [sys.executable, "tools/gpu_lab.py", "boot", parts, LAB_ROOT, "--bind", LAB_OUT]
    if s.run(boot_cmd, phase="boot", log=s.logs / "boot.txt", tail=2):
        collect(s, journal=False)
        return 1
    return deploy(s, profile, "deploy-first", extra)


def restart(s: Session, caches: list[str], repeats: int) -> int:
    """repeats rounds of one restart through the unit per caches kind (warm: kept, cold: emptied first), each one
    JSON line in LAB_OUT/restarts.jsonl (restart-unit)."""
    if set(caches) - {"warm", "cold"}:
        raise LabError(f"--caches takes warm and cold, not {','.join(caches)}")
    failed = 0
    for i in range(1, repeats + 1):
        for kind in caches:
            name = f"{kind}-{i}"
            shell = f"python3 tools/gpu_lab.py restart-unit {name} {kind}"
            log, errors = s.logs / "restarts.jsonl", s.logs / f"{name}.err"
            if s.run(in_checkout(shell), phase=name, log=log, append=True, errors=errors, env=LAB_ENV, tail=1):
                failed += 1
    collect(s)
    return int(failed > 0)


def restart_unit(name: str, caches: str, unit: str = "sglang", url: str = f"http://127.0.0.1:{PORT}") -> dict:
    """Inside the lab: one `systemctl restart` of the unit (its caches emptied first when cold), the readiness wait
    of the sglang_ready module with the unit watched, and where the start went, read from the journal as the role
    reads it (module_utils/startup.py)."""
    # The lab's checkout's collection, through its collections/ on PYTHONPATH (LAB_ENV).
    from ansible_collections.sglang.deploy.plugins.module_utils import readiness, startup

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


def mixed_load(duration: float, rate: float, seed: int) -> list[dict]:
    """A known mixed load as Mooncake trace lines: Poisson arrivals at rate for duration seconds; half chats behind
    one of 4 shared 512-token system prompts (600-1500 tokens, 32-256 out), a third short questions of their own
    (50-400 tokens, 16-128 out), the rest documents behind one of 2 shared 1024-token prefixes (1800-2500 tokens,
    64-200 out: under journald's 48 KiB line at the capture's log level)."""
    rng, t, lines, i = random.Random(seed), 0.0, [], 0
    while True:
        t += rng.expovariate(rate)
        if t > duration:
            return lines
        kind = rng.random()
        if kind < 0.5:
            n_in, n_out, shared = rng.randint(600, 1500), rng.randint(32, 256), [rng.randrange(4)]
        elif kind < 0.83:
            n_in, n_out, shared = rng.randint(50, 400), rng.randint(16, 128), []
        else:
            n_in, n_out, shared = (
                rng.randint(1800, 2500),
                rng.randint(64, 200),
                [10 + 2 * (g := rng.randrange(2)), 11 + 2 * g],
            )
        own = range(len(shared), -(-n_in // 512))
        ids = shared + [1000 + 8 * i + j for j in own]
        lines.append({"timestamp": round(t * 1000, 3), "input_length": n_in, "output_length": n_out, "hash_ids": ids})
        i += 1


def traffic(s: Session, duration: float, rate: float, seed: int) -> int:
    """`sglang-deploy traffic capture` of the lab's server while `sglang-deploy bench` replays a seeded mixed load
    (mixed_load, LAB_OUT/load.jsonl) on it: the captured trace in LAB_OUT/captured.jsonl, its summary and plot
    beside it. The load starts once the capture has switched request logging on (SGLang's journal says so)."""
    load, captured = LAB_OUT / "load.jsonl", LAB_OUT / "captured.jsonl"

    def write_load() -> None:
        load.write_text("".join(json.dumps(line) + "\n" for line in mixed_load(duration, rate, seed)))

    s.do(f"a seeded mixed load (seed {seed}, {rate} req/s for {duration:g} s) into {load}", write_load)
    cli = "python -m sglang_deploy.cli"
    capture = shlex.join(
        [
            "traffic",
            "capture",
            "--duration",
            str(duration + 60),
            "--max-requests",
            "$N",
            "--out",
            str(captured),
            "-i",
            INVENTORY,
        ]
    ).replace("'$N'", '"$N"')
    bench = shlex.join(
        [
            "bench",
            "--url",
            f"http://127.0.0.1:{PORT}",
            "--api-key-env",
            "SGLANG_LAB_API_KEY",
            "--dataset-name",
            "trace",
            "--dataset-path",
            str(load),
            "--warmup",
            "0",
            "--max-concurrency",
            "64",
        ]
    )
    shell = (
        f"export PATH={LAB_ROOT}/ansible/bin:$PATH; rm -f {captured}; N=$(wc -l < {load}); T=$(date +%s); "
        f"{cli} {capture} & cap=$!; on=0; for i in $(seq 120); do kill -0 $cap 2>/dev/null || break; "
        "journalctl -u sglang --since @$T -o cat | grep -q 'log_requests=True' && { on=1; break; }; sleep 1; done; "
        "[ $on = 1 ] || { echo 'the capture did not turn request logging on within 120 s: no load sent' >&2; "
        "kill $cap 2>/dev/null; wait $cap; exit 1; }; "
        f"{cli} {bench} > {LAB_OUT}/load-bench.txt; rc=$?; wait $cap || rc=1; "
        f"{cli} traffic summary {captured} --plot {LAB_OUT}/captured.png; exit $rc"
    )
    rc = s.run(in_checkout(shell), phase="traffic", log=s.logs / "traffic.log", env=LAB_ENV, tail=25)
    collect(s)
    return rc


def compare(s: Session, profiles: list[str], repeats: int, trace: str = "", bench: tuple = ()) -> int:
    """sglang-deploy compare of the profiles inside the lab (its Ansible on PATH), its report under LAB_OUT/compare;
    with a trace, on that trace (and bench's other workload flags, e.g. --num-prompts 120)."""
    words = ["compare", *profiles, "--repeats", str(repeats), "-i", INVENTORY]
    if trace:
        words += ["--dataset-name", "trace", "--dataset-path", trace]
    cli = shlex.join([*words, *bench])
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
    lab = args.cmd in ("up", "deploy", "restart", "traffic", "compare")
    s = Session(LAB_OUT if lab else out, out, args.dry_run)
    if args.cmd in ("smoke", "suite"):
        return suite(s, getattr(args, "files", ["test_smoke.py"]), getattr(args, "budget", CALL_BUDGET))
    if args.cmd == "parity":
        return parity(s, args.source, args.args, args.timeout)
    if args.cmd == "up":
        return up(s, args.profile, args.tree, args.parts, tuple(args.extra))
    if args.cmd == "deploy":
        return deploy(s, args.profile, args.name, tuple(args.extra))
    if args.cmd == "restart":
        return restart(s, args.caches.split(","), args.repeats)
    if args.cmd == "traffic":
        return traffic(s, args.duration, args.rate, args.seed)
    return compare(s, args.profiles, args.repeats, args.trace, tuple(args.bench))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch").add_argument("work", type=Path)
    p = sub.add_parser("pack")
    p.add_argument("work", type=Path)
    p.add_argument("parts", type=Path)
    p.add_argument(
        "--part-bytes", type=int, default=gpu_boot.PART_BYTES, help=f"bytes per part ({gpu_boot.PART_BYTES})"
    )
    p = sub.add_parser("boot")
    p.add_argument("parts", type=Path)
    p.add_argument("root", type=Path)
    p.add_argument("--bind", action="append", default=[], help="a host folder shown as itself inside (repeatable)")
    p.add_argument("--python", default=sys.executable, help="interpreter of the Ansible venv (this one)")
    p.add_argument(
        "--timeout",
        type=float,
        default=gpu_boot.BOOT_TIMEOUT,
        help=f"seconds to reach running ({gpu_boot.BOOT_TIMEOUT:.0f})",
    )
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
    p.add_argument("-e", dest="extra", action="append", default=[], metavar="VAR=VALUE", help="the deploy's extra vars")
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
    p = sub.add_parser("traffic", parents=[phase], help="a seeded mixed load on the lab's server, captured")
    p.add_argument("--duration", type=float, default=90.0, help="seconds of load (90)")
    p.add_argument("--rate", type=float, default=3.0, help="requests a second, Poisson (3)")
    p.add_argument("--seed", type=int, default=7, help="the load's seed (7)")
    p = sub.add_parser("compare", parents=[phase], help="sglang-deploy compare in the lab")
    p.add_argument("profiles", nargs="+", metavar="PROFILE")
    p.add_argument("--repeats", type=int, default=3, help="runs of each profile (3)")
    p.add_argument(
        "--trace",
        nargs="?",
        const=str(LAB_OUT / "captured.jsonl"),
        default="",
        help=f"compare on a trace (traffic's capture: {LAB_OUT}/captured.jsonl)",
    )
    p.add_argument(
        "--bench",
        action="append",
        default=[],
        metavar="FLAG",
        help="more of bench's workload flags, each its own --bench: --bench=--num-prompts --bench=120",
    )
    args = ap.parse_args(argv)
    try:
        if hasattr(args, "dry_run"):
            return run_phase(args)
        if args.cmd == "fetch":
            gpu_boot.fetch(args.work)
        elif args.cmd == "pack":
            for part in gpu_boot.pack(args.work, args.parts, args.part_bytes):
                print(f"{part} {part.stat().st_size}")
        elif args.cmd == "boot":
            binds = [str(Path(b).resolve()) for b in args.bind]
            print(gpu_boot.boot(args.parts.resolve(), args.root.resolve(), binds, args.python, args.timeout))
        elif args.cmd == "exec":
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            return gpu_boot.nsenter(args.root.resolve(), command).returncode
        elif args.cmd == "restart-unit":
            print(json.dumps(restart_unit(args.name, args.caches)))
        else:
            gpu_boot.stop(args.root.resolve())
    except LabError as exc:
        print(f"gpu_lab {args.cmd}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
