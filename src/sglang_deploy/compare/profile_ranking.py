"""compare's ranking of profiles by tune's objectives within its limits, each read as tune reads it
(figures.level_metrics, metric_value), with noise.verdict against the leader."""

from __future__ import annotations

from sglang_deploy.compare import noise
from sglang_deploy.compare.figures import level_metrics, level_text, measurement_problem, metric_value


def ratio(value, base):
    return value / base if value is not None and base else None


def _ranked_row(name: str, recs: list, obj, limits: list) -> dict:
    """A profile's row of one objective: the median over repeats, its spread and values, the limits it broke (a
    limit holds on the median of its metric)."""
    values = [v for v in (metric_value(rec, obj.metric, obj.level) for rec in recs) if v is not None]
    broken = []
    for lim in limits:
        got = noise.spread([metric_value(rec, lim.metric, lim.level) for rec in recs])["median"]
        if not lim.holds(got):
            broken.append(f"{lim.text} (got {'-' if got is None else format(got, '.2f')})")
    spread = noise.spread(values)
    return {
        "profile": name,
        "value": spread["median"],
        "spread": spread,
        "values": values,
        "within_limits": not broken,
        "limits_broken": broken,
    }


def rank_profiles(
    profiles: list,
    results: dict,
    objectives: list,
    limits: list,
    deployed: dict | None = None,
    floor: float = noise.DEFAULT_FLOOR,
) -> dict:
    """objective name -> a row per profile, best first: value (the median over repeats of the mean over hosts),
    its spread, ratio to the first profile's, within_limits and limits_broken (a profile outside a limit ranks
    after those within), rank, and vs_leader (noise.verdict against the best): `tied` where it is no difference.
    The metrics are tune's (goodput_req_s at a level, sla_rate_req_s of the SLA search, ...), read as tune reads
    them. results: profile -> [{host: benchmark result}], one per repeat.

    Ranked are only measurements (tune's rule, figures.measurement_problem: the deploy succeeded, ``deployed``:
    profile -> all its runs ok, all when None; no request failed at the objective's level, in any repeat) on the
    hosts of the first profile measured; the others follow with rank None and not_ranked: why."""
    deployed = deployed or {}
    records = {
        name: [{"metrics": {h: level_metrics(res) for h, res in per.items()}} for per in results.get(name) or []]
        for name in profiles
    }
    measured = [p for p in profiles if deployed.get(p, True) and results.get(p)]
    hosts = sorted(results[measured[0]][0]) if measured else []
    out = {}
    for obj in objectives:
        rows, left = [], []
        for name in profiles:
            per_repeat = results.get(name) or [{}]
            why = next(
                filter(None, (measurement_problem(deployed.get(name, True), per, obj.level) for per in per_repeat)),
                None,
            )
            seen = sorted({h for per in per_repeat for h in per})
            if why is None and seen != hosts:
                why = f"measured on {', '.join(seen)}, the first profile {measured[0]} on {', '.join(hosts)}"
            row = _ranked_row(name, records[name], obj, limits)
            if why is None and row["value"] is None:
                why = f"no value of {obj.metric} at {level_text(obj.level)}"
            if why:
                left.append({"profile": name, "value": row["value"], "rank": None, "not_ranked": why})
                continue
            rows.append(row)
        first = next((r["value"] for r in rows if r["profile"] == profiles[0]), None)
        sign = -1 if obj.goal == "max" else 1
        rows.sort(key=lambda r: (not r["within_limits"], sign * r["value"]))
        for i, r in enumerate(rows, 1):
            r["ratio"], r["rank"] = ratio(r["value"], first), i
            if i > 1:
                r["vs_leader"] = noise.verdict(rows[0]["values"], r["values"], obj.goal, floor)
                r["tied"] = r["within_limits"] and r["vs_leader"]["verdict"] == noise.SAME
        out[obj.name] = rows + left
    return out
