"""The search file of a flag-matrix search: what it holds (Search and its parts) and its parser, which refuses
anything a search cannot use with what to fix (SearchError).

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
    # or any setting of `sglang-deploy bench` by its engine name (docs/tune.md), e.g. request rates under an SLA:
    #   workload: {dataset_name: custom, dataset_path: traffic.jsonl, request_rate: [2, 8], max_concurrency: 64,
    #              slo: {ttft_p99_ms: 2000, tpot_p99_ms: 50}, sla_search: [1, 32]}
    objectives:                          # the first one decides the winner that --promote writes
      - {metric: decode_tok_s, concurrency: 1}            # goal: max for tok/s, min for times (default)
      - {metric: output_tok_s, concurrency: 32}
      # - {metric: goodput_req_s, rate: 8}               # a request-rate level (needs workload.slo)
      # - {metric: sla_rate_req_s}                       # the SLA search's highest rate (needs sla_search, slo)
    limits:
      - {metric: ttft_p99_ms, concurrency: 32, max: 2000}
    two_stage: {workload: {output_len: 64, requests: 8}, top: 4}   # optional: short run for all, full for the top
    repeat: {top: 3, times: 3}           # the top candidates of each objective measured this often in all
    noise: 0.02                          # relative gap under which two medians are a tie
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..compare import bench_vars, noise
from ..launch import formats, profiles
from ansible_collections.sglang.deploy.plugins.module_utils import bench
from ..compare.figures import METRICS, RESULT_METRICS, SLA_LEVEL, TRACE_LEVEL, level_key
from .measures import WORKLOAD_KEYS, Limit, Objective, Workload, engine_settings
from ..secret_names import MASK, is_secret_name, mask_secrets

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
ENV_PREFIX = "env."
DEFAULT_NOISE = 0.02


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
    and a URL's user part (with its password) and every other secret it holds (?token=, a secret-named JSON key:
    secret_names.mask_secrets) masked; the search itself keeps the label."""
    if key is not None and is_secret_name(key):
        return MASK
    return _USERINFO.sub(f"://{MASK}@", mask_secrets(label))


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
    # arrivals that are not closed-loop levels: request rates, an SLA search or a trace's timestamps
    rated = values.get("request_rate") is not None or values.get("sla_search") is not None
    conc = values.get("concurrency", None if base or rated or values.get("dataset_name") == "trace" else ())
    conc = list(conc) if isinstance(conc, tuple) else conc
    if conc is not None:
        _need(
            isinstance(conc, list) and conc and all(isinstance(c, int) and c > 0 for c in conc),
            f"{where}.concurrency: a list of positive integers, e.g. [1, 32]",
        )
        values["concurrency"] = tuple(sorted(set(conc)))
    for key, setting in bench.WORKLOAD.items():  # a whole number as such (its bounds: check_workload)
        if setting.type == "int" and values.get(key) is not None:
            _need(type(values[key]) is int, f"{where}.{key}: a whole number, e.g. {setting.default or 1}")
    try:
        _, _, data = bench.check_workload(**engine_settings(values))
    except (TypeError, ValueError) as exc:
        raise SearchError(f"{where}: {exc}") from exc
    values["dataset_sha256"] = data.info["dataset_sha256"]
    if values.get("request_rate") is not None:
        rates = values["request_rate"]
        values["request_rate"] = tuple(
            bench.parse_rates(",".join(map(str, rates)) if isinstance(rates, (list, tuple)) else rates)
        )
    if values.get("sla_search") is not None:
        values["sla_search"] = tuple(float(r) for r in values["sla_search"])
    if values.get("dataset_path"):  # on the controller; the role copies it from there to each host
        values["dataset_path"] = bench_vars.controller_path(values["dataset_path"])
    return Workload(**values)


# How a message about an objective or a limit names its parts and fixes: (in a search file, on compare's command
# line). A `where` that starts with -- is compare's --objective or --require text (cli/workload.py).
_SAY = {
    "metric": ("{where}.metric {value}", "{where}: metric {value}"),
    "concurrency": ("{where}.concurrency {value}", "{where}: @c={value}"),
    "rate": ("{where}.rate {value}", "{where}: @rate={value}"),
    "give level": (
        "give the level, concurrency: N (a closed-loop level) or rate: R (a request-rate level)",
        "give the level, @c=N (a closed-loop level) or @rate=R (a request-rate level)",
    ),
    "no level": ("no concurrency or rate", "no @c=N or @rate=R"),
    "slo": (
        "give the workload its slo, e.g. slo: {ttft_p99_ms: 2000, tpot_p99_ms: 50}",
        "give --slo, e.g. --slo ttft_p99_ms=2000,tpot_p99_ms=50",
    ),
    "sla_search": (
        "give the workload sla_search: [LOW, HIGH] (requests per second)",
        "give --sla-search LOW,HIGH (requests per second), e.g. --sla-search 1,32",
    ),
    "add concurrency": ("add it there", "add it to --concurrency"),
    "add rate": ("add it there", "add it to --request-rate"),
    "bound": (
        "give one numeric bound, max: or min:, a finite number (not nan or inf)",
        "give one bound, <=X or >=X, X a finite number (not nan or inf)",
    ),
}


def _say(where: str, part: str, value: Any = "") -> str:
    """A part of a message about an objective or a limit (_SAY) in the syntax of where it was written."""
    return _SAY[part][where.startswith("--")].replace("{where}", where).replace("{value}", str(value))


def _metric(raw: dict, where: str, workload: Workload) -> tuple[str, int | None, float | None, bool]:
    """(metric, concurrency, rate, trace) of an objective or a limit: a level of the workload (concurrency: N or
    rate: R), none for a metric of the SLA search or of a trace's replay (trace True: its one level)."""
    _need(isinstance(raw, dict), f"{where}: a mapping {{metric: ..., concurrency: N}} (or rate: R)")
    metric, conc, rate = raw.get("metric"), raw.get("concurrency"), raw.get("rate")
    known = [*METRICS, *RESULT_METRICS]
    _need(metric in known, f"{_say(where, 'metric', repr(metric))}: use one of {', '.join(known)}")
    if metric in ("goodput_req_s", *RESULT_METRICS):
        _need(bool(workload.slo), f"{where}: {metric} counts against the SLOs: {_say(where, 'slo')}")
    if metric in RESULT_METRICS:
        _need(
            workload.sla_search is not None,
            f"{where}: {metric} is the SLA search's highest rate: {_say(where, 'sla_search')}",
        )
        _need(conc is None and rate is None, f"{where}: {metric} is one value per run: {_say(where, 'no level')}")
        return metric, None, None, False
    if TRACE_LEVEL in workload.levels():
        _need(conc is None and rate is None, f"{where}: a trace is replayed as one level: {_say(where, 'no level')}")
        return metric, None, None, True
    _need((conc is None) != (rate is None), f"{where}: {_say(where, 'give level')}")
    if rate is not None:
        _need(
            isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0,
            f"{_say(where, 'rate', repr(rate))}: requests per second above 0",
        )
        rate = float(rate)
    levels = workload.levels()
    if rate is not None:
        rates = [float(k.removeprefix("rate=")) for k in levels if k.startswith("rate=")]
        _need(
            level_key(conc, rate) in levels,
            f"{_say(where, 'rate', format(rate, 'g'))}: not a request rate of the workload {rates or '(none)'}; "
            + _say(where, "add rate"),
        )
    else:
        concs = [int(k) for k in levels if k.isdigit()]
        _need(
            level_key(conc, rate) in levels,
            f"{_say(where, 'concurrency', repr(conc))}: not a level of the workload {concs or '(none)'}; "
            + _say(where, "add concurrency"),
        )
    return metric, conc, rate, False


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


def template_at(doc: Any) -> str | None:
    """The place of the first Jinja template in a key or value of ``doc``, or None."""
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
            return where
    return None


def _check_no_template(doc: Any) -> None:
    """SearchError naming the place of the first Jinja template in a key or value of ``doc``."""
    where = template_at(doc)
    if where is not None:
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
    axes = _axes(doc.get("axes"))
    constraints = _constraints(doc.get("constraints") or [], {ax.name: ax for ax in axes})
    workload = _workload(doc.get("workload"), "workload")
    objectives = _objectives(doc.get("objectives"), workload)
    limits = _limits(doc.get("limits") or [], workload)
    short, full_top = _two_stage(doc.get("two_stage"), workload, objectives + limits)
    repeat_top, repeat_times = _repeat(doc.get("repeat"))
    noise = doc.get("noise", DEFAULT_NOISE)
    _need(isinstance(noise, (int, float)) and 0 <= noise < 1, "noise: a fraction, e.g. 0.02 for 2%")
    extra = _vars(doc.get("vars") or {})
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
        vars=extra,
        path=path,
    )


def _axes(raw_axes: Any) -> list:
    """The axes, within the work limits, no two of them setting the same key."""
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
    return axes


def _constraints(raw: Any, by_name: dict) -> list:
    """Each constraint as {exclude: {axis: labels}} or {when: ..., require: ...}, labels as frozensets."""
    constraints = []
    for i, c in enumerate(raw):
        where = f"constraints[{i}]"
        _need(
            isinstance(c, dict) and (set(c) == {"exclude"} or set(c) == {"when", "require"}),
            f"{where}: either {{exclude: {{axis: label}}}} or {{when: {{axis: label}}, require: {{axis: [labels]}}}}",
        )
        constraints.append({kind: _condition(body, f"{where}.{kind}", by_name) for kind, body in c.items()})
    return constraints


def _condition(body: Any, where: str, by_name: dict) -> dict:
    _need(isinstance(body, dict) and body, f"{where}: a mapping axis -> label(s)")
    norm = {}
    for axis, wanted in body.items():
        _need(axis in by_name, f"{where}: unknown axis {axis!r}; axes: {', '.join(by_name)}")
        labels = [_label(w) for w in (wanted if isinstance(wanted, list) else [wanted])]
        bad = [lb for lb in labels if lb not in by_name[axis].labels]
        _need(not bad, f"{where}.{axis}: {', '.join(bad)} not among its values ({', '.join(by_name[axis].labels)})")
        norm[axis] = frozenset(labels)
    return norm


def _objectives(raw: Any, workload: Workload) -> list:
    _need(isinstance(raw, list) and raw, "objectives: a list, e.g. [{metric: decode_tok_s, concurrency: 1}]")
    return [objective(o, f"objectives[{i}]", workload) for i, o in enumerate(raw)]


def objective(raw: Any, where: str, workload: Workload) -> Objective:
    """An Objective of ``workload`` from {metric:, concurrency: or rate:, goal:}; SearchError naming the fix."""
    metric, conc, rate, trace = _metric(raw, where, workload)
    goal = raw.get("goal", {**METRICS, **RESULT_METRICS}[metric][2])
    _need(goal in ("max", "min"), f"{where}.goal: max or min")
    return Objective(metric, conc, goal, rate, trace)


def _limits(raw: Any, workload: Workload) -> list:
    return [limit(lim, f"limits[{i}]", workload) for i, lim in enumerate(raw)]


def limit(raw: Any, where: str, workload: Workload) -> Limit:
    """A Limit of ``workload`` from {metric:, concurrency: or rate:, max: or min:}; SearchError naming the fix."""
    metric, conc, rate, trace = _metric(raw, where, workload)
    bounds = {k: raw.get(k) for k in ("max", "min") if raw.get(k) is not None}
    _need(
        len(bounds) == 1
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in bounds.values()),
        f"{where}: {_say(where, 'bound')}",
    )
    return Limit(metric, conc, rate=rate, trace=trace, **{k: float(v) for k, v in bounds.items()})


def _two_stage(ts: Any, workload: Workload, measured: list) -> tuple[Workload | None, int]:
    """(the short workload, how many candidates get the full one); (None, 0) without two_stage."""
    if ts is None:
        return None, 0
    _need(
        isinstance(ts, dict) and set(ts) == {"workload", "top"} and isinstance(ts["top"], int) and ts["top"] > 0,
        "two_stage: {workload: {output_len: 64, requests: 8}, top: N} (the short workload's changes, N >= 1)",
    )
    short = _workload(ts["workload"], "two_stage.workload", workload)
    levels = short.levels()
    for obj in measured:
        if obj.level == SLA_LEVEL:
            what = "two_stage.workload must keep the SLA search"
        elif obj.rate is not None:
            what = f"two_stage.workload.request_rate must keep rate {obj.rate:g}"
        else:
            what = f"two_stage.workload.concurrency must keep level {obj.concurrency}"
        _need(obj.level in levels, f"{what} (objectives and limits use it)")
    return short, ts["top"]


def _repeat(rp: Any) -> tuple[int, int]:
    """(top, times); (0, 1) without repeat."""
    if rp is None:
        return 0, 1
    _need(
        isinstance(rp, dict)
        and set(rp) == {"top", "times"}
        and isinstance(rp["top"], int)
        and rp["top"] >= 1
        and noise.valid_repeats(rp["times"]),
        f"repeat: {{top: N, times: M}}: the top N candidates of each objective measured M times in all, M at most "
        f"{noise.MAX_REPEATS}",
    )
    return rp["top"], rp["times"]


def _vars(extra: Any) -> dict:
    _need(
        isinstance(extra, dict) and all(isinstance(k, str) and k.isidentifier() for k in extra),
        "vars: a mapping of extra variables for every deploy, each name a variable name (letters, digits, '_')",
    )
    for key, value in extra.items():
        _check_var(key, value)
    return dict(extra)


def load_search(path: str | Path) -> Search:
    path = Path(path)
    try:  # the profiles' reader: UTF-8, bounded aliases, values Python can hold
        doc = profiles.read_yaml(path)
    except profiles.ProfileError as exc:
        raise SearchError(str(exc)) from exc
    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    try:
        return parse_search(doc, name=name, path=str(path))
    except SearchError as exc:
        raise SearchError(f"{path}: {exc}") from exc
