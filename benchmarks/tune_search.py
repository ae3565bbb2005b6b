"""docs/tune.md's example search (examples/tune-lab.yml, 27 combinations) on the lab, from the command line, with a
`kill -9` of the controller mid-search, then a re-run that resumes and a third run that promotes the winner.

Prints: candidates expanded / excluded / pruned / run / failed, validation time per pruned candidate, wall time to
the winner (from the first start to the winner's first stored result, the kill and restart included), and the
resume check: results stored when the controller was killed, runs of the re-run, runs lost (at most the one in
flight). Figures are SYNTHETIC (the lab emulator's performance model, group_vars/lab.yml).

    flock /tmp/sglang-docker.lock python benchmarks/tune_search.py [--kill-after 5] [--out DIR]

It holds /tmp/sglang-lab-1.lock (as tests/test_api.py does) while it runs.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEARCH = REPO / "examples" / "tune-lab.yml"


def cli(*args: str) -> list:
    return [sys.executable, "-m", "sglang_deploy.cli", "tune", str(SEARCH), *args]


def records(out: Path) -> list:
    return sorted((out / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kill-after", type=int, default=5, help="kill -9 the controller once this many results are stored"
    )
    ap.add_argument("--out", type=Path, help="result store (default: a fresh temporary folder)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="tune-bench-"))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "collections"), os.environ.get("PYTHONPATH", "")]),
    }

    # Hold the lab container as tests/test_api.py does: another run deploying to it meanwhile spoils the figures.
    lab_lock = open("/tmp/sglang-lab-1.lock", "w")  # noqa: SIM115 (held until the process exits)
    fcntl.flock(lab_lock, fcntl.LOCK_EX)
    t0 = time.time()
    first = subprocess.Popen(
        cli("--out", str(out), "--json"), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while first.poll() is None and len(records(out)) < args.kill_after:
        time.sleep(0.5)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    kept = {p.name: p.stat().st_mtime for p in records(out)}
    stored_at_kill = len(kept)
    killed_s = time.time() - t0
    print(f"kill -9 of the controller after {killed_s:.0f} s with {stored_at_kill} results stored")

    second = subprocess.run(cli("--out", str(out), "--json"), cwd=REPO, env=env, capture_output=True, text=True)
    doc = json.loads(second.stdout)
    outcome = doc["outcome"]
    c = outcome["counts"]
    total = len(records(out))
    print(f"re-run: rc {second.returncode}, {c['new_runs']} runs new, {total} results stored in all")
    remeasured = [n for n, t in kept.items() if (out / "runs" / n).stat().st_mtime != t]
    print(
        f"resume check: {stored_at_kill} results kept, {len(remeasured)} of them measured again, re-run measured "
        f"{c['new_runs']} (= {total} - {stored_at_kill}: {c['new_runs'] == total - stored_at_kill}); the work lost is "
        "the candidate in flight at the kill, at most one deploy"
    )

    target = Path(tempfile.mkdtemp(prefix="tune-promote-")) / "profiles.yml"
    shutil.copy(REPO / "roles" / "sglang" / "defaults" / "main" / "profiles.yml", target)  # the shipped profiles
    third = subprocess.run(
        cli("--out", str(out), "--promote", "lab-fastest", "--into", str(target)),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    print(f"promote run: rc {third.returncode}")
    print(third.stdout)

    winner = outcome["winner"]
    first_win = None
    if winner:
        mine = [json.loads(p.read_text()) | {"mtime": p.stat().st_mtime} for p in records(out)]
        first_win = min(r["mtime"] for r in mine if r["candidate_key"] == winner["key"]) - t0
    print("SYNTHETIC figures (lab emulator):")
    print(
        f"  candidates: {c['expanded']} expanded, {c['excluded']} excluded by constraints, {c['pruned']} pruned, "
        f"{c['run']} run, {c['failed']} failed"
    )
    print(f"  validation per pruned candidate: {outcome['validate_ms_per_pruned']} ms")
    print(f"  wall time to the winner: {first_win:.0f} s" if first_win is not None else "  no winner")
    print(f"  winner: {winner['candidate'] if winner else None}")
    print(f"  store: {out}")
    return 0 if second.returncode == 0 and third.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
