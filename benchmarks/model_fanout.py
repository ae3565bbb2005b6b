#!/usr/bin/env python3
"""Time the sglang_model role putting one checkpoint on three lab containers: every host copying from the
controller (sglang_model_fanout false) against the fan-out (the controller into one host, then host to host).

    python benchmarks/model_fanout.py --image "$(docker ps --filter name=sglang-lab --format '{{.Image}}' | head -n 1)"

Makes a checkpoint with tools/make_models.py (--shards x --shard-mb), locks it, starts three containers of the lab
image on a Docker network of their own (removed at the end), then runs the role --repeats times per mode, in
alternating order, each time on empty hosts, and prints min / median / max seconds of each whole ansible-playbook
run. Lab figures: containers on one machine, so every "network" copy shares its disk and CPUs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import make_models  # noqa: E402

from sglang_deploy.locks import model_lock  # noqa: E402

NETWORK = "sglang-model-bench"
HOSTS = [f"sglang-model-bench-{i}" for i in (1, 2, 3)]
PLAYBOOK = """---
- name: Put the checkpoint on the hosts
  hosts: all
  gather_facts: false
  tasks:
    - name: Install it
      ansible.builtin.include_role:
        name: sglang_model
"""


def docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, stdout=subprocess.DEVNULL)


def start(image: str) -> None:
    docker("network", "create", NETWORK)
    for host in HOSTS:
        docker(
            "run", "-d", "--name", host, "--network", NETWORK, "--cap-add", "SYS_ADMIN",
            "--security-opt", "seccomp=unconfined", "--tmpfs", "/run", "--tmpfs", "/run/lock",
            "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--cgroupns", "host", "-e", "container=docker",
            image, "/lib/systemd/systemd",
        )  # fmt: skip


def stop() -> None:
    for host in HOSTS:
        subprocess.run(["docker", "rm", "-f", host], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["docker", "network", "rm", NETWORK], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(work: Path, source: Path, fanout: bool) -> float:
    for host in HOSTS:
        docker("exec", host, "rm", "-rf", "/data/models")
    extra = {
        "sglang_model_lock": "bench",
        "sglang_model_locks_dir": str(work / "models"),
        "sglang_model_source_path": str(source),
        "sglang_model_path": "/data/models/bench",
        "sglang_model_reserve_gb": 0.1,
        "sglang_model_fanout": fanout,
    }
    argv = ["ansible-playbook", "-i", str(work / "inventory.yml"), str(work / "play.yml")]
    for key, value in extra.items():
        argv += ["-e", f"{key}={value}" if not isinstance(value, bool) else f'{{"{key}": {str(value).lower()}}}']
    begin = time.monotonic()
    subprocess.run(
        argv, check=True, cwd=REPO, stdout=subprocess.DEVNULL, env={**os.environ, "ANSIBLE_FORCE_COLOR": "0"}
    )
    return time.monotonic() - begin


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", required=True, help="the lab image (systemd as PID 1)")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--shard-mb", type=float, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still removes the containers
    work = Path(tempfile.mkdtemp(prefix="model-fanout-", dir="/var/tmp"))
    try:
        source = make_models.make_models(work / "src", args.shards, int(args.shard_mb * (1 << 20)), tokenizer=False)[
            "dense"
        ]
        model_lock.lock_folder("bench", source, work / "models")
        (work / "play.yml").write_text(PLAYBOOK)
        hosts = "".join(f"    {h}:\n" for h in HOSTS)
        (work / "inventory.yml").write_text(
            f"all:\n  vars:\n    ansible_connection: community.docker.docker\n"
            f"    ansible_python_interpreter: /usr/bin/python3\n  hosts:\n{hosts}"
        )
        start(args.image)
        times: dict[str, list[float]] = {"controller to each host": [], "fan-out": []}
        for _ in range(args.repeats):
            for label, fanout in (("controller to each host", False), ("fan-out", True)):
                times[label].append(run(work, source, fanout))
                print(f"  {label}: {times[label][-1]:.1f} s", flush=True)
        size = sum(p.stat().st_size for p in source.iterdir()) / 1e6
        print(f"{len(HOSTS)} hosts, checkpoint {size:.0f} MB, {args.repeats} runs each, seconds min / median / max:")
        for label, values in times.items():
            print(f"  {label:24} {min(values):6.1f} {statistics.median(values):6.1f} {max(values):6.1f}")
    finally:
        stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
