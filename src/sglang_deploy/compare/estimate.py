"""How long a compare or a tune will take: each deploy, each benchmark and the restore, from what earlier runs on
the same hosts took (the controller's results/), else a stated guess. Nothing here prints."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# With no earlier run on the hosts: a lab deploy that restarts the server and the benchmark role (issue 52: 3-repeat
# compares on the lab took 390-492 s for 6 deploys with their benchmarks and a restore: ~70 s a measured deploy).
GUESS_DEPLOY_S = 45.0
GUESS_BENCH_S = 25.0
NEWEST = 50  # files read per source: the newest ones
MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class Timings:
    """Typical seconds of one deploy without its benchmark, one benchmark, one restore deploy; runs: how many earlier
    runs they come from (0: the guesses)."""

    deploy_s: float = GUESS_DEPLOY_S
    bench_s: float = GUESS_BENCH_S
    restore_s: float = GUESS_DEPLOY_S
    runs: int = 0


def _json(path: Path):
    from sglang_deploy.paths import read_bounded

    try:
        return json.loads(read_bounded(path, MAX_BYTES, "a result"))
    except (OSError, ValueError):
        return None


def _seconds(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6 else None


def _newest(pattern_root: Path, pattern: str) -> list:
    return sorted(pattern_root.glob(pattern), reverse=True)[:NEWEST] if pattern_root.is_dir() else []


def _host_folders(results: Path, hosts) -> list:
    """The result folders of ``hosts`` (None: of every host the controller keeps results of)."""
    if hosts is not None:
        return [results / str(h) for h in sorted(hosts)]
    runs = ("compare-", "tune-", "history")
    return (
        sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(runs)) if results.is_dir() else []
    )


def bench_seconds(results: Path, hosts) -> list:
    """Seconds each of the hosts' newest benchmarks took (started_at to finished_at of its result file); hosts None:
    any host's."""
    found = []
    for folder in _host_folders(results, hosts):
        for path in _newest(folder, "*.json"):
            doc = _json(path)
            try:
                took = (
                    datetime.fromisoformat(doc["finished_at"]) - datetime.fromisoformat(doc["started_at"])
                ).total_seconds()
            except (TypeError, KeyError, ValueError):
                continue
            if _seconds(took):
                found.append(took)
    return found


def run_seconds(results: Path, hosts) -> tuple[list, list]:
    """(seconds of each measured deploy, benchmark included; seconds of each deploy without one) of the earlier
    compares (comparison.json: runs, setups, restores) and tunes (runs/*.json: elapsed_s) on any of the hosts
    (None: on any host)."""

    def on(where) -> bool:
        return hosts is None or bool(set(map(str, hosts)) & set(where or {}))

    measured: list = []
    plain: list = []
    for path in _newest(results, "compare-*/comparison.json"):
        doc = _json(path)
        if not isinstance(doc, dict):
            continue
        runs = [r for rs in (doc.get("runs") or {}).values() if isinstance(rs, list) for r in rs]
        for into, rows in ((measured, runs), (plain, (doc.get("setups") or []) + (doc.get("restores") or []))):
            for r in rows:
                if isinstance(r, dict) and on(r.get("hosts")) and _seconds(r.get("elapsed_s")):
                    into.append(float(r["elapsed_s"]))
    for folder in _newest(results, "tune-*"):
        for path in _newest(folder / "runs", "*.json"):
            r = _json(path)
            if isinstance(r, dict) and on(r.get("measured")) and _seconds(r.get("elapsed_s")):
                measured.append(float(r["elapsed_s"]))
    return measured, plain


def timings(results: Path, hosts) -> Timings:
    """The typical (median) deploy, benchmark and restore on these hosts (None: any) from the earlier runs under
    ``results``; the guesses for what no run measured. The benchmark results' own times only split a measured
    deploy: they leave out the role's work around the sweep (the quality gate, fetching the result)."""
    measured, plain = run_seconds(results, hosts)
    restore = statistics.median(plain) if plain else None
    if not measured:
        return Timings(restore or GUESS_DEPLOY_S, GUESS_BENCH_S, restore or GUESS_DEPLOY_S, len(plain))
    run = statistics.median(measured)
    benches = bench_seconds(results, hosts)
    bench = min(statistics.median(benches) if benches else GUESS_BENCH_S, run / 2)
    return Timings(run - bench, bench, restore or run - bench, len(measured) + len(plain))


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def estimate(deploys: int, benchmarks: int, restores: int, t: Timings) -> dict:
    """The whole run's seconds and a line that says what they are made of and where the figures come from."""
    total = deploys * t.deploy_s + benchmarks * t.bench_s + restores * t.restore_s
    parts = [f"{deploys} deploys x ~{t.deploy_s:.0f} s", f"{benchmarks} benchmarks x ~{t.bench_s:.0f} s"]
    parts += [f"{restores} restore x ~{t.restore_s:.0f} s"] if restores else []
    source = f"from {t.runs} earlier runs on these hosts" if t.runs else "no earlier run on these hosts: a guess"
    return {
        "total_s": round(total, 1),
        "deploys": deploys,
        "benchmarks": benchmarks,
        "restores": restores,
        "deploy_s": round(t.deploy_s, 1),
        "bench_s": round(t.bench_s, 1),
        "restore_s": round(t.restore_s, 1),
        "earlier_runs": t.runs,
        "text": f"about {_duration(total)}: {', '.join(parts)}; {source}",
    }
