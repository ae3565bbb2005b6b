"""The search loop: every runnable candidate measured (stage 1), the top ones with the full workload (two-stage),
then the repeats, within the budget. Each run is looked up in the store first and stored as soon as it completes.

The loop gets a ``deploy`` callable (the API passes one that runs the deploy playbook): nothing here talks to a
host or prints.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Callable

from ..compare.figures import first_difference
from .outcome import Outcome, evaluate
from .planning import Planned, run_key
from .ranking import ranking
from .searchfile import Search, Workload
from .store import FAILED, OK, Store


@dataclass
class Budget:
    candidates: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> "Budget":
        """'12' = candidates, '90s' / '30m' / '2h' = time. ValueError with the accepted forms."""
        if not text:
            return cls()
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(text))
        if not m or (not m.group(2) and "." in m.group(1)) or float(m.group(1)) <= 0:
            raise ValueError(f"budget {text!r}: a number of candidates (12) or a time (90s, 30m, 2h)")
        if not m.group(2):
            return cls(candidates=int(m.group(1)))
        return cls(seconds=float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)])

    @property
    def text(self) -> str:
        if self.candidates:
            return f"{self.candidates} candidates"
        return f"{self.seconds:g} s" if self.seconds else "none"


# deploy(planned, workload, stage, repeat) -> record fields: status, kind, error, journal, metrics, result_files...
Deployer = Callable[[Planned, Workload, str, int], dict]


def run_search(
    search: Search,
    planned: list,
    excluded: list,
    deploy: Deployer,
    store: Store,
    budget: Budget | None = None,
    on_progress: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    unplanned: int = 0,
) -> Outcome:
    """Measure the runnable candidates (stage 1), the top ones with the full workload (two-stage), then the
    repeats; every run is looked up in the store first and stored as soon as it completes."""
    budget = budget or Budget()
    out = Outcome(search=search, planned=planned, excluded=excluded, budget=budget.text, unplanned=unplanned)
    run = _Run(out, deploy, store, budget, on_progress or (lambda text: None), clock)
    try:
        run.first_stage()
        if search.short and not run.spent():
            run.full_stage()
        if search.repeat_times > 1 and search.repeat_top and not run.spent():
            run.repeats()
    except KeyboardInterrupt:  # Ctrl-C (the deploy was cancelled): keep what is stored, report it
        out.cancelled = True
    out.interrupted = run.spent()
    out.elapsed_s = run.elapsed()
    store.update_meta(spent_s=out.elapsed_s)
    evaluate(out, run.by_key)
    return out


def holds(p: Planned, w: Planned) -> bool:
    """Whether candidate ``p`` sets every flag and variable that ``w`` sets over the base, to the same value (``w``
    setting none holds nothing: the base itself failing says nothing of a flag)."""
    mine, theirs = p.candidate, w.candidate
    if not (theirs.args or theirs.env):
        return False
    return all(mine.args.get(k, object()) == v for k, v in theirs.args.items()) and all(
        mine.env.get(k, object()) == v for k, v in theirs.env.items()
    )


class _Run:
    """One call of run_search: its clock, its budget and the records it gathers into ``out``."""

    def __init__(self, out: Outcome, deploy: Deployer, store: Store, budget: Budget, say, clock) -> None:
        self.out, self.search, self.deploy, self.store = out, out.search, deploy, store
        self.budget, self.say, self.clock = budget, say, clock
        self.t0 = clock()
        self.earlier_s = float(store.meta().get("spent_s") or 0)  # earlier runs of this search (interrupted, resumed)
        self.runnable = out.runnable
        self.by_key: dict = {}

    def spent(self) -> bool:
        return self.budget.seconds is not None and self.clock() - self.t0 >= self.budget.seconds

    def elapsed(self) -> float:
        """Seconds of the whole search: this run and the earlier ones."""
        return round(self.earlier_s + self.clock() - self.t0, 3)

    def measure(self, p: Planned, workload: Workload, stage: str, repeat: int, label: str) -> dict | None:
        """The record of one run: the stored one, else a new one (None when the time budget is spent first)."""
        key = run_key(p.key, workload, self.search.vars, repeat)
        rec = self.store.get(key)
        if rec is not None:
            self.say(f"{label}: stored result ({rec['status']}) for candidate {p.candidate.index} [{p.key}]")
        elif self.spent():
            return None
        else:
            rec = self._run(key, p, workload, stage, repeat, label)
        self.out.records.append(rec)
        self.by_key.setdefault(p.key, []).append(rec)
        return rec

    def _comparable(self, fields: dict, stage: str) -> dict:
        """A run's fields, FAILED (kind workload) when what its benchmark did (figures.COMPARABLE, per host) differs
        from what the first run of its stage measured: e.g. recorded answers counted in words on a candidate whose
        server does not tokenize, in the server's tokens on the others. Runs stored without it are not checked."""
        first = next(
            (r for r in self.out.records if r["stage"] == stage and r["status"] == OK and r.get("measured")), None
        )
        if fields.get("status") != OK or not fields.get("measured") or first is None:
            return fields
        mine, theirs = fields["measured"], first["measured"]
        hosts = sorted(set(mine) & set(theirs))
        differs = first_difference([theirs[h] for h in hosts] + [mine[h] for h in hosts])
        if differs is None:
            return fields
        got = {h: mine[h].get(differs) for h in hosts if mine[h].get(differs) != theirs[h].get(differs)}
        error = (
            f"not comparable: its benchmark's {differs} was {', '.join(f'{v!r} on {h}' for h, v in got.items())}, "
            f"{theirs[hosts[0]].get(differs)!r} for candidate {first['candidate']}"
        )
        return {**fields, "status": FAILED, "kind": "workload", "error": error}

    def _run(self, key: str, p: Planned, workload: Workload, stage: str, repeat: int, label: str) -> dict:
        self.say(f"{label}: candidate {p.candidate.index} [{p.key}] {p.candidate.label}")
        started = self.clock()
        fields = self._comparable(self.deploy(p, workload, stage, repeat), stage)
        rec = {
            "key": key,
            "candidate_key": p.key,
            "candidate": p.candidate.index,
            "label": p.candidate.label,
            "choices": p.candidate.choices,
            "profile": p.profile,
            "stage": stage,
            "repeat": repeat,
            "workload": asdict(workload),
            "elapsed_s": round(self.clock() - started, 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "elapsed_at_s": self.elapsed(),
            **fields,
        }
        self.store.put(key, rec)
        self.store.update_meta(spent_s=self.elapsed())
        self.out.new_runs += 1
        self.say(
            f"{label}: candidate {p.candidate.index} {rec['status']}"
            + (f" ({rec.get('kind')})" if rec["status"] == FAILED else "")
        )
        return rec

    def first_stage(self) -> None:
        """Every runnable candidate, until the budget is spent (the rest: skipped_budget); a candidate that holds
        every flag of one that failed the quality gate for a reason that is not numerics is not run
        (skipped_wrong)."""
        stage = "short" if self.search.short else "full"
        runnable = self.runnable
        wrong: list = []
        for i, p in enumerate(runnable, 1):
            culprit = next((w for w in wrong if holds(p, w)), None)
            if culprit is not None:
                self.out.skipped_wrong.append((p, culprit))
                self.say(f"[{i}/{len(runnable)}] candidate {p.candidate.index} not run: it holds every flag of"
                         f" candidate {culprit.candidate.index}, which answered wrong")  # fmt: skip
                continue
            over = self.budget.candidates is not None and i - 1 - len(self.out.skipped_wrong) >= self.budget.candidates
            if (
                over
                or self.spent()
                or self.measure(p, self.search.stage1, stage, 0, f"[{i}/{len(runnable)}] {stage}") is None
            ):
                self.out.skipped_budget = runnable[i - 1 :]
                return
            rec = self.by_key[p.key][-1]
            if rec["status"] == FAILED and rec.get("kind") == "quality" and rec.get("firm"):
                wrong.append(p)

    def top(self, n: int, stage: str) -> list:
        """The union over objectives of the n best candidates with an ok run of the stage, within limits."""
        chosen: list = []
        for obj in self.search.objectives:
            rows = ranking(self.search, obj, self.runnable, self.by_key, stage)
            for row in [r for r in rows if r["within_limits"]][:n]:
                p = next(q for q in self.runnable if q.key == row["key"])
                if p not in chosen:
                    chosen.append(p)
        return chosen

    def full_stage(self) -> None:
        """Two-stage: the full workload for the top candidates of the short one."""
        finalists = self.top(self.search.full_top, "short")
        for j, p in enumerate(finalists, 1):
            if self.measure(p, self.search.workload, "full", 0, f"[full {j}/{len(finalists)}]") is None:
                return

    def repeats(self) -> None:
        """The top candidates measured again; the rounds interleave the candidates, every other one reversed (the
        first stage in order, then C B A, A B C, ...), so drift hits them alike."""
        times = self.search.repeat_times
        again = self.top(self.search.repeat_top, "full")
        rounds = [(r, j, p) for r in range(1, times) for j, p in enumerate(again if r % 2 == 0 else again[::-1], 1)]
        for r, j, p in rounds:
            if self.measure(p, self.search.workload, "full", r, f"[repeat {r + 1}/{times}, {j}/{len(again)}]") is None:
                return
