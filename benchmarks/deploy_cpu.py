#!/usr/bin/env python3
"""What one lab deploy costs in wall time and in the machine's CPU, for two settings side by side.

Runs COMMAND (default: a forced redeploy of baseline on the lab, `ansible-playbook site.yml -e profile=baseline -e
sglang_fleet_force_restart=true`) REPEATS times under each setting, alternating A, B, B, A, ..., and prints min /
median / max of the wall time and of the busy CPU seconds of the whole machine (/proc/stat: the controller, the lab
container, dockerd; steal time left out). A setting is an environment assignment (ANSIBLE_PIPELINING=True) or a
checkout to run the command in (a clone of the commit before a change, against this one), with that checkout's src/
first on PYTHONPATH so its plugins import its own package, not the venv's editable install:

    python3 benchmarks/deploy_cpu.py --a ANSIBLE_PIPELINING=False --b ANSIBLE_PIPELINING=True [--repeats 3] [-- CMD...]
    python3 benchmarks/deploy_cpu.py --a /tmp/before --b . --repeats 3

Run it from the checkout with the lab up (./lab setup) and nothing else busy: CI's parts share 2 cores, so what one
deploy costs in CPU is what it adds to CI's time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

from ci_cpu import busy_s  # the machine's busy CPU seconds, as CI's figures count them

DEFAULT = ["ansible-playbook", "site.yml", "-e", "profile=baseline", "-e", "sglang_fleet_force_restart=true"]


def run_once(cmd: list[str], setting: str) -> tuple[float, float]:
    env, cwd = dict(os.environ), None
    if os.path.isdir(setting):
        cwd = setting
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [os.path.join(setting, "src"), os.path.join(setting, "collections"), env.get("PYTHONPATH")])
        )
    else:
        name, _, value = setting.partition("=")
        env[name] = value
    cpu0, t0 = busy_s(), time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.monotonic() - t0, busy_s() - cpu0
    if done.returncode:
        sys.exit(f"deploy_cpu: {' '.join(cmd)} with {setting} failed (rc {done.returncode}): {done.stderr[-2000:]}")
    return wall, cpu


def spread(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="first setting: NAME=VALUE, or a checkout's folder")
    ap.add_argument("--b", required=True, help="second setting: NAME=VALUE, or a checkout's folder")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("cmd", nargs="*", help="the deploy command (default: a forced redeploy of baseline on the lab)")
    args = ap.parse_args(argv)
    if args.a == args.b:
        ap.error("--a and --b are the same setting: nothing to compare")
    for setting in (args.a, args.b):
        if "=" not in setting and not os.path.isdir(setting):
            ap.error(f"{setting!r} is neither NAME=VALUE nor a folder")
    cmd = args.cmd or DEFAULT
    order = [args.a, args.b, args.b, args.a] * ((args.repeats + 1) // 2)
    order = [s for i, s in enumerate(order) if order[: i + 1].count(s) <= args.repeats]
    runs: dict[str, list[tuple[float, float]]] = {args.a: [], args.b: []}
    print(f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores: {' '.join(cmd)}")
    for setting in order:
        wall, cpu = run_once(cmd, setting)
        runs[setting].append((wall, cpu))
        print(f"  {setting}: {wall:.1f} s wall, {cpu:.1f} CPU s", flush=True)
    print("setting | wall s min / median / max | machine CPU s min / median / max")
    for setting, got in runs.items():
        print(f"{setting} | {spread([w for w, _ in got])} | {spread([c for _, c in got])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
