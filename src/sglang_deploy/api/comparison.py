"""compare(): each profile deployed and benchmarked `repeats` times, interleaved, on the same hosts, then what served
before restored (the Rollout); compare_report builds the comparison from the runs, noise judges it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from sglang_deploy.compare import estimate, noise

from .results import RunResult
from .rollout import Rollout
from .runner import EventHandler

# On a fleet each profile is also benchmarked through the router (playbooks/deploy.yml), and each replica restarts
# and is benchmarked out of the router even when it serves the profile already, unless -e says otherwise.
MEASURE_ON_FLEET = {"sglang_fleet_benchmark": True, "sglang_fleet_force_restart": True}


DEFAULT_REPEATS = 3


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
    repeats: int = DEFAULT_REPEATS,
    floor: float = noise.DEFAULT_FLOOR,
    side_by_side: bool = False,
):
    """Deploy and benchmark each profile `repeats` times on the same hosts, interleaved (A B B A A B: schedule()),
    then restore what served before; with `side_by_side` each profile on a host of its own instead, deployed once,
    the rounds benchmarks only (_side_by_side). Behind an smg router (inventory group sglang_router) each profile is
    rolled across the replicas, benchmarked per host and then through the router (sglang_fleet_benchmark).

    The restored profile is `restore`, or per host the profile status() found serving (else its last good one);
    the restore deploys without a benchmark. Unless `keep_order`, the profile most hosts are to be restored to, when
    it is one of `profiles`, is measured last: when that roll passes, the hosts it left on it are not restored.
    A profile whose deploy fails is not deployed again. Returns a compare_report.Comparison: every figure over the
    repeats, and each profile against the first with noise.verdict (`floor`: the smallest difference called).
    `objectives` (tune.Objective, e.g. sla_rate_req_s or goodput_req_s at a level) rank the profiles, those outside
    a `limits` (tune.Limit) last.
    """
    from sglang_deploy.compare import compare_report

    if len(profiles) < 2:
        raise ValueError("compare needs at least two profiles")
    if len(set(profiles)) < len(profiles):
        raise ValueError(f"a profile is given twice: {', '.join(profiles)}; give each once")
    if not noise.valid_repeats(repeats):
        raise ValueError(f"repeats must be a whole number from 1 to {MAX_REPEATS} (got {repeats!r})")
    rollout = Rollout(inventory, limit, extravars, on_event)
    settings = {k: v for k, v in rollout.extravars.items() if k.startswith("sglang_benchmark_")}
    run_all = _side_by_side if side_by_side else _interleaved
    runs, done, setups, restores, plan = run_all(rollout, profiles, restore, repeats, keep_order)
    return compare_report.build_comparison(
        profiles,
        runs,
        restores=restores,
        settings=settings,
        objectives=objectives,
        limits=limits,
        measured_order=done,
        plan=plan,
        floor=floor,
        setups=setups,
    )


def _interleaved(rollout: Rollout, profiles: list, restore: str | None, repeats: int, keep_order: bool) -> tuple:
    """Every profile deployed and benchmarked on all the hosts, `repeats` times in schedule()'s order, then what
    served before restored. Without the forced restart (-e sglang_fleet_force_restart=false) a profile's repeat right
    after its own run is a benchmark only (tags benchmark). Returns (runs, measured order, setup deploys: none,
    restores, plan)."""
    before = rollout.serving() if restore is None else restore
    order = schedule(list(profiles) if keep_order else measuring_order(profiles, before), repeats)
    force = bool({**MEASURE_ON_FLEET, **rollout.extravars}["sglang_fleet_force_restart"])
    plan = plan_cost(order, before, _timings(before if isinstance(before, dict) else None), force)
    rollout.phase("plan: " + plan["text"])
    runs: dict = {name: [] for name in profiles}
    done: list = []
    for i, name in enumerate(order, 1):
        if any(not r.ok for r in runs[name]):
            continue  # it failed once (a crash, garbage): another deploy would only fail again
        again = not force and bool(done) and done[-1] == name  # it serves already: benchmark it, deploy nothing
        what = "benchmark" if again else "deploy"
        rollout.phase(f"{what} {i}/{len(order)}: {name} (repeat {len(runs[name]) + 1}/{repeats})")
        extra = {**MEASURE_ON_FLEET, **rollout.extravars}
        runs[name].append(rollout.deploy(name, extra, tags="benchmark" if again else None))
        done.append(name)
        if runs[name][-1].status == "canceled":  # Ctrl-C: stop here, restore nothing
            return runs, done, [], [], plan
    return runs, done, [], rollout.restore(left_to_restore(before, done[-1], runs[done[-1]][-1])), plan


MAX_REPEATS = noise.MAX_REPEATS
# A side-by-side compare's servers are deployed without a benchmark and left running; its rounds only benchmark.
SIDE_BY_SIDE_DEPLOY = {"sglang_benchmark_enabled": False, "sglang_fleet_force_restart": False}
SIDE_BY_SIDE_BENCH = {"sglang_fleet_benchmark": False}


def side_by_side_hosts(profiles: list, serving: dict) -> dict:
    """profile -> the host that serves it in a side-by-side compare: a host already serving a profile keeps it, the
    others take the rest in name order. ValueError naming the fix when there are fewer hosts than profiles."""
    hosts = sorted(serving)
    if len(hosts) < len(profiles):
        raise ValueError(
            f"a side-by-side compare needs a host for each profile: {len(profiles)} profiles, {len(hosts)} hosts "
            f"({', '.join(hosts) or 'none'}); compare fewer profiles, add hosts, or leave out --side-by-side"
        )
    chosen: dict = {}
    for name in profiles:
        keeps = next((h for h in hosts if serving[h] == name and h not in chosen.values()), None)
        if keeps:
            chosen[name] = keeps
    free = [h for h in hosts if h not in chosen.values()]
    for name in profiles:
        if name not in chosen:
            chosen[name] = free.pop(0)
    return {name: chosen[name] for name in profiles}


def _side_by_side(rollout: Rollout, profiles: list, restore: str | None, repeats: int, _keep_order: bool) -> tuple:
    """Each profile deployed once on a host of its own (side_by_side_hosts), then `repeats` rounds that benchmark
    them in turn, every other round reversed, with no restart between: drift falls on no side and a round costs
    its benchmarks only. The results of one round are set side by side under one label; then the hosts get back
    what served before (or `restore`). Returns (runs, measured order, setup deploys, restores, plan)."""
    serving = rollout.serving()
    where = side_by_side_hosts(profiles, serving)
    label = " / ".join(f"{h} ({p})" for p, h in where.items())
    order = schedule(list(profiles), repeats)
    back = {h: restore or serving.get(h) for h in where.values()}
    restoring = {back[h] for p, h in where.items() if back[h] and back[h] != p}
    cost = estimate.estimate(len(profiles), len(order), len(restoring), _timings(serving))
    plan = {
        "deploys": len(profiles),
        "restarts": sum(1 for p, h in where.items() if serving[h] != p),
        "order": order,
        "hosts": where,
        "estimate": cost,
        "text": f"side by side: {label}; each deployed once, then {repeats} rounds of benchmarks in the order "
        f"{' '.join(order)}, no restart between; {cost['text']}",
    }
    rollout.phase("plan: " + plan["text"])
    setups = []
    for name, host in where.items():
        rollout.phase(f"deploy {name} on {host}")
        setups.append(rollout.deploy(name, SIDE_BY_SIDE_DEPLOY, limit=host))
    failed = {name for name, run in zip(where, setups) if not run.ok}
    runs: dict = {name: [] for name in profiles}
    done: list = []
    for i, name in enumerate(order, 1):
        if name in failed or any(not r.ok for r in runs[name]):
            continue
        rollout.phase(f"benchmark {i}/{len(order)}: {name} on {where[name]} (repeat {len(runs[name]) + 1}/{repeats})")
        run = rollout.deploy(name, SIDE_BY_SIDE_BENCH, limit=where[name], tags="benchmark")
        side = {label: res for res in run.benchmarks.values()} if len(run.benchmarks) == 1 else {}  # noqa: B035
        runs[name].append(replace(run, data={**run.data, "sglang_benchmark": side}))
        done.append(name)
        if run.status == "canceled":  # Ctrl-C: stop here, restore nothing
            return runs, done, setups, [], plan
    restores = rollout.restore({h: back[h] for p, h in where.items() if back[h] and back[h] != p})
    return runs, done, setups, restores, plan


def schedule(order: list, repeats: int) -> list:
    """The deploys of `repeats` rounds over `order`, every other round reversed so that drift falls on no one
    profile (A B | B A | A B), the last round in `order` (its last profile is the one to end on)."""
    rounds = [order if (repeats - 1 - r) % 2 == 0 else order[::-1] for r in range(repeats)]
    return [name for rnd in rounds for name in rnd]


def plan_cost(order: list, before: dict | str, timings: estimate.Timings, force: bool = True) -> dict:
    """The schedule's deploys and server restarts, and how long the whole run takes (estimate: each deploy, each
    benchmark, the restore, at ``timings``). With ``force`` (compare's default, sglang_fleet_force_restart) every
    deploy restarts the servers, so that each is benchmarked after a fresh start; without it only a deploy of
    another profile than the one serving does, and a profile's repeat right after its own run is a benchmark only."""
    now = {before} if isinstance(before, str) else set(before.values())
    serving = next(iter(now)) if len(now) == 1 else None
    restarts = (
        len(order) if force else sum(1 for i, name in enumerate(order) if name != (order[i - 1] if i else serving))
    )
    deploys = len(order) if force else sum(1 for i, name in enumerate(order) if not i or name != order[i - 1])
    restoring = {before} - {order[-1]} if isinstance(before, str) else {p for p in now if p and p != order[-1]}
    cost = estimate.estimate(deploys, len(order), len(restoring), timings)
    text = (
        f"{len(order)} deploys in the order {' '.join(order)}, {restarts} of them restart the servers; {cost['text']}"
    )
    return {"deploys": len(order), "restarts": restarts, "order": order, "estimate": cost, "text": text}


def _timings(hosts: dict | None) -> estimate.Timings:
    """What earlier runs on these hosts (None: on any) took, from the controller's results."""
    from sglang_deploy.paths import RESULTS

    return estimate.timings(RESULTS, hosts)


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
