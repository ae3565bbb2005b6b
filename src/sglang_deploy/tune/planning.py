"""The candidates rendered and validated for every host: the rules prune what they refuse (before anything is
deployed), and a candidate's key hashes its rendered launch and the hosts' stacks.

Keys: a candidate's key hashes its rendered launch (argv, environment, SGLang release) and the stack of every
host (bundle and id, or on lab hosts the emulator's settings). A run's key adds the workload, the deploy vars
and the repeat number.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Callable

from ..launch import profiles
from ..rules import rules
from .expansion import Candidate
from .searchfile import Search, SearchError, Workload


@dataclass
class HostFacts:
    """What the search needs from one host (playbooks/facts.yml publishes it): its profiles and launch settings,
    the SGLang release, the validation rules' facts and the stack identity."""

    host: str
    profiles: dict
    settings: dict
    sglang_version: str
    rule_facts: dict
    stack: dict
    emulated: bool = False


BASE_NAME = "tune-base"


def candidate_profiles(search: Search, cand: Candidate, host_profiles: dict, name: str) -> dict:
    """host_profiles plus the candidate as profile ``name`` (extends the base; an inline base as tune-base)."""
    out = dict(host_profiles)
    base = search.base
    if isinstance(base, dict):
        out[BASE_NAME] = {"description": f"inline base of search {search.name}", **base}
        base = BASE_NAME
    out[name] = {
        "description": f"tune {search.name} candidate {cand.index}: {cand.label}",
        "extends": base,
        "args": cand.args,
        "env": cand.env,
    }
    return out


def flat_profile(search: Search, cand: Candidate, host_profiles: dict, name: str) -> dict:
    """The candidate as one self-contained profile (no extends): what a deploy gets as sglang_profiles[name]."""
    p = profiles.resolve(name, candidate_profiles(search, cand, host_profiles, name))
    return {"description": p.description, "args": p.args, "env": p.env}


def check_base(search: Search, hosts: list) -> None:
    """SearchError when the base profile does not resolve on a host (before anything is expanded)."""
    for h in hosts:
        if isinstance(search.base, str) and search.base not in h.profiles:
            raise SearchError(
                f"base profile {search.base!r} is not a profile of host {h.host}; available: "
                f"{', '.join(sorted(h.profiles))}"
            )


@dataclass
class Planned:
    """A candidate after rendering and validation for every host."""

    candidate: Candidate
    key: str | None = None  # hash of the rendered launches and stacks
    profile: str | None = None  # profile name of its deploys (tune-<key>)
    body: dict | None = None  # the flat profile deployed
    reasons: list = field(default_factory=list)  # errors that prune it
    warnings: list = field(default_factory=list)
    launches: dict = field(default_factory=dict)  # host -> {argv, env, sglang_version}
    validate_s: float = 0.0

    @property
    def pruned(self) -> bool:
        return bool(self.reasons)


def stack_id(h: HostFacts) -> dict:
    return {"stack": h.stack, "emulated": h.emulated}


def candidate_key(launches: dict, stacks: dict) -> str:
    """sha256 over the rendered launch (flags and env as sorted mappings: their order does not matter to SGLang,
    and the release) and the stack of each host."""
    doc = {
        host: {"launch": {k: launches[host][k] for k in ("args", "env", "sglang_version")}, "stack": stacks[host]}
        for host in sorted(launches)
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_key(cand_key: str, workload: Workload, deploy_vars: dict, repeat: int) -> str:
    """The store key of one measurement: candidate key + workload + deploy vars + repeat number."""
    doc = {"candidate": cand_key, "workload": workload.key_fields(), "vars": deploy_vars, "repeat": repeat}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:20]


def plan(
    search: Search,
    candidates: list,
    hosts: list,
    clock: Callable[[], float] = time.perf_counter,
    want: int | None = None,
    deadline: float | None = None,
) -> list:
    """Render and validate the candidates in order for every host; errors prune one (reasons name host and rule).
    Stops (the rest unplanned) once ``want`` are runnable or at ``deadline`` (of ``clock``): the budget."""
    check_base(search, hosts)
    concurrency = search.workload.peak_concurrency
    out = []
    seen: dict = {}  # key -> candidate index
    runnable = 0
    for cand in candidates:
        if (want is not None and runnable >= want) or (deadline is not None and clock() >= deadline):
            break
        t0 = clock()
        p = Planned(cand)
        launches, stacks = {}, {}
        for h in hosts:
            where = f"{h.host}: " if len(hosts) > 1 else ""
            try:
                body = flat_profile(search, cand, h.profiles, "tune-candidate")
                launch = profiles.render("tune-candidate", {"tune-candidate": body}, h.settings, h.sglang_version)
            except profiles.ProfileError as exc:
                p.reasons.append(f"{where}[profile] {exc}")
                continue
            findings = rules.validate(launch, h.rule_facts, concurrency)
            p.reasons += [f"{where}[{f.rule}] {f.message}" for f in rules.errors(findings)]
            p.warnings += [f"{where}[{f.rule}] {f.message}" for f in findings if f.level == rules.WARNING]
            launches[h.host] = {
                "argv": launch.argv,
                "args": launch.args,
                "env": launch.env,
                "sglang_version": launch.sglang_version,
            }
            stacks[h.host] = stack_id(h)
            p.body = body
        if not p.pruned:
            p.launches = launches
            p.key = candidate_key(launches, stacks)
            p.profile = f"tune-{p.key[:10]}"
            if p.key in seen:
                p.reasons.append(f"[duplicate] renders the same launch as candidate #{seen[p.key]}: measured once")
            seen.setdefault(p.key, cand.index)
            p.body = {**p.body, "description": f"tune {search.name} candidate {cand.index}: {cand.label}"}
        p.validate_s = clock() - t0
        out.append(p)
        runnable += not p.pruned
    return out


def runs_ahead(search: Search, runnable: list, stored: Callable[[str], bool]) -> int:
    """How many deploy-and-benchmark runs the search has ahead at most: each runnable candidate's first one that is
    not ``stored`` yet, the full workload for the top ones of a two-stage search, the repeats of the top ones (top:
    per objective, as the loop picks them)."""
    first = sum(1 for p in runnable if not stored(run_key(p.key, search.stage1, search.vars, 0)))

    def top(n: int) -> int:
        return min(len(runnable), n * max(1, len(search.objectives)))

    full = top(search.full_top) if search.short else 0
    again = (search.repeat_times - 1) * top(search.repeat_top) if search.repeat_times > 1 else 0
    return first + full + again
