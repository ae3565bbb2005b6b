"""Ranking with noise: per objective the candidates by their median over repeats (those outside a limit last),
and the winner only where its lead is clear of the noise (sglang_deploy.compare.noise: compare's rule)."""

from __future__ import annotations

import statistics

from ..compare import noise as noise_rule
from ..compare.figures import metric_value
from .searchfile import Objective, Search
from .store import OK


def ranking(search: Search, obj: Objective, planned: list, by_key: dict, stage: str = "full") -> list:
    """Rows best first for one objective: candidates with an ok run of the stage, value = median over repeats;
    candidates outside a limit come last (within_limits false)."""
    rows = []
    for p in planned:
        recs = [r for r in by_key.get(p.key, []) if r["stage"] == stage and r["status"] == OK]
        values = [v for v in (metric_value(r, obj.metric, obj.level) for r in recs) if v is not None]
        if not values:
            continue
        broken = []
        for lim in search.limits:
            lv = [v for v in (metric_value(r, lim.metric, lim.level) for r in recs) if v is not None]
            if not lv or not lim.holds(statistics.median(lv)):
                broken.append(f"{lim.text} (got {statistics.median(lv):.1f})" if lv else f"{lim.text} (no value)")
        rows.append(
            {
                "key": p.key,
                "candidate": p.candidate.index,
                "label": p.candidate.label,
                **noise_rule.spread(values),
                "values": values,
                "within_limits": not broken,
                "limits_broken": broken,
            }
        )
    sign = -1 if obj.goal == "max" else 1
    rows.sort(key=lambda r: (not r["within_limits"], sign * r["median"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows


def run_gap(best: dict, other: dict) -> float:
    """The smallest gap between a run of the leader and a run of the other, relative to the leader's run."""
    return min(abs(b - o) / abs(b) if b else 0.0 for b in best["values"] for o in other["values"])


def decide(obj: Objective, rows: list, noise: float) -> dict:
    """The winner of a ranking, or a tie. Where both have repeats the leader wins only where, against every other
    candidate within the limits, the bootstrap interval of the ratio of medians excludes 1 and the gap passes
    ``noise`` (noise.verdict, which needs MIN_RUNS a side); a candidate it does not beat so is tied with it. Where a
    side was measured once there is no interval: every run of one must be more than ``noise`` from every run of the
    other (run_gap; single runs: the gap of the two values), and the reason says no interval was measured."""
    ok = [r for r in rows if r["within_limits"]]
    if not ok:
        return {"winner": None, "tied": [], "reason": "no candidate measured within the limits"}
    best = ok[0]
    if len(ok) == 1:
        return {"winner": best["key"], "tied": [], "reason": "the only candidate measured within the limits"}
    tied, verdicts = [], {}
    for other in ok[1:]:
        if best["n"] > 1 and other["n"] > 1:
            v = noise_rule.verdict(other["values"], best["values"], obj.goal, noise)
            verdicts[other["key"]] = v
            if v["verdict"] != noise_rule.BETTER:
                tied.append(other["key"])
        elif run_gap(best, other) <= noise:
            tied.append(other["key"])
    if tied:
        needed = [v["repeats_needed"] for k, v in verdicts.items() if k in tied and v.get("repeats_needed")]
        more = f"; about {max(needed)} repeats would resolve it" if needed else ""
        return {
            "winner": None,
            "tied": [best["key"], *tied],
            "reason": f"{len(tied) + 1} candidates with no difference at this noise (the interval of the ratio of "
            f"medians includes 1, or the gap is within {noise:.0%}){more}: measure more (--repeats) or pick one "
            "with --candidate",
        }
    second = ok[1]
    gap = abs(best["median"] - second["median"]) / abs(best["median"]) if best["median"] else 0.0
    why = f"{gap:.1%} ahead of the runner-up"
    v = verdicts.get(second["key"])
    if v is not None:
        why += f", the interval of the ratio of medians [{1 / v['high']:.3f}, {1 / v['low']:.3f}] clear of 1"
    else:
        why += " (a side measured once: no interval, every run apart by more than the noise)"
    return {"winner": best["key"], "tied": [], "reason": why}
