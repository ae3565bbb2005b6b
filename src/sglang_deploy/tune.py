"""Flag-matrix search ("tune"): the search file, its expansion into candidate profiles, pruning with the rules,
candidate keys, the result store, the search loop, ranking with noise and promotion of the winner.

Pure domain logic: the loop gets a ``deploy`` callable (the API passes one that runs the deploy playbook) and
the hosts' facts as data, so nothing here talks to a host or prints.

A search file (YAML)::

    name: pcie-aggressive                # default: the file name without .yml
    base: baseline                       # a profile of sglang_profiles, or an inline {args:, env:}
    axes:                                # the matrix: every combination of one value per axis
      moe-runner-backend: [flashinfer_cutlass, triton]     # a flag: its values (null = flag removed)
      env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: [0, 1]         # env.NAME: an environment variable
      spec:                              # a mapping label -> {args:, env:} sets several keys at once
        off: {}
        nextn: {args: {speculative-algorithm: NEXTN, mamba-scheduler-strategy: extra_buffer}}
    constraints:                         # optional; values by label (str(value) for flags: "1", "true", "null")
      - exclude: {moe-runner-backend: triton, spec: nextn}        # drop combinations matching all of these
      - when: {spec: nextn}                                        # combinations matching `when` must match
        require: {env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: ["1"]}     # one of the listed labels per axis
    workload: {concurrency: [1, 32], input_len: 256, output_len: 256, requests: 0}
    objectives:                          # the first one decides the winner that --promote writes
      - {metric: decode_tok_s, concurrency: 1}            # goal: max for tok/s, min for times (default)
      - {metric: output_tok_s, concurrency: 32}
    limits:
      - {metric: ttft_p99_ms, concurrency: 32, max: 2000}
    two_stage: {workload: {output_len: 64, requests: 8}, top: 4}   # optional: short run for all, full for the top
    repeat: {top: 3, times: 3}           # the top candidates of each objective measured this often in all
    noise: 0.02                          # relative gap under which two medians are a tie
    vars: {}                             # for every deploy: only SEARCH_VARS (sglang_server_env, sglang_tp, ...)

Keys: a candidate's key hashes its rendered launch (argv, environment, SGLang release) and the stack of every
host (bundle and id, or on lab hosts the emulator's settings). A run's key adds the workload, the deploy vars
and the repeat number; the store keeps one JSON file per run key, written atomically as the run completes, so
an interrupted search resumes where it stopped and nothing measured runs twice. Its search.json keeps the time
the search took over all its runs and what served before it began, until that is restored.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import itertools
import json
import math
import os
import re
import statistics
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable


from . import formats, rules
from .host.bench.sweep import check_dest, write_file
from . import profiles as prof
from .secret_names import MASK, is_secret_name

SEARCH_KEYS = {
    "name",
    "base",
    "axes",
    "constraints",
    "workload",
    "objectives",
    "limits",
    "two_stage",
    "repeat",
    "noise",
    "vars",
}
WORKLOAD_KEYS = {"concurrency", "input_len", "output_len", "requests", "warmup"}
ENV_PREFIX = "env."
DEFAULT_NOISE = 0.02
# metric -> (key of a benchmark level, statistic or None, default goal)
METRICS = {
    "output_tok_s": ("output_throughput_tok_s", None, "max"),
    "decode_tok_s": ("decode_tok_s_per_request", "mean", "max"),
    "ttft_p50_ms": ("ttft_ms", "p50", "min"),
    "ttft_p99_ms": ("ttft_ms", "p99", "min"),
    "tpot_p50_ms": ("tpot_ms", "p50", "min"),
    "tpot_p99_ms": ("tpot_ms", "p99", "min"),
    "itl_p50_ms": ("itl_ms", "p50", "min"),
    "e2e_p50_ms": ("e2e_ms", "p50", "min"),
    "e2e_p99_ms": ("e2e_ms", "p99", "min"),
}
OK, FAILED = "ok", "failed"


class SearchError(ValueError):
    """A search file that cannot be used, with what to fix."""


# --------------------------------------------------------------------------------------------------
# The search file


@dataclass(frozen=True)
class Axis:
    """One dimension of the matrix: labels and, per label, the args/env it sets (None removes a key)."""

    name: str
    labels: tuple
    settings: tuple  # per label: {"args": {...}, "env": {...}}
    shown: tuple = ()  # per label: as reports show it (shown_label)


@dataclass(frozen=True)
class Objective:
    metric: str
    concurrency: int
    goal: str  # max or min

    @property
    def name(self) -> str:
        return f"{self.metric} @ c={self.concurrency}"


@dataclass(frozen=True)
class Limit:
    metric: str
    concurrency: int
    max: float | None = None
    min: float | None = None

    @property
    def text(self) -> str:
        bound = f"<= {self.max:g}" if self.max is not None else f">= {self.min:g}"
        return f"{self.metric} @ c={self.concurrency} {bound}"

    def holds(self, value: float | None) -> bool:
        if value is None:
            return False
        return (self.max is None or value <= self.max) and (self.min is None or value >= self.min)


@dataclass(frozen=True)
class Workload:
    concurrency: tuple
    input_len: int = 256
    output_len: int = 256
    requests: int = 0  # per level; 0 = the benchmark module's default
    warmup: int = 2

    def extravars(self) -> dict:
        """The sglang_benchmark role's variables for this workload."""
        return {
            "sglang_benchmark_concurrency": list(self.concurrency),
            "sglang_benchmark_input_len": self.input_len,
            "sglang_benchmark_output_len": self.output_len,
            "sglang_benchmark_requests": self.requests,
            "sglang_benchmark_warmup": self.warmup,
        }


@dataclass
class Search:
    name: str
    base: Any  # a profile name or an inline {args, env}
    axes: list
    constraints: list
    workload: Workload
    objectives: list
    limits: list = field(default_factory=list)
    short: Workload | None = None  # two-stage: the short workload
    full_top: int = 0  # two-stage: candidates that get the full workload
    repeat_top: int = 0
    repeat_times: int = 1
    noise: float = DEFAULT_NOISE
    vars: dict = field(default_factory=dict)
    path: str | None = None

    @property
    def stage1(self) -> Workload:
        return self.short or self.workload


def _label(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# A URL's user part, up to the authority's last '@' (it may hold '@' and ':' itself).
_USERINFO = re.compile(r"://[^/\s]*@")


def shown_label(key: str | None, label: str) -> str:
    """``label`` as reports show it: *** for every value of a secret flag or variable ``key`` (api-key, HF_TOKEN),
    and a URL's user part (with its password) masked; the search itself keeps the label."""
    if key is not None and is_secret_name(key):
        return MASK
    return _USERINFO.sub(f"://{MASK}@", label)


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise SearchError(msg)


def _axis(name: Any, raw: Any) -> Axis:
    _need(
        isinstance(name, str) and name and not name.startswith("-"),
        f"axes: {name!r} must be a flag name without dashes, env.NAME, or a label for a mapping of values",
    )
    if isinstance(raw, dict):
        _need(bool(raw), f"axes.{name}: give at least one value")
        labels, settings = [], []
        for label, body in raw.items():
            body = body or {}
            _need(
                isinstance(body, dict) and set(body) <= {"args", "env"},
                f"axes.{name}.{label}: a value of a mapping axis is {{args: {{...}}, env: {{...}}}} (or {{}})",
            )
            for part in ("args", "env"):
                _need(isinstance(body.get(part) or {}, dict), f"axes.{name}.{label}.{part} must be a mapping")
            labels.append(_label(label))
            settings.append({"args": dict(body.get("args") or {}), "env": dict(body.get("env") or {})})
        return Axis(name, tuple(labels), tuple(settings), tuple(shown_label(None, lb) for lb in labels))
    _need(isinstance(raw, list) and raw, f"axes.{name}: give a list of values (or a mapping label -> args/env)")
    is_env = name.startswith(ENV_PREFIX)
    key = name[len(ENV_PREFIX) :] if is_env else name
    _need(bool(key), f"axes.{name}: env. needs a variable name (env.SGLANG_...)")
    labels = [_label(v) for v in raw]
    _need(len(set(labels)) == len(labels), f"axes.{name}: values repeat ({', '.join(labels)})")
    part = "env" if is_env else "args"
    settings = tuple({"args": {}, "env": {}} | {part: {key: v}} for v in raw)
    return Axis(name, tuple(labels), settings, tuple(shown_label(key, lb) for lb in labels))


def _workload(raw: Any, where: str, base: Workload | None = None) -> Workload:
    _need(isinstance(raw, dict), f"{where} must be a mapping with concurrency, input_len, output_len, requests")
    unknown = set(raw) - WORKLOAD_KEYS
    _need(not unknown, f"{where}: unknown keys {sorted(unknown)}; allowed {sorted(WORKLOAD_KEYS)}")
    values = asdict(base) if base else {}
    values.update(raw)
    conc = values.get("concurrency")
    conc = list(conc) if isinstance(conc, tuple) else conc
    _need(
        isinstance(conc, list) and conc and all(isinstance(c, int) and c > 0 for c in conc),
        f"{where}.concurrency: a list of positive integers, e.g. [1, 32]",
    )
    for key in ("input_len", "output_len", "requests", "warmup"):
        if key in values:
            _need(
                isinstance(values[key], int) and values[key] >= (1 if key.endswith("len") else 0),
                f"{where}.{key}: a {'positive' if key.endswith('len') else 'non-negative'} integer",
            )
    values["concurrency"] = tuple(sorted(set(conc)))
    return Workload(**values)


def _metric(raw: dict, where: str, workload: Workload) -> tuple[str, int]:
    _need(isinstance(raw, dict), f"{where}: a mapping {{metric: ..., concurrency: N}}")
    metric, conc = raw.get("metric"), raw.get("concurrency")
    _need(metric in METRICS, f"{where}.metric {metric!r}: use one of {', '.join(METRICS)}")
    _need(
        conc in workload.concurrency,
        f"{where}.concurrency {conc!r}: not a level of the workload {list(workload.concurrency)}; add it there",
    )
    return metric, conc


# The variables a search file's vars: may set, for every deploy of the search and its facts run, with the type
# of each: the server's environment, the readiness wait and launch settings the rules check at render. A search
# file is shared like a profile: connection variables (ansible_ssh_common_args runs a command on the controller),
# paths, users, keys, acknowledgements and the router's settings stay in the inventory and group_vars.
SEARCH_VARS = {
    "sglang_server_env": dict,
    "sglang_server_emulator_env": dict,
    "sglang_server_ready_timeout": int,
    "sglang_dist_timeout": int,
    "sglang_tp": int,
    "sglang_enable_metrics": bool,
}
# Ansible evaluates a template in any extra variable on the controller ({{ lookup('pipe', ...) }} runs a command).
_TEMPLATE = re.compile(r"\{[{%#]")


def _check_var(key: str, value: Any) -> None:
    """SearchError unless vars: may set ``key`` to ``value`` (SEARCH_VARS)."""
    where = f"vars.{key}"
    if key == "profile" or key == "sglang_profiles" or key.startswith("sglang_benchmark_"):
        raise SearchError(f"{where} is set by the search itself (use base, axes, workload)")
    if key not in SEARCH_VARS:
        why = (
            "an Ansible variable (connection and privilege settings act on the controller and the hosts)"
            if key.startswith("ansible_")
            else "not a setting a search varies"
        )
        raise SearchError(
            f"{where}: {why}; a search file may set only {', '.join(SEARCH_VARS)}. Set the others in the "
            "inventory or group_vars"
        )
    kind = SEARCH_VARS[key]
    if kind is dict:
        _need(isinstance(value, dict), f"{where}: a mapping NAME -> value of environment variables")
        problems = formats.env_problems(value)
        secret = sorted(str(k) for k in value if is_secret_name(k))
        if secret:
            problems.append(f"{', '.join(secret)} name secrets: give them through sglang_server_secret_env (vault it)")
        if any(not isinstance(v, (str, int, float)) or isinstance(v, bool) for v in value.values()):
            problems.append("each value is a string or a number")
        _need(not problems, f"{where}: {'; '.join(problems)}")
    elif kind is int:
        _need(isinstance(value, int) and not isinstance(value, bool) and value > 0, f"{where}: a positive integer")
    else:
        _need(isinstance(value, bool), f"{where}: true or false")


def _check_no_template(doc: Any) -> None:
    """SearchError naming the place of the first Jinja template in a key or value of ``doc``."""
    todo = [("", doc)]
    while todo:
        where, node = todo.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                todo.append((f"{where}.{k}" if where else str(k), v))
                todo.append((where or "top level", k))
        elif isinstance(node, list):
            todo += [(f"{where}[{i}]", v) for i, v in enumerate(node)]
        elif isinstance(node, str) and _TEMPLATE.search(node):
            raise SearchError(
                f"{where}: holds a Jinja template ('{{{{', '{{%' or '{{#'), which Ansible would evaluate on the "
                "controller (a lookup runs commands there): write the value itself"
            )


# Work limits checked as the file is read: every combination is expanded and rendered for every host (about 3 ms
# each) before the first deploy, so past these a search would plan for minutes (a larger search is several).
MAX_AXES = 32
MAX_AXIS_VALUES = 512
MAX_COMBINATIONS = 4096


def parse_search(doc: Any, name: str = "search", path: str | None = None) -> Search:
    """A Search from the parsed YAML of a search file; SearchError names what to fix."""
    _need(isinstance(doc, dict), "a search file is a mapping with base, axes, workload, objectives")
    _check_no_template(doc)
    unknown = set(doc) - SEARCH_KEYS
    _need(not unknown, f"unknown keys {sorted(unknown)}; allowed {sorted(SEARCH_KEYS)}")
    name = str(doc.get("name") or name)
    _need(
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name) is not None,
        f"name {name!r}: letters, digits, '_', '.', '-' only (it names the results folder)",
    )
    base = doc.get("base")
    _need(
        isinstance(base, str) and base or isinstance(base, dict) and set(base) <= {"args", "env"},
        "base: a profile name of sglang_profiles, or an inline {args: {...}, env: {...}}",
    )
    raw_axes = doc.get("axes")
    _need(isinstance(raw_axes, dict) and raw_axes, "axes: a mapping of axis -> values (at least one axis)")
    values = sum(len(v) if isinstance(v, (dict, list)) else 1 for v in raw_axes.values())
    _need(
        len(raw_axes) <= MAX_AXES and values <= MAX_AXIS_VALUES,
        f"axes: {len(raw_axes)} axes with {values} values (at most {MAX_AXES} axes and {MAX_AXIS_VALUES} values): "
        "search in stages, fixing in the base profile what a stage settles",
    )
    axes = [_axis(k, v) for k, v in raw_axes.items()]
    combinations = math.prod(len(ax.labels) for ax in axes)
    _need(
        combinations <= MAX_COMBINATIONS,
        f"the axes make {combinations} combinations (at most {MAX_COMBINATIONS}): fewer values per axis, or "
        "split the search in stages and fix the axes the first one settles in the base profile",
    )
    touched: dict = {}
    for ax in axes:
        for s in ax.settings:
            for part in ("args", "env"):
                for key in s[part]:
                    other = touched.setdefault((part, key), ax.name)
                    _need(
                        other == ax.name, f"axes {other} and {ax.name} both set {part} {key}: merge them into one axis"
                    )
    by_name = {ax.name: ax for ax in axes}

    constraints = []
    for i, c in enumerate(doc.get("constraints") or []):
        where = f"constraints[{i}]"
        _need(
            isinstance(c, dict) and (set(c) == {"exclude"} or set(c) == {"when", "require"}),
            f"{where}: either {{exclude: {{axis: label}}}} or {{when: {{axis: label}}, require: {{axis: [labels]}}}}",
        )
        parts = {}
        for kind, body in c.items():
            _need(isinstance(body, dict) and body, f"{where}.{kind}: a mapping axis -> label(s)")
            norm = {}
            for axis, wanted in body.items():
                _need(axis in by_name, f"{where}.{kind}: unknown axis {axis!r}; axes: {', '.join(by_name)}")
                labels = [_label(w) for w in (wanted if isinstance(wanted, list) else [wanted])]
                bad = [lb for lb in labels if lb not in by_name[axis].labels]
                _need(
                    not bad,
                    f"{where}.{kind}.{axis}: {', '.join(bad)} not among its values ({', '.join(by_name[axis].labels)})",
                )
                norm[axis] = frozenset(labels)
            parts[kind] = norm
        constraints.append(parts)

    workload = _workload(doc.get("workload"), "workload")
    objectives = []
    raw_obj = doc.get("objectives")
    _need(isinstance(raw_obj, list) and raw_obj, "objectives: a list, e.g. [{metric: decode_tok_s, concurrency: 1}]")
    for i, o in enumerate(raw_obj):
        metric, conc = _metric(o, f"objectives[{i}]", workload)
        goal = o.get("goal", METRICS[metric][2])
        _need(goal in ("max", "min"), f"objectives[{i}].goal: max or min")
        objectives.append(Objective(metric, conc, goal))
    limits = []
    for i, lim in enumerate(doc.get("limits") or []):
        metric, conc = _metric(lim, f"limits[{i}]", workload)
        bounds = {k: lim.get(k) for k in ("max", "min") if lim.get(k) is not None}
        _need(
            len(bounds) == 1 and all(isinstance(v, (int, float)) for v in bounds.values()),
            f"limits[{i}]: give one numeric bound, max: or min:",
        )
        limits.append(Limit(metric, conc, **{k: float(v) for k, v in bounds.items()}))

    short, full_top = None, 0
    if doc.get("two_stage") is not None:
        ts = doc["two_stage"]
        _need(
            isinstance(ts, dict) and set(ts) == {"workload", "top"} and isinstance(ts["top"], int) and ts["top"] > 0,
            "two_stage: {workload: {output_len: 64, requests: 8}, top: N} (the short workload's changes, N >= 1)",
        )
        short = _workload(ts["workload"], "two_stage.workload", workload)
        for obj in objectives + limits:
            _need(
                obj.concurrency in short.concurrency,
                f"two_stage.workload.concurrency must keep level {obj.concurrency} (objectives and limits use it)",
            )
        full_top = ts["top"]
    repeat_top, repeat_times = 0, 1
    if doc.get("repeat") is not None:
        rp = doc["repeat"]
        _need(
            isinstance(rp, dict)
            and set(rp) == {"top", "times"}
            and all(isinstance(rp[k], int) and rp[k] >= 1 for k in rp),
            "repeat: {top: N, times: M}: the top N candidates of each objective measured M times in all",
        )
        repeat_top, repeat_times = rp["top"], rp["times"]
    noise = doc.get("noise", DEFAULT_NOISE)
    _need(isinstance(noise, (int, float)) and 0 <= noise < 1, "noise: a fraction, e.g. 0.02 for 2%")
    extra = doc.get("vars") or {}
    _need(
        isinstance(extra, dict) and all(isinstance(k, str) and k.isidentifier() for k in extra),
        "vars: a mapping of extra variables for every deploy, each name a variable name (letters, digits, '_')",
    )
    for key, value in extra.items():
        _check_var(key, value)
    return Search(
        name=name,
        base=base,
        axes=axes,
        constraints=constraints,
        workload=workload,
        objectives=objectives,
        limits=limits,
        short=short,
        full_top=full_top,
        repeat_top=repeat_top,
        repeat_times=repeat_times,
        noise=float(noise),
        vars=dict(extra),
        path=path,
    )


def load_search(path: str | Path) -> Search:
    path = Path(path)
    try:  # the profiles' reader: UTF-8, bounded aliases, values Python can hold
        doc = prof.read_yaml(path)
    except prof.ProfileError as exc:
        raise SearchError(str(exc)) from exc
    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    try:
        return parse_search(doc, name=name, path=str(path))
    except SearchError as exc:
        raise SearchError(f"{path}: {exc}") from exc


# --------------------------------------------------------------------------------------------------
# Expansion


@dataclass
class Candidate:
    """One combination: the label chosen per axis (as reports show it) and the args/env it sets over the base."""

    index: int
    choices: dict
    args: dict
    env: dict

    @property
    def label(self) -> str:
        return one_line(", ".join(f"{a}={v}" for a, v in self.choices.items()))


def one_line(value: Any) -> str:
    """``value`` as text for one line of a report: control characters (line breaks, tab, ESC, DEL, C1), format
    characters (bidirectional overrides) and line separators written as escapes (a newline as \\n)."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in _NOT_SHOWN else c for c in str(value))


_NOT_SHOWN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _matches(choices: dict, cond: dict) -> bool:
    return all(choices[axis] in labels for axis, labels in cond.items())


def expand(search: Search) -> tuple[list, list]:
    """(candidates, excluded): every combination, minus those the constraints drop ((choices, reason) pairs)."""
    shown = {ax.name: dict(zip(ax.labels, ax.shown)) for ax in search.axes}

    def labels(cond: dict) -> dict:
        return {a: sorted(shown[a][lb] for lb in v) for a, v in cond.items()}

    candidates, excluded = [], []
    for combo in itertools.product(*(range(len(ax.labels)) for ax in search.axes)):
        choices = {ax.name: ax.labels[i] for ax, i in zip(search.axes, combo)}
        reason = None
        for c in search.constraints:
            if "exclude" in c and _matches(choices, c["exclude"]):
                reason = "excluded by " + ", ".join(f"{a}={'|'.join(v)}" for a, v in labels(c["exclude"]).items())
                break
            if "when" in c and _matches(choices, c["when"]) and not _matches(choices, c["require"]):
                reason = (
                    "constraint: "
                    + ", ".join(f"{a}={'|'.join(v)}" for a, v in labels(c["when"]).items())
                    + " requires "
                    + ", ".join(f"{a} in {v}" for a, v in labels(c["require"]).items())
                )
                break
        choices = {ax.name: ax.shown[i] for ax, i in zip(search.axes, combo)}
        if reason:
            excluded.append((choices, reason))
            continue
        args, env = {}, {}
        for ax, i in zip(search.axes, combo):
            args.update(ax.settings[i]["args"])
            env.update(ax.settings[i]["env"])
        candidates.append(Candidate(len(candidates) + 1, choices, args, env))
    return candidates, excluded


# --------------------------------------------------------------------------------------------------
# Hosts, rendering, pruning, keys


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
    p = prof.resolve(name, candidate_profiles(search, cand, host_profiles, name))
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
    doc = {"candidate": cand_key, "workload": asdict(workload), "vars": deploy_vars, "repeat": repeat}
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
    concurrency = max(search.workload.concurrency)
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
                launch = prof.render("tune-candidate", {"tune-candidate": body}, h.settings, h.sglang_version)
            except prof.ProfileError as exc:
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


# --------------------------------------------------------------------------------------------------
# Result store


class Store:
    """One JSON file per run key under a folder; each written atomically (bench's writer: private temp file, fsync,
    rename). Its folders must not be links: a report or record would land wherever a planted one points."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    def _path(self, key: str) -> Path:
        return self.root / "runs" / f"{key}.json"

    def check(self) -> None:
        """SearchError naming the fix when the store's folders cannot be written safely."""
        for folder in (self.root, self.root / "runs", self.report_dir):
            if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
                raise SearchError(
                    f"{folder} is a link or not a folder: the results are written only into real folders; remove "
                    "it or give --out a new folder"
                )

    def get(self, key: str) -> dict | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return None  # a damaged record is measured again

    def put(self, key: str, record: dict) -> Path:
        return self._write(self._path(key), record)

    def _write(self, path: Path, doc: dict) -> Path:
        self.check()
        return Path(write_file(json.dumps(doc, indent=2, default=str) + "\n", str(path), sync=True))

    def meta(self) -> dict:
        """The search's own record (search.json): spent_s, the seconds every run of it took together, and before,
        what each host served when it began (kept until restored)."""
        try:
            doc = json.loads((self.root / "search.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def update_meta(self, **fields) -> None:
        """Set these fields of search.json (None removes one)."""
        doc = {k: v for k, v in {**self.meta(), **fields}.items() if v is not None}
        self._write(self.root / "search.json", doc)

    def records(self) -> list:
        return [r for r in (self.get(p.stem) for p in sorted((self.root / "runs").glob("*.json"))) if r]


def level_metrics(result: dict) -> dict:
    """concurrency (str) -> {metric: value} from a benchmark result (bench.run_benchmark's dict)."""
    out = {}
    for level in result.get("levels") or []:
        row = {"completed": level.get("completed"), "requests": level.get("requests")}
        for metric, (key, stat, _) in METRICS.items():
            value = level.get(key)
            if stat is not None:
                value = value.get(stat) if isinstance(value, dict) else None
            row[metric] = value
        out[str(level["concurrency"])] = row
    return out


def metric_value(record: dict, metric: str, concurrency: int) -> float | None:
    """A metric of one run: the mean over hosts (one host: its value)."""
    values = [
        m[str(concurrency)][metric]
        for m in (record.get("metrics") or {}).values()
        if str(concurrency) in m and m[str(concurrency)].get(metric) is not None
    ]
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------------------
# The search loop


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


@dataclass
class Outcome:
    """Everything a search found: the plan (pruned with reasons), the runs, rankings and winners."""

    search: Search
    planned: list
    excluded: list
    records: list = field(default_factory=list)  # run records (stored and new) of runnable candidates
    new_runs: int = 0
    skipped_budget: list = field(default_factory=list)  # candidates not measured: budget spent
    unplanned: int = 0  # candidates not even rendered: the budget was met while planning
    interrupted: bool = False  # the time budget ran out
    cancelled: bool = False  # Ctrl-C
    emulated: bool = False
    elapsed_s: float = 0.0
    time_to_winner_s: float | None = None
    rankings: dict = field(default_factory=dict)  # objective name -> [row]
    decisions: dict = field(default_factory=dict)  # objective name -> {winner, tied, reason}
    budget: str = "none"

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
            "not_planned_budget": self.unplanned,
            "new_runs": self.new_runs,
        }


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
    say = on_progress or (lambda text: None)
    out = Outcome(search=search, planned=planned, excluded=excluded, budget=budget.text, unplanned=unplanned)
    t0 = clock()
    earlier_s = float(store.meta().get("spent_s") or 0)  # earlier runs of this search (interrupted, resumed)
    runnable = out.runnable
    by_key: dict = {}

    def spent() -> bool:
        return budget.seconds is not None and clock() - t0 >= budget.seconds

    def elapsed() -> float:
        """Seconds of the whole search: this run and the earlier ones."""
        return round(earlier_s + clock() - t0, 3)

    def measure(p: Planned, workload: Workload, stage: str, repeat: int, label: str) -> dict | None:
        key = run_key(p.key, workload, search.vars, repeat)
        rec = store.get(key)
        if rec is not None:
            say(f"{label}: stored result ({rec['status']}) for candidate {p.candidate.index} [{p.key}]")
        else:
            if spent():
                return None
            say(f"{label}: candidate {p.candidate.index} [{p.key}] {p.candidate.label}")
            started = clock()
            fields = deploy(p, workload, stage, repeat)
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
                "elapsed_s": round(clock() - started, 3),
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "elapsed_at_s": elapsed(),
                **fields,
            }
            store.put(key, rec)
            store.update_meta(spent_s=elapsed())
            out.new_runs += 1
            say(
                f"{label}: candidate {p.candidate.index} {rec['status']}"
                + (f" ({rec.get('kind')})" if rec["status"] == FAILED else "")
            )
        out.records.append(rec)
        by_key.setdefault(p.key, []).append(rec)
        return rec

    try:
        # Stage 1: every runnable candidate, until the budget is spent.
        stage1 = "short" if search.short else "full"
        measured = 0
        for i, p in enumerate(runnable, 1):
            if budget.candidates is not None and measured >= budget.candidates or spent():
                out.skipped_budget = runnable[i - 1 :]
                break
            rec = measure(p, search.stage1, stage1, 0, f"[{i}/{len(runnable)}] {stage1}")
            if rec is None:
                out.skipped_budget = runnable[i - 1 :]
                break
            measured += 1

        def top(n: int, stage: str) -> list:
            """The union over objectives of the n best candidates with an ok run of the stage, within limits."""
            chosen: list = []
            for obj in search.objectives:
                rows = ranking(search, obj, runnable, by_key, stage)
                for row in [r for r in rows if r["within_limits"]][:n]:
                    p = next(q for q in runnable if q.key == row["key"])
                    if p not in chosen:
                        chosen.append(p)
            return chosen

        if search.short and not spent():
            finalists = top(search.full_top, "short")
            for j, p in enumerate(finalists, 1):
                if measure(p, search.workload, "full", 0, f"[full {j}/{len(finalists)}]") is None:
                    break
        if search.repeat_times > 1 and search.repeat_top and not spent():
            again = top(search.repeat_top, "full")
            rounds = [(r, j, p) for r in range(1, search.repeat_times) for j, p in enumerate(again, 1)]
            for r, j, p in rounds:  # rounds interleave the candidates: drift hits them alike
                if (
                    measure(p, search.workload, "full", r, f"[repeat {r + 1}/{search.repeat_times}, {j}/{len(again)}]")
                    is None
                ):
                    break
    except KeyboardInterrupt:  # Ctrl-C (the deploy was cancelled): keep what is stored, report it
        out.cancelled = True
    out.interrupted = spent()
    out.elapsed_s = elapsed()
    store.update_meta(spent_s=out.elapsed_s)
    evaluate(out, by_key)
    return out


def _spread(values: list) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def ranking(search: Search, obj: Objective, planned: list, by_key: dict, stage: str = "full") -> list:
    """Rows best first for one objective: candidates with an ok run of the stage, value = median over repeats;
    candidates outside a limit come last (within_limits false)."""
    rows = []
    for p in planned:
        recs = [r for r in by_key.get(p.key, []) if r["stage"] == stage and r["status"] == OK]
        values = [v for v in (metric_value(r, obj.metric, obj.concurrency) for r in recs) if v is not None]
        if not values:
            continue
        broken = []
        for lim in search.limits:
            lv = [v for v in (metric_value(r, lim.metric, lim.concurrency) for r in recs) if v is not None]
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


# --------------------------------------------------------------------------------------------------
# Promotion


def limits_broken(outcome: Outcome, p: Planned) -> list:
    """The limits of the search that candidate ``p`` broke with the full workload (the rankings' texts)."""
    rows = outcome.rankings.get(outcome.search.objectives[0].name, [])
    return next((r["limits_broken"] for r in rows if r["key"] == p.key), [])


def promotion_body(
    search: Search, p: Planned, outcome: Outcome | None = None, base_profiles: dict | None = None
) -> dict:
    """The winner as a profile: extends the base profile (a named one) with the candidate's own args/env. A null
    (remove the key) is kept only where the base, resolved in ``base_profiles``, sets that key."""
    obj = search.objectives[0]
    desc = f"Found by `sglang-deploy tune` (search {search.name}): {p.candidate.label}."
    if outcome is not None:
        row = next((r for r in outcome.rankings.get(obj.name, []) if r["key"] == p.key), None)
        if row:
            desc += f" {obj.name}: median {row['median']:.1f} over {row['n']} run(s)"
            desc += " (synthetic, lab emulator)." if outcome.emulated else "."
    if isinstance(search.base, str):
        base = prof.resolve(search.base, base_profiles) if base_profiles else None
        body: dict = {"description": desc, "extends": search.base}
        for part, own in (("args", p.candidate.args), ("env", p.candidate.env)):
            inherited = getattr(base, part) if base else None
            kept = {k: v for k, v in own.items() if v is not None or inherited is None or k in inherited}
            if kept:
                body[part] = kept
        return body
    return {"description": desc, "args": p.body["args"], "env": p.body["env"]}


def _round_trip():
    from ruamel.yaml import YAML

    ry = YAML()
    ry.preserve_quotes = True
    ry.width = 110
    ry.indent(mapping=2, sequence=4, offset=2)
    return ry


def check_promotion(name: str | None, path: str | Path) -> tuple[str, Any]:
    """(text, round-trip document) of the group_vars file ``path`` ('' and an empty mapping when new), or
    SearchError naming the fix when the winner cannot be promoted as ``name`` into it: a bad profile name (../x),
    a folder, a link, a file that is not regular, not YAML, or a sglang_profiles that is not a mapping."""
    from ruamel.yaml.comments import CommentedMap

    if not isinstance(name, str) or not prof.NAME_RE.match(name):
        raise SearchError(f"profile name {name!r}: letters, digits, '_', '.', '-' only (it names a profile)")
    try:
        check_dest(str(path))
    except ValueError as exc:
        raise SearchError(f"--into: {exc}") from exc
    path = Path(path)
    try:
        old = prof.read_text(path) if path.exists() else ""
        doc = _round_trip().load(old) if old.strip() else CommentedMap()
    except prof.ProfileError as exc:
        raise SearchError(str(exc)) from exc
    except Exception as exc:  # ruamel raises several parser error types
        raise SearchError(f"{path} is not valid YAML: {exc}") from exc
    if not hasattr(doc, "keys"):
        raise SearchError(f"{path}: expected a mapping of variables (a group_vars file)")
    if not hasattr(doc.get(prof.PROFILES_VAR, {}), "keys"):
        raise SearchError(f"{path}: {prof.PROFILES_VAR} must be a mapping")
    return old, doc


def promote_profile(path: str | Path, name: str, body: dict, host_profiles: dict | None = None) -> tuple[str, str]:
    """Write profile ``name`` into sglang_profiles of the YAML file ``path``; returns (diff, new text).

    Comments and order are kept (ruamel round trip). A file without sglang_profiles gets a copy of the profiles
    the hosts use now (``host_profiles``) plus the new one: Ansible replaces a whole variable, so a mapping with
    only the new profile would hide the others from those hosts.
    """
    path = Path(path)
    old, doc = check_promotion(name, path)
    if prof.PROFILES_VAR not in doc:
        if not host_profiles:
            raise SearchError(
                f"{path} has no {prof.PROFILES_VAR}, and the hosts' profiles are unknown: name the "
                "file that defines it (group_vars/all/profiles.yml) or copy its entries there first"
            )
        doc[prof.PROFILES_VAR] = json.loads(json.dumps(host_profiles))
    profiles_map = doc[prof.PROFILES_VAR]
    base = body.get("extends")
    if base is not None and base not in profiles_map:
        raise SearchError(f"{path}: the winner extends {base!r}, which this file's {prof.PROFILES_VAR} lacks")
    profiles_map[name] = json.loads(json.dumps(body))
    try:
        prof.resolve(name, json.loads(json.dumps(profiles_map)))
    except prof.ProfileError as exc:
        raise SearchError(f"{path}: the promoted profile does not resolve: {exc}") from exc
    buf = io.StringIO()
    if not old:
        buf.write("---\n")
    _round_trip().dump(doc, buf)
    new = buf.getvalue()
    if old.startswith("---") and not new.startswith("---"):
        new = "---\n" + new
    diff = _promotion_diff(path, old, new)
    # The file keeps its mode: group_vars may hold secrets in a 0600 file.
    write_file(new, str(path), mode=path.stat().st_mode & 0o7777 if path.exists() else 0o644)
    return diff, new


_TOP_KEY = re.compile(r"""(?:"([^"]*)"|'([^']*)'|([^\s#'"-][^:#]*?))\s*:(?:\s|$)""")


def _variable_of_each_line(lines: list) -> list:
    """The top-level variable each line of a group_vars file belongs to (None before the first)."""
    out, current = [], None
    for line in lines:
        m = _TOP_KEY.match(line)
        if m:
            current = next(g for g in m.groups() if g is not None)
        elif line[:1] not in ("", " ", "\t", "\n", "\r"):  # a comment, '---' or '...' in column 0 ends it
            current = None
        out.append(current)
    return out


def _promotion_diff(path: Path, old: str, new: str) -> str:
    """The changed lines (no context) of sglang_profiles, secrets masked; lines of other variables that the rewrite
    changed are counted, never shown (a private key block or a folded password's tail would be printed)."""
    a, b = old.splitlines(True), new.splitlines(True)
    owner_a, owner_b = _variable_of_each_line(a), _variable_of_each_line(b)
    hunks, hidden = [], 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        rows = [("-", a[i], owner_a[i]) for i in range(i1, i2)] + [("+", b[j], owner_b[j]) for j in range(j1, j2)]
        shown = [sign + line.rstrip("\r\n") + "\n" for sign, line, var in rows if var in (None, prof.PROFILES_VAR)]
        hidden += len(rows) - len(shown)
        if shown:
            hunks.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@\n")
            hunks += [_mask_secret_line(line) for line in shown]
    if hidden:
        hunks.append(f"({hidden} changed lines of other variables not shown)\n")
    return "".join([f"--- {path} (before)\n", f"+++ {path} (after)\n", *hunks]) if hunks else ""


_YAML_KEY_LINE = re.compile(r"([ +-]\s*(?:-\s+)?)([^\s:#][^:#]*?)(\s*:\s+)(\S.*?)(\r?\n?)$")


def _mask_secret_line(line: str) -> str:
    """A diff line `key: value` with the value masked when the key names a secret (the diff is printed)."""
    m = _YAML_KEY_LINE.match(line)
    if m and is_secret_name(m.group(2).strip("'\"")):
        return f"{m.group(1)}{m.group(2)}{m.group(3)}***{m.group(5)}"
    return line
