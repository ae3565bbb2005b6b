#!/usr/bin/env python3
"""Where CI's CPU goes: runs a command (default `./lab test`) with each of its parts in a cgroup of its own and prints
the CPU seconds of every part, of each part's Docker containers, and of the whole machine.

CI runs every part at once on 2 cores, so its time is set by the CPU all parts need together, not by any one part's
wall time (which mostly measures the others). As root, on a host with a cgroup v2 hierarchy (the unified one that
Docker's containers are in):

    python3 benchmarks/ci_cpu.py [--json ci-cpu.json] [-- ./lab test]

`./lab` moves each part into $SGLANG_DEPLOY_CGROUP_DIR/PART when that variable is set; "setup" is the command's own
work outside its parts (the venv, the packages). A container is counted under
the part whose name it carries (molecule-SCENARIO-* under molecule-SCENARIO, sglang-lab-N under
pytest-lab-N, the lab lane that deploys to it, else pytest-lab); others
under "other containers". "the rest" is the machine's busy time that no part and no container took (dockerd,
containerd, runc; anything else running beside it). Container figures are lower bounds: read every 3 s, a
container loses what it used after its last reading.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CLOCK = os.sysconf("SC_CLK_TCK")


def unified_root() -> Path:
    for root in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        if (root / "cgroup.controllers").exists():
            return root
    sys.exit("ci_cpu: no cgroup v2 hierarchy under /sys/fs/cgroup (needs Docker's unified hierarchy, run as root)")


def usage_s(folder: Path) -> float | None:
    try:
        for line in (folder / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) / 1e6
    except OSError:
        return None
    return None


def container_folders(root: Path, cid: str = "*") -> list[Path]:
    """The cgroup folders of the containers ``cid`` names (default: every one). Docker's cgroupfs driver makes
    docker/ID; its systemd driver, system.slice/docker-ID.scope."""
    return [*root.glob(f"docker/{cid}"), *root.glob(f"system.slice/docker-{cid}.scope")]


def busy_s() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(values[i] for i in (0, 1, 2, 5, 6)) / CLOCK  # user, nice, system, irq, softirq


def owner(container: str, parts: list[str]) -> str:
    for part in sorted(parts, key=len, reverse=True):
        if part.startswith("molecule-") and container.startswith(part):
            return part
    if not container.startswith("sglang-lab"):
        return "other containers"
    lane = "pytest-lab-" + container.removeprefix("sglang-lab-")  # ./lab test's lanes: sglang-lab-N's is pytest-lab-N
    return lane if lane in parts else "pytest-lab"


class Sampler:
    """The highest CPU seen per part cgroup and per container (less what a container had used before the run)."""

    def __init__(self, parts_dir: Path, root: Path) -> None:
        self.parts_dir, self.root = parts_dir, root
        self.names: dict[str, str] = {}
        self.before: dict[str, float] = {}
        self.containers: dict[str, float] = {}
        self.parts: dict[str, float] = {}
        self.sample(first=True)

    def sample(self, first: bool = False) -> None:
        for folder in container_folders(self.root):
            used = usage_s(folder) if folder.is_dir() else None
            cid = folder.name.removeprefix("docker-").removesuffix(".scope")
            if used is None:
                continue
            if cid not in self.names:
                inspect = ["docker", "inspect", "-f", "{{.Name}}", cid]
                got = subprocess.run(inspect, capture_output=True, text=True, check=False).stdout
                self.names[cid] = got.strip().lstrip("/") or cid[:12]
                self.before[cid] = used if first else 0.0
            self.containers[cid] = max(self.containers.get(cid, 0.0), used - self.before[cid])
        for folder in self.parts_dir.iterdir():
            if folder.is_dir():
                self.parts[folder.name] = max(self.parts.get(folder.name, 0.0), usage_s(folder) or 0.0)

    def by_part(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for cid, cpu in self.containers.items():
            key = owner(self.names[cid], list(self.parts))
            out[key] = out.get(key, 0.0) + cpu
        return out


def report(args, rc: int, wall: float, busy: float, sampler: Sampler) -> None:
    parts, by_part = sampler.parts, sampler.by_part()
    rows = sorted(set(parts) | set(by_part), key=lambda p: -(parts.get(p, 0.0) + by_part.get(p, 0.0)))
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"\n{now:%Y-%m-%d %H:%M} UTC, `{' '.join(args.command)}`: rc {rc}")
    print(f"wall {wall:.0f} s; the machine busy {busy:.0f} CPU s on {os.cpu_count()} cores\n")
    print("| part | CPU s, its processes | CPU s, its containers | total |\n|---|---|---|---|")
    for part in rows:
        mine, theirs = parts.get(part, 0.0), by_part.get(part, 0.0)
        print(f"| {part} | {mine:.0f} | {theirs:.0f} | {mine + theirs:.0f} |")
    print(f"| the rest | | | {busy - sum(parts.values()) - sum(by_part.values()):.0f} |")
    if not sampler.names:
        print("\nNo container was seen: their CPU is in 'the rest'.")
    if args.json:
        record = {"date_utc": f"{now:%Y-%m-%dT%H:%M:%SZ}", "command": args.command, "rc": rc, "wall_s": wall}
        record |= {"busy_s": busy, "parts": parts, "containers": by_part}
        args.json.write_text(json.dumps(record, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("command", nargs="*", default=["./lab", "test"])
    args = ap.parse_args(argv)
    root = unified_root()
    parts_dir = root / f"sglang-ci-{os.getpid()}"
    (parts_dir / "setup").mkdir(parents=True)  # the command's own work outside its parts (venv, packages)
    sampler = Sampler(parts_dir, root)
    started, busy0 = time.monotonic(), busy_s()

    def join_setup() -> None:
        (parts_dir / "setup" / "cgroup.procs").write_text(str(os.getpid()))

    env = {**os.environ, "SGLANG_DEPLOY_CGROUP_DIR": str(parts_dir)}
    try:
        proc = subprocess.Popen(args.command, env=env, preexec_fn=join_setup)  # noqa: S603,PLW1509 - the command
        while proc.poll() is None:
            time.sleep(3)
            sampler.sample()
        sampler.sample()
        report(args, proc.returncode, time.monotonic() - started, busy_s() - busy0, sampler)
    finally:
        for folder in [*parts_dir.iterdir(), parts_dir]:
            try:
                folder.rmdir()
            except OSError:
                pass  # a cgroup file, or a cgroup with a process still in it: left for the system
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
