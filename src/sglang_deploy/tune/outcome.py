"""What a search found (Outcome): the plan, the runs, the rankings and the decisions."""

from __future__ import annotations

from dataclasses import dataclass, field

from .planning import Planned
from .ranking import decide, ranking
from .searchfile import Search
from .store import FAILED


@dataclass
class Outcome:
    """Everything a search found: the plan (pruned with reasons), the runs, rankings and winners."""

    search: Search
    planned: list
    excluded: list
    records: list = field(default_factory=list)  # run records (stored and new) of runnable candidates
    new_runs: int = 0
    skipped_budget: list = field(default_factory=list)  # candidates not measured: budget spent
    # (candidate, the one that failed the gate): not run, they hold every flag of a combination that answered wrong
    skipped_wrong: list = field(default_factory=list)
    unplanned: int = 0  # candidates not even rendered: the budget was met while planning
    interrupted: bool = False  # the time budget ran out
    cancelled: bool = False  # Ctrl-C
    emulated: bool = False
    elapsed_s: float = 0.0
    time_to_winner_s: float | None = None
    rankings: dict = field(default_factory=dict)  # objective name -> [row]
    decisions: dict = field(default_factory=dict)  # objective name -> {winner, tied, reason}
    budget: str = "none"
    estimate: dict = field(default_factory=dict)  # compare.estimate's: how long the search takes, as planned

    @property
    def pruned(self) -> list:
        return [p for p in self.planned if p.pruned]

    @property
    def runnable(self) -> list:
        return [p for p in self.planned if not p.pruned]

    def failed(self) -> list:
        """(planned, record) for every candidate whose run failed (first failure)."""
        out, seen = [], set()
        by_key = {p.key: p for p in self.runnable}
        for r in self.records:
            if r["status"] == FAILED and r["candidate_key"] not in seen:
                seen.add(r["candidate_key"])
                out.append((by_key[r["candidate_key"]], r))
        return out

    @property
    def winner(self) -> Planned | None:
        """The first objective's winner, when it is clear of noise."""
        d = self.decisions.get(self.search.objectives[0].name) or {}
        return next((p for p in self.runnable if p.key == d.get("winner")), None)

    def to_dict(self) -> dict:
        return {
            "search": self.search.name,
            "emulated": self.emulated,
            "budget": self.budget,
            "estimate": self.estimate,
            "counts": self.counts(),
            "validate_ms_per_pruned": round(1000 * sum(p.validate_s for p in self.pruned) / len(self.pruned), 3)
            if self.pruned
            else None,
            "elapsed_s": self.elapsed_s,
            "time_to_winner_s": self.time_to_winner_s,
            "interrupted": self.interrupted,
            "cancelled": self.cancelled,
            "pruned": [{"candidate": p.candidate.label, "reasons": p.reasons} for p in self.pruned],
            "excluded": [
                {"candidate": ", ".join(f"{a}={v}" for a, v in c.items()), "reason": r} for c, r in self.excluded
            ],
            "failed": [
                {"candidate": p.candidate.label, "key": p.key, "kind": r.get("kind"), "error": r.get("error")}
                for p, r in self.failed()
            ],
            "rankings": self.rankings,
            "decisions": self.decisions,
            "winner": (
                {"key": self.winner.key, "candidate": self.winner.candidate.label, "profile": self.winner.body}
                if self.winner
                else None
            ),
            "skipped_budget": [p.candidate.label for p in self.skipped_budget],
            "skipped_wrong": [
                {"candidate": p.candidate.label, "holds": w.candidate.label} for p, w in self.skipped_wrong
            ],
        }

    def counts(self) -> dict:
        measured = {r["candidate_key"] for r in self.records}
        failed = {r["candidate_key"] for r in self.records if r["status"] == FAILED}
        return {
            "expanded": len(self.planned) + self.unplanned + len(self.excluded),
            "excluded": len(self.excluded),
            "pruned": len(self.pruned),
            "run": len(measured),
            "failed": len(failed),
            "measured_ok": len(measured - failed),
            "not_run_budget": len(self.skipped_budget) + self.unplanned,
            "not_run_wrong": len(self.skipped_wrong),
            "not_planned_budget": self.unplanned,
            "new_runs": self.new_runs,
        }


def evaluate(out: Outcome, by_key: dict | None = None) -> None:
    if by_key is None:
        by_key = {}
        for r in out.records:
            by_key.setdefault(r["candidate_key"], []).append(r)
    out.emulated = any(r.get("emulated") for r in out.records)
    for obj in out.search.objectives:
        rows = ranking(out.search, obj, out.runnable, by_key, "full")
        out.rankings[obj.name] = rows
        out.decisions[obj.name] = decide(obj, rows, out.search.noise)
    w = out.winner
    if w is not None:
        done = [r.get("elapsed_at_s") for r in out.records if r["candidate_key"] == w.key and r.get("elapsed_at_s")]
        out.time_to_winner_s = min(done) if done else None
