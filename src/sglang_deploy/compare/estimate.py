"""How long a compare or a tune will take: each deploy, each benchmark and the restore, from what earlier runs on
the same hosts took (the controller's results/: compares, tunes and the deploys each host keeps in its
deploys.json), else a stated guess. Nothing here prints."""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils import files
from ansible_collections.sglang.deploy.plugins.module_utils.host_record import NAME_RE

# With no earlier run on the hosts: a lab deploy that restarts the server and the benchmark role (issue 52: 3-repeat
# compares on the lab took 390-492 s for 6 deploys with their benchmarks and a restore: ~70 s a measured deploy).
GUESS_DEPLOY_S = 45.0
GUESS_BENCH_S = 25.0
NEWEST = 50  # files read per source: the newest ones
MAX_BYTES = 64 << 20
# results/<host>/deploys.json: the newest deploys that restarted the host's server in a run that passed, newest last.
DEPLOYS = "deploys.json"
KEEP_DEPLOYS = 20
MAX_DEPLOYS_BYTES = 256 << 10  # KEEP_DEPLOYS entries of MAX_TEXT texts fit
MAX_TEXT = 4096  # characters of a deploy's artifacts path or time
# The results folder's own folders (compares, tunes, records, the quality gate's fingerprints): no host's.
RUNS = ("compare-", "tune-", "history", "quality")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}\Z")  # a host folder's name: an inventory host name


@dataclass(frozen=True)
class Timings:
    """Typical seconds of one deploy without its benchmark, one benchmark, one restore deploy; how many earlier runs
    of compares and tunes and other deploys (the hosts' deploys.json) they come from (none: the guesses);
    bench_guessed: the benchmark is the guess, no earlier deploy with a benchmark measured it."""

    deploy_s: float = GUESS_DEPLOY_S
    bench_s: float = GUESS_BENCH_S
    restore_s: float = GUESS_DEPLOY_S
    runs: int = 0
    deploys: int = 0
    bench_guessed: bool = False


def _json(path: Path, max_bytes: int = MAX_BYTES):
    from sglang_deploy.paths import read_bounded

    try:
        return json.loads(read_bounded(path, max_bytes, "a result"))
    except (OSError, ValueError, RecursionError):
        return None


def _seconds(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6 else None


def _newest(pattern_root: Path, pattern: str, but: str = "") -> list:
    """The last NEWEST paths by name under ``pattern_root`` that match ``pattern`` (a time first in a name: the
    newest), the name ``but`` left out."""
    found = pattern_root.glob(pattern) if pattern_root.is_dir() else []
    return sorted((p for p in found if p.name != but), reverse=True)[:NEWEST]


def _host_folders(results: Path, hosts) -> list:
    """The result folders of ``hosts`` (None: of every host the controller keeps results of)."""
    if hosts is not None:
        return [results / str(h) for h in sorted(hosts)]
    return (
        sorted(p for p in results.iterdir() if p.is_dir() and not p.name.startswith(RUNS)) if results.is_dir() else []
    )


def bench_seconds(results: Path, hosts) -> list:
    """Seconds each of the hosts' newest benchmarks took (started_at to finished_at of its result file); hosts None:
    any host's."""
    found = []
    for folder in _host_folders(results, hosts):
        for path in _newest(folder, "*.json", but=DEPLOYS):
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


def run_seconds(results: Path, hosts) -> tuple[list, list, set]:
    """(seconds of each measured deploy, benchmark included; seconds of each deploy without one; the artifacts of
    these runs) of the earlier compares (comparison.json: runs, setups, restores) and tunes (runs/*.json:
    elapsed_s) on any of the hosts (None: on any host)."""

    def on(where) -> bool:
        return hosts is None or bool(set(map(str, hosts)) & set(where or {}))

    measured: list = []
    plain: list = []
    seen: set = set()
    for path in _newest(results, "compare-*/comparison.json"):
        doc = _json(path)
        if not isinstance(doc, dict):
            continue
        runs = [r for rs in (doc.get("runs") or {}).values() if isinstance(rs, list) for r in rs]
        for into, rows in ((measured, runs), (plain, (doc.get("setups") or []) + (doc.get("restores") or []))):
            for r in rows:
                if isinstance(r, dict) and on(r.get("hosts")) and _seconds(r.get("elapsed_s")):
                    into.append(float(r["elapsed_s"]))
                    seen.add(r.get("artifacts"))
    for folder in _newest(results, "tune-*"):
        for path in _newest(folder / "runs", "*.json"):
            r = _json(path)
            if isinstance(r, dict) and on(r.get("measured")) and _seconds(r.get("elapsed_s")):
                measured.append(float(r["elapsed_s"]))
                seen.add(r.get("artifacts"))
    return measured, plain, {a for a in seen if isinstance(a, str) and a}


def record_deploys(results: Path, run, now: datetime | None = None) -> list:
    """Add ``run`` (an api.results.RunResult of site.yml), a deploy that passed, to results/<host>/deploys.json of
    each host whose server it restarted (outcome deployed): when it ended (``now``), its seconds (the whole playbook
    run), that outcome, whether it benchmarked the host, the profile and its artifacts (which name the run: a roll
    of several hosts counts once). A failed run, or one that restarted nothing, adds nothing: it measured no
    deploy. Each file keeps the newest KEEP_DEPLOYS and is written whole (files.write_file); a host folder or file
    that is a link, or cannot be written, is left as it is (the deploy stands). Returns the files written."""
    if not run.ok or not isinstance(run.outcomes, list):
        return []
    benched = run.data.get("sglang_benchmark")
    benched = benched if isinstance(benched, dict) else {}
    when = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    written = []
    for row in run.outcomes:
        host = row.get("host") if isinstance(row, dict) else None
        if (
            not (isinstance(host, str) and _HOST.match(host) and not host.startswith(RUNS))
            or row.get("outcome") != "deployed"
        ):
            continue
        entry = {
            "finished_at": when,
            "elapsed_s": round(run.elapsed_s, 1),
            "outcome": row["outcome"],
            "benchmarked": host in benched,
            "profile": run.profile or "",
            "artifacts": run.artifacts,
        }
        folder = results / host
        try:
            files.check_folder(str(folder), [DEPLOYS])
            doc = json.dumps([*_deploys(folder / DEPLOYS), entry][-KEEP_DEPLOYS:], indent=1) + "\n"
            written.append(files.write_file(doc, str(folder / DEPLOYS), mode=0o644))
        except (OSError, ValueError):
            continue
    return written


def _a_deploy(d) -> bool:
    """Whether ``d``, read back from a deploys.json, is a deploy as record_deploys writes it."""
    if not isinstance(d, dict) or not _seconds(d.get("elapsed_s")) or not isinstance(d.get("benchmarked"), bool):
        return False
    texts = [d.get(k) for k in ("finished_at", "profile", "artifacts")]
    if d.get("outcome") != "deployed" or not all(isinstance(t, str) and len(t) <= MAX_TEXT for t in texts):
        return False
    try:
        datetime.fromisoformat(d["finished_at"])
    except ValueError:
        return False
    return d["profile"] == "" or bool(NAME_RE.match(d["profile"]))


def _deploys(path: Path) -> list:
    """The deploys of a deploys.json (its newest KEEP_DEPLOYS) that are what record_deploys writes; a file that is
    no such list, larger than MAX_DEPLOYS_BYTES, or unreadable gives none."""
    doc = _json(path, MAX_DEPLOYS_BYTES)
    return [d for d in doc[-KEEP_DEPLOYS:] if _a_deploy(d)] if isinstance(doc, list) else []


def deploy_seconds(results: Path, hosts, counted: set = frozenset()) -> tuple[list, list]:
    """(seconds of each deploy that restarted and benchmarked; of each that restarted without a benchmark) from the
    deploys.json of the hosts (None: of any host), each run once, leaving out the runs whose artifacts are in
    ``counted`` (a compare's or a tune's, read from their own files)."""
    measured: list = []
    plain: list = []
    seen = set(counted)
    for folder in _host_folders(results, hosts):
        for d in _deploys(folder / DEPLOYS):
            run = d["artifacts"] or (d["finished_at"], d["elapsed_s"], d["profile"])
            if run in seen:
                continue
            seen.add(run)
            (measured if d["benchmarked"] else plain).append(float(d["elapsed_s"]))
    return measured, plain


def timings(results: Path, hosts) -> Timings:
    """The typical (median) deploy, benchmark and restore on these hosts (None: any) from the earlier runs under
    ``results`` (compares, tunes, and the deploys in deploys.json: one that benchmarked is a measured deploy, one
    without a benchmark a plain one); the guesses for what no run measured. The benchmark results' own times only
    split a measured deploy: they leave out the role's work around the sweep (the quality gate, fetching the
    result)."""
    measured, plain, counted = run_seconds(results, hosts)
    runs = len(measured) + len(plain)
    more_measured, more_plain = deploy_seconds(results, hosts, counted)
    deploys = len(more_measured) + len(more_plain)
    measured, plain = measured + more_measured, plain + more_plain
    restore = statistics.median(plain) if plain else None
    if not measured:
        guess = restore or GUESS_DEPLOY_S
        return Timings(guess, GUESS_BENCH_S, guess, runs, deploys, bench_guessed=bool(plain))
    run = statistics.median(measured)
    benches = bench_seconds(results, hosts)
    bench = min(statistics.median(benches) if benches else GUESS_BENCH_S, run / 2)
    return Timings(run - bench, bench, restore or run - bench, runs, deploys)


def _source(t: Timings) -> str:
    """Where ``t``'s figures come from, in words: "from 4 earlier runs and 3 earlier deploys on these hosts"."""
    found = [f"{n} earlier {what}{'' if n == 1 else 's'}" for n, what in ((t.runs, "run"), (t.deploys, "deploy")) if n]
    if not found:
        return "no earlier run on these hosts: a guess"
    return f"from {' and '.join(found)} on these hosts" + (", the benchmarks a guess" if t.bench_guessed else "")


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def estimate(deploys: int, benchmarks: int, restores: int, t: Timings) -> dict:
    """The whole run's seconds and a line that says what they are made of and where the figures come from."""
    total = deploys * t.deploy_s + benchmarks * t.bench_s + restores * t.restore_s
    parts = [f"{deploys} deploys x ~{t.deploy_s:.0f} s", f"{benchmarks} benchmarks x ~{t.bench_s:.0f} s"]
    parts += [f"{restores} restore x ~{t.restore_s:.0f} s"] if restores else []
    return {
        "total_s": round(total, 1),
        "deploys": deploys,
        "benchmarks": benchmarks,
        "restores": restores,
        "deploy_s": round(t.deploy_s, 1),
        "bench_s": round(t.bench_s, 1),
        "restore_s": round(t.restore_s, 1),
        "earlier_runs": t.runs,
        "earlier_deploys": t.deploys,
        "text": f"about {_duration(total)}: {', '.join(parts)}; {_source(t)}",
    }
