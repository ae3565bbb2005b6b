"""Ranking with noise: per objective the candidates by their median over repeats (those outside a limit last),
and the winner only where its lead is clear of the noise."""

from __future__ import annotations

import statistics

from .searchfile import Objective, Search
from .store import OK, metric_value


def _spread(values: list) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


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
                **_spread(values),
                "within_limits": not broken,
                "limits_broken": broken,
            }
        )
    sign = -1 if obj.goal == "max" else 1
    rows.sort(key=lambda r: (not r["within_limits"], sign * r["median"]))
    for i, r in enumerate(rows, 1):
        r["rank"] = i
    return rows


def decide(obj: Objective, rows: list, noise: float) -> dict:
    """The winner of a ranking, or a tie: the best median wins only when its whole spread beats the runner-up's
    and the medians differ by more than ``noise`` (relative)."""
    ok = [r for r in rows if r["within_limits"]]
    if not ok:
        return {"winner": None, "tied": [], "reason": "no candidate measured within the limits"}
    best = ok[0]
    if len(ok) == 1:
        return {"winner": best["key"], "tied": [], "reason": "the only candidate measured within the limits"}
    tied = []
    for other in ok[1:]:
        gap = abs(best["median"] - other["median"]) / abs(best["median"]) if best["median"] else 0.0
        overlap = other["max"] >= best["min"] if obj.goal == "max" else other["min"] <= best["max"]
        if overlap or gap <= noise:
            tied.append(other["key"])
    if tied:
        return {
            "winner": None,
            "tied": [best["key"], *tied],
            "reason": f"{len(tied) + 1} candidates within noise (spreads overlap or medians within "
            f"{noise:.0%}): measure more (repeat) or pick one with --candidate",
        }
    second = ok[1]
    gap = abs(best["median"] - second["median"]) / abs(best["median"]) if best["median"] else 0.0
    why = f"{gap:.1%} ahead of the runner-up"
    if best["n"] > 1 or second["n"] > 1:
        why += " and its spread clear of the runner-up's"
    else:
        why += " (single runs: no spread measured)"
    return {"winner": best["key"], "tied": [], "reason": why}
