"""tune(): the flag-matrix search on hosts. It reads the hosts' facts (playbooks/tune_facts.yml, read-only), prunes
the candidates with the rules, deploys and benchmarks the rest one by one through the Rollout (the playbook's
rollback handles a crashing candidate), stores each result as it completes, restores what served before, writes
the report and promotes the winner. The search's logic: sglang_deploy.tune."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from sglang_deploy.compare import estimate, gate, noise
from sglang_deploy.tune import (
    FAILED,
    OK,
    Budget,
    HostFacts,
    Outcome,
    Planned,
    Search,
    SearchError,
    Store,
    Workload,
    expand,
    load_search,
    plan,
    promotion,
    report,
    run_search,
)
from sglang_deploy.tune.planning import runs_ahead

from sglang_deploy.compare.figures import comparable, level_metrics, measurement_problem
from sglang_deploy.tune import searchfile

from . import runner
from .results import RunResult
from .rollout import HostReportError, Rollout

TUNE_FACTS_PLAYBOOK = "playbooks/tune_facts.yml"
TUNE_READY_ACTION = "sglang_ready"


@dataclass
class TuneResult:
    """tune(): the outcome (None when the facts could not be read), where the report is, the runs around it."""

    search: Search
    outcome: Outcome | None = None
    report_dir: Path | None = None
    facts_run: RunResult | None = None
    restores: list = field(default_factory=list)
    promoted: dict | None = None  # {name, file, diff, candidate}
    error: str | None = None

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.outcome is not None
            and not self.outcome.cancelled
            and all(r.ok for r in self.restores)
        )

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "error": self.error,
            "report_dir": str(self.report_dir) if self.report_dir else None,
            "outcome": self.outcome.to_dict() if self.outcome else None,
            "promoted": self.promoted,
            "restores": [r.to_dict() for r in self.restores],
        }


def tune(
    search_file,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    budget: str | None = None,
    out_dir=None,
    restore: bool = True,
    promote: str | None = None,
    promote_into=None,
    candidate: str | None = None,
    on_event=None,
    on_plan: Callable | None = None,
    over_limit: bool = False,
    promote_hint: str | None = None,
    repeats: int | None = None,
) -> TuneResult:
    """Run the search of ``search_file`` (path or tune.Search). SearchError / ValueError for bad input.
    ``over_limit`` lets ``candidate`` be one that broke a limit; ``promote_hint``: the command report.md gives
    for promoting the winner. ``repeats``: the top candidates measured this often in all (the search file's
    `repeat: times`; its `top`, else REPEAT_TOP); kept in the store, so that a resumed search keeps it."""
    search = search_file if isinstance(search_file, Search) else load_search(search_file)
    budget_obj = Budget.parse(budget)
    store = _store(search, out_dir)
    search = with_repeats(search, store, repeats)
    promote_into = promote_into or promotion.default_target()
    if promote:  # refused before the search runs, not after it
        promotion.check_promotion(promote, promote_into)
    rollout = Rollout(inventory, limit, extravars, on_event)
    result = TuneResult(search=search)
    hosts = _read_facts(rollout, search, result)
    if not hosts:
        return result
    candidates, excluded = expand(search)
    # Planned only as far as the budget reaches: enough runnable candidates, or its time.
    deadline = time.monotonic() + budget_obj.seconds if budget_obj.seconds else None
    planned = plan(search, candidates, hosts, time.monotonic, budget_obj.candidates, deadline)
    unplanned = len(candidates) - len(planned)
    cost = _estimate(search, planned, store, budget_obj, restore, [h.host for h in hosts])
    if on_plan:
        on_plan(
            Outcome(
                search=search,
                planned=planned,
                excluded=excluded,
                budget=budget_obj.text,
                unplanned=unplanned,
                estimate=cost,
            )
        )
    deployer = _Deployer(rollout, search, store, restore)
    result.outcome = run_search(
        search, planned, excluded, deployer, store, budget_obj, on_progress=rollout.phase, unplanned=unplanned
    )
    result.outcome.estimate = cost
    if restore:
        result.restores = _restore(rollout, store, deployer.before, planned, result.outcome)
    try:
        result.report_dir = report.write(result.outcome, store.report_dir, promote_hint)
    except ValueError as exc:  # a link planted during the search
        result.error = f"the report was not written: {exc}"
        return result
    if promote:
        result.promoted = _promote(result.outcome, hosts[0], promote, promote_into, candidate, over_limit)
    return result


def _estimate(search: Search, planned: list, store: Store, budget: Budget, restore: bool, hosts: list) -> dict:
    """How long the search takes (compare.estimate): each run still ahead a deploy and a benchmark, then the
    restore, at what earlier runs on these hosts took; a time budget ends the measuring sooner."""
    from sglang_deploy.paths import RESULTS

    runs = runs_ahead(search, [p for p in planned if not p.pruned], lambda key: store.get(key) is not None)
    cost = estimate.estimate(runs, runs, int(restore), estimate.timings(RESULTS, hosts))
    if budget.seconds and cost["total_s"] > budget.seconds:
        cost["text"] += f"; the budget ({budget.text}) ends the measuring sooner"
    return cost


REPEAT_TOP = 3  # --repeats on a search file without `repeat:`: the top 3 of each objective


def with_repeats(search: Search, store: Store, repeats: int | None) -> Search:
    """``search`` with the top candidates measured ``repeats`` times, else as often as the run that began this
    store said (a resumed search keeps its repeats), else as its file says."""
    if repeats is not None and not noise.valid_repeats(repeats):
        raise SearchError(f"repeats: a whole number from 1 to {noise.MAX_REPEATS} (got {repeats!r})")
    if repeats is None:
        repeats = store.meta().get("repeats")
        if repeats is None:
            return search
        if not noise.valid_repeats(repeats):
            raise SearchError(
                f"{store.root / 'search.json'}: repeats is {repeats!r}, not a whole number from 1 to "
                f"{noise.MAX_REPEATS}: give --repeats, or remove the file's repeats"
            )
    else:
        store.update_meta(repeats=repeats)
    return replace(search, repeat_times=repeats, repeat_top=search.repeat_top or REPEAT_TOP)


def _store(search: Search, out_dir) -> Store:
    """The search's result store (default results/tune-<name>), refused (SearchError) where it or its report
    cannot be written safely."""
    from sglang_deploy.paths import RESULTS

    store = Store(Path(out_dir) if out_dir else RESULTS / f"tune-{search.name}")
    store.check()
    store.meta(), store.records()  # a tampered search.json or run is refused before any playbook
    try:
        report.check(store.report_dir)
    except ValueError as exc:
        raise SearchError(str(exc)) from exc
    return store


def _read_facts(rollout: Rollout, search: Search, result: TuneResult) -> list:
    """The hosts' facts (tune_host_facts), the run kept in ``result``; [] with result.error when not read."""
    rollout.phase("read the hosts' facts (read-only)")
    run = runner.run_playbook(
        TUNE_FACTS_PLAYBOOK,
        inventory=rollout.inventory,
        limit=rollout.limit,
        extravars={**rollout.extravars, **search.vars},
        on_event=rollout.on_event,
        kind="tune-facts",
    )
    result.facts_run = run
    hosts = tune_host_facts(run.data)
    if not run.ok or not hosts:
        result.error = "could not read the hosts' facts: " + (
            "; ".join(f"{f.host}: {f.message}" for f in run.failures) or run.error or "no host"
        )
        return []
    return hosts


def tune_host_facts(data: dict) -> list:
    """tune.HostFacts per host from the set_stats data of playbooks/tune_facts.yml. What a host reports is data: a
    Jinja template in its profiles (which candidates and a promoted profile would carry into files
    Ansible evaluates on the controller) is refused naming the host (HostReportError)."""
    out = []
    for host, raw in sorted((data.get("sglang_tune_facts") or {}).items()):
        where = searchfile.template_at({"profiles": raw.get("profiles")})
        if where is not None:
            raise HostReportError(
                f"host {host!r} reports {where} holding a Jinja template, which a candidate or a promoted profile"
                " would carry to where Ansible evaluates it on the controller: nothing was deployed; check that host"
                " (a host fact can shadow the inventory's variables)"
            )
        facts = {k: v for k, v in (raw.get("rule_facts") or {}).items() if v not in (None, "")}
        out.append(
            HostFacts(
                host=host,
                profiles=raw.get("profiles") or {},
                settings=raw.get("settings") or {},
                sglang_version=str(raw.get("sglang_version")),
                rule_facts=facts,
                stack=raw.get("stack") or {},
                emulated=bool(raw.get("emulated")),
            )
        )
    return out


class _Deployer:
    """The search's deploy (a tune.Deployer): the candidate's flat profile with the workload's benchmark vars. The
    first one reads what served before (with ``restore``), kept in the store: a resumed search restores that, not
    the candidate an interrupted run left serving."""

    def __init__(self, rollout: Rollout, search: Search, store: Store, restore: bool) -> None:
        self.rollout, self.search, self.store, self.restore = rollout, search, store, restore
        self.before: dict | None = None

    def __call__(self, p: Planned, workload: Workload, stage: str, repeat: int) -> dict:
        if self.restore and self.before is None:
            self.before = self.store.meta().get("before")
            if self.before is None:
                self.before = self.rollout.serving()
                self.store.update_meta(before=self.before)
        ready_failed: list = []
        r = self.rollout.deploy(
            p.profile,
            {**self.search.vars, **workload.extravars()},
            body=p.body,
            on_event=_watching_readiness(self.rollout.on_event, ready_failed),
        )
        if r.status == "canceled":
            raise KeyboardInterrupt
        return candidate_fields(r, ready_failed)


def _watching_readiness(on_event, ready_failed: list):
    """An event handler that passes every event on to ``on_event`` (its tick too) and keeps the result of each
    failed readiness wait (sglang_ready) in ``ready_failed``."""

    def handler(ev: dict):
        d = ev.get("event_data") or {}
        action = str(d.get("resolved_action") or d.get("task_action") or "")
        if ev.get("event") == "runner_on_failed" and action.endswith(TUNE_READY_ACTION):
            ready_failed.append(d.get("res") or {})
        if on_event:
            return on_event(ev)
        return True

    if hasattr(on_event, "tick"):
        handler.tick = on_event.tick  # type: ignore[attr-defined]
    return handler


def candidate_fields(r: RunResult, ready_failed: list) -> dict:
    """The run record's fields from a candidate's deploy: its figures per host, or how it failed."""
    fields = {"emulated": r.emulated, "artifacts": r.artifacts, "deploy_s": round(r.elapsed_s, 3)}
    wrong = gate.problem(r.gate)
    if not r.ok:
        kind, journal = ("quality", []) if wrong else failure_kind(ready_failed)
        message = "\n".join(f"{f.host}: {f.task}: {f.message}" for f in r.failures) or r.error or "deploy failed"
        firm = any(g.get("passed") is False and g.get("firm") for g in r.gate.values())
        failed = {**fields, "status": FAILED, "kind": kind, "error": wrong or message, "journal": journal}
        return {**failed, "firm": firm} if wrong else failed
    metrics = {host: level_metrics(res) for host, res in r.benchmarks.items()}
    dropped = "; ".join(f"{host}: {why}" for host, why in r.dropped_benchmarks.items())
    problem = (
        f"benchmark result dropped ({dropped})" if dropped else measurement_problem(gate.deployed([r]), r.benchmarks)
    )
    if problem:
        return {**fields, "status": FAILED, "kind": "benchmark", "metrics": metrics, "error": problem}
    return {
        **fields,
        "status": OK,
        "metrics": metrics,
        "results": {h: res.get("started_at") for h, res in r.benchmarks.items()},
        "measured": {h: comparable(res) for h, res in r.benchmarks.items()},
    }


def failure_kind(ready_results: list) -> tuple[str, list]:
    """(kind, journal lines) from the failed sglang_ready result: crash (the process died), garbage (a sanity
    check failed), not_ready (timeout); deploy_error when no readiness wait failed."""
    for res in ready_results:
        if res.get("journal"):
            return "crash", list(res["journal"])[-25:]
        if res.get("failed_check"):
            return "garbage", []
        if res.get("stage"):
            return "not_ready", []
    return "deploy_error", []


def _restore(rollout: Rollout, store: Store, before: dict | None, planned: list, outcome: Outcome) -> list:
    """What served before the search (read by this run or an interrupted one) deployed again, unless the search
    was cancelled; a search candidate by its flat profile. Once all is back, the store forgets it."""
    if before is None:  # nothing run now, but an interrupted run may have left a candidate serving
        before = store.meta().get("before")
    if not before or outcome.cancelled:
        return []
    runs = rollout.restore(before, {p.profile: p.body for p in planned if p.profile})
    if all(r.ok for r in runs):
        store.update_meta(before=None)
    return runs


def _promote(outcome: Outcome, host: HostFacts, name: str, into, candidate: str | None, over_limit: bool) -> dict:
    """The chosen candidate written as profile ``name`` into ``into``: {name, file, diff, candidate[, warning]}."""
    chosen = _chosen(outcome, candidate)
    broken = promotion.limits_broken(outcome, chosen)
    if broken and not over_limit:
        raise SearchError(
            f"--candidate {candidate} broke a limit of the search ({'; '.join(broken)}): add --over-limit to "
            "promote it anyway"
        )
    body = promotion.promotion_body(outcome.search, chosen, outcome, host.profiles)
    diff, _ = promotion.promote_profile(into, name, body, host.profiles)
    promoted = {"name": name, "file": str(into), "diff": diff, "candidate": chosen.key}
    if broken:
        promoted["warning"] = f"candidate {candidate} broke a limit: {'; '.join(broken)}"
    tied = (outcome.decisions.get(outcome.search.objectives[0].name) or {}).get("tied") or []
    if chosen.key in tied:
        others = ", ".join(f"#{p.candidate.index}" for p in outcome.runnable if p.key in tied and p is not chosen)
        promoted["warning"] = (
            f"candidate #{chosen.candidate.index} is tied with {others} at this noise: no measured difference "
            "makes it the better one (--repeats measures more)"
        )
    return promoted


def _chosen(outcome: Outcome, candidate: str | None) -> Planned:
    """The candidate to promote: --candidate (number or key prefix), else the first objective's winner."""
    if candidate:
        hits = [
            p
            for p in outcome.runnable
            if str(p.candidate.index) == candidate.lstrip("#") or (len(candidate) >= 4 and p.key.startswith(candidate))
        ]
        ok = {r["candidate_key"] for r in outcome.records if r["status"] == OK}
        if len(hits) != 1 or hits[0].key not in ok:
            raise SearchError(f"--candidate {candidate}: not one candidate measured without failure")
        return hits[0]
    if outcome.winner is None:
        d = outcome.decisions.get(outcome.search.objectives[0].name) or {}
        raise SearchError(f"no winner to promote ({d.get('reason', 'nothing measured')}); pick one with --candidate N")
    return outcome.winner
