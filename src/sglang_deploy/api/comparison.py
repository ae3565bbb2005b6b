"""compare(): each profile deployed and benchmarked in turn on the same hosts, then what served before restored
(the Rollout); compare_report builds the comparison from the runs."""

from __future__ import annotations

from collections import Counter

from .results import RunResult
from .rollout import Rollout
from .runner import EventHandler

# On a fleet each profile is also benchmarked through the router (playbooks/deploy.yml), and each replica restarts
# and is benchmarked out of the router even when it serves the profile already, unless -e says otherwise.
MEASURE_ON_FLEET = {"sglang_fleet_benchmark": True, "sglang_fleet_force_restart": True}


def compare(
    profiles: list,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    restore: str | None = None,
    on_event: EventHandler | None = None,
    objectives: list = (),
    limits: list = (),
    keep_order: bool = False,
):
    """Deploy and benchmark each profile in turn on the same hosts, then restore what served before. Behind an smg
    router (inventory group sglang_router) each profile is rolled across the replicas, benchmarked per host and then
    through the router (sglang_fleet_benchmark).

    The restored profile is `restore`, or per host the profile status() found serving (else its last good one);
    the restore deploys without a benchmark. Unless `keep_order`, the profile most hosts are to be restored to, when
    it is one of `profiles`, is measured last: when that roll passes, the hosts it left on it are not restored.
    Returns a compare_report.Comparison; a profile that failed to deploy is in it with its failures and no figures.
    `objectives` (tune.Objective, e.g. sla_rate_req_s or goodput_req_s at a level) rank the profiles, those outside
    a `limits` (tune.Limit) last.
    """
    from sglang_deploy import compare_report

    if len(profiles) < 2:
        raise ValueError("compare needs at least two profiles")
    if len(set(profiles)) < len(profiles):
        raise ValueError(f"a profile is given twice: {', '.join(profiles)}; give each once")
    rollout = Rollout(inventory, limit, extravars, on_event)
    settings = {k: v for k, v in rollout.extravars.items() if k.startswith("sglang_benchmark_")}
    before = rollout.serving() if restore is None else restore
    order = list(profiles) if keep_order else measuring_order(profiles, before)
    runs = {}
    for i, name in enumerate(order, 1):
        rollout.phase(f"profile {i}/{len(order)}: {name}")
        runs[name] = rollout.deploy(name, {**MEASURE_ON_FLEET, **rollout.extravars})
        if runs[name].status == "canceled":  # Ctrl-C: stop here, restore nothing
            return compare_report.build_comparison(
                profiles, runs, settings=settings, objectives=objectives, limits=limits, measured_order=order
            )
    restores = rollout.restore(left_to_restore(before, order[-1], runs[order[-1]]))
    return compare_report.build_comparison(
        profiles, runs, restores=restores, settings=settings, objectives=objectives, limits=limits, measured_order=order
    )


def measuring_order(profiles: list, before: dict | str) -> list:
    """`profiles` in the order given, but with the one most hosts are to be restored to (the first given of a tie)
    last, when it is among them."""
    wanted = Counter(p for p in ([before] if isinstance(before, str) else before.values()) if p in profiles)
    if not wanted:
        return list(profiles)
    last = max(wanted, key=lambda p: (wanted[p], -profiles.index(p)))
    return [p for p in profiles if p != last] + [last]


def left_to_restore(before: dict | str, last: str, run: RunResult) -> dict | str:
    """What the restore still has to deploy after `run`, the last measured profile's roll: all of `before` unless
    that roll passed, else `before` less the hosts its summary says it left serving `last` (deployed or unchanged).
    `before` names one profile for every host (nothing left when it is `last` and every host of the roll stays on
    it) or maps host -> profile (None: nothing to restore)."""
    if not run.ok:  # a stopped roll or a failed rank: which hosts serve what is not certain, restore every host
        return before
    rows = {r["host"]: r for r in run.outcomes}
    stays = {h for h, r in rows.items() if r.get("serves") == last and r.get("outcome") in ("deployed", "unchanged")}
    if isinstance(before, str):
        return {} if before == last and rows and stays == set(rows) else before
    return {h: None if (p == last and h in stays) else p for h, p in before.items()}
