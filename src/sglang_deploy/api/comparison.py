"""compare(): each profile deployed and benchmarked in turn on the same hosts, then what served before restored
(the Rollout); compare_report builds the comparison from the runs."""

from __future__ import annotations

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
):
    """Deploy and benchmark each profile in turn on the same hosts, then restore what served before. Behind an smg
    router (inventory group sglang_router) each profile is rolled across the replicas, benchmarked per host and then
    through the router (sglang_fleet_benchmark).

    The restored profile is `restore`, or per host the profile status() found serving (else its last good one);
    the restore deploys without a benchmark. Returns a compare_report.Comparison; a profile that failed to deploy is
    in it with its failures and no figures. `objectives` (tune.Objective, e.g. sla_rate_req_s or goodput_req_s at a
    level) rank the profiles, those outside a `limits` (tune.Limit) last.
    """
    from sglang_deploy import compare_report

    if len(profiles) < 2:
        raise ValueError("compare needs at least two profiles")
    rollout = Rollout(inventory, limit, extravars, on_event)
    settings = {k: v for k, v in rollout.extravars.items() if k.startswith("sglang_benchmark_")}
    before = rollout.serving() if restore is None else restore
    runs = {}
    for i, name in enumerate(profiles, 1):
        rollout.phase(f"profile {i}/{len(profiles)}: {name}")
        runs[name] = rollout.deploy(name, {**MEASURE_ON_FLEET, **rollout.extravars})
        if runs[name].status == "canceled":  # Ctrl-C: stop here, restore nothing
            return compare_report.build_comparison(
                profiles, runs, settings=settings, objectives=objectives, limits=limits
            )
    restores = rollout.restore(before)
    return compare_report.build_comparison(
        profiles, runs, restores=restores, settings=settings, objectives=objectives, limits=limits
    )
