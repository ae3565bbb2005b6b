"""Profile comparison: figures per concurrency level, the text table and the Markdown report (the plot:
compare_plot, the ranking by objectives: profile_ranking).

Pure functions over benchmark result dicts (bench.run_benchmark's), so they are tested on synthetic results;
api.compare() feeds them the results its deploys published: per host, and on a fleet also through the router
(rows with via "router": the aggregate the router's clients see).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sglang_deploy.compare import gate, noise
from sglang_deploy.compare.figures import comparable, first_difference
from sglang_deploy.compare.profile_ranking import rank_profiles, ratio
from ansible_collections.sglang.deploy.plugins.module_utils.bench import table
from ansible_collections.sglang.deploy.plugins.module_utils.files import write_files
from ansible_collections.sglang.deploy.plugins.module_utils.text import IN_LINES, escaped
from sglang_deploy.secret_names import mask_shown

SYNTHETIC_NOTE = "LAB: emulated SGLang server, these numbers are synthetic"
ARTIFACTS = ("report.md", "compare.png", "comparison.json")  # what write_report writes into --out


def result_stamp(started_at: object) -> str:
    """A result's start time as the stamp of its file name on the controller (20261201T061908+0000).

    The time comes from the host's module result: anything but an ISO 8601 time with a zone is refused, so a
    host cannot steer the fetched file outside results/.
    """
    try:
        when = datetime.fromisoformat(str(started_at)[:64])
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        shown = str(started_at)[:64].encode("unicode_escape").decode("ascii")
        raise ValueError(
            f"the benchmark result's started_at {shown!r} is not an ISO 8601 time with a zone: the host's "
            "sglang_bench module is not this project's; re-run playbooks/deploy.yml so it is shipped again"
        )
    return when.strftime("%Y%m%dT%H%M%S%z")


# (key of a row, table header, digits)
COLUMNS = (
    ("output_tok_s", "out tok/s", 1),
    ("output_ratio", "x first", 2),
    ("decode_tok_s", "dec tok/s", 1),
    ("decode_ratio", "x first", 2),
    ("ttft_p50_ms", "ttft p50 ms", 1),
    ("goodput_req_s", "good/s", 2),
    ("accept_length", "accept", 2),
)
HEADER = ("level", "profile", *(title for _unused, title, _unused in COLUMNS))


# The figures of a row: key -> (read from a benchmark level, goal). Each is kept over the repeats (min/median/max).
FIGURES = {
    "output_tok_s": (lambda lv: lv.get("output_throughput_tok_s"), "max"),
    "decode_tok_s": (lambda lv: table.stat(lv, "decode_tok_s_per_request", "mean"), "max"),
    "ttft_p50_ms": (lambda lv: table.stat(lv, "ttft_ms", "p50"), "min"),
    "goodput_req_s": (lambda lv: lv.get("goodput_req_s"), "max"),
    "accept_length": (lambda lv: (lv.get("spec_accept_length") or {}).get("value"), "max"),
}
# The figures each profile is judged on against the first (noise.verdict): (figure, ratio key, words).
JUDGED = (("output_tok_s", "output_ratio", "out tok/s"), ("decode_tok_s", "decode_ratio", "dec tok/s"))


@dataclass
class Comparison:
    """Profiles benchmarked, each `repeats` times interleaved, on the same hosts with the same settings.

    rows: one dict per (host, via, level, profile): each figure of FIGURES as its median over the repeats, `spread`
    (figure -> min/median/max/n) and `values` (figure -> the value of each repeat), the ratios of the medians of
    output and decode speed to the first profile's and `vs_first` (figure -> noise.verdict against the first
    profile). via is "host" (the host's own server, benchmarked on the host) or "router" (through the smg router on
    that host: the fleet's aggregate); routers: router host -> the replicas behind it; router_workload: the
    workload through them.
    """

    profiles: list
    rows: list = field(default_factory=list)
    runs: dict = field(default_factory=dict)  # profile -> [api.RunResult], one per deploy
    restores: list = field(default_factory=list)  # api.RunResult of the restoring deploys
    setups: list = field(default_factory=list)  # api.RunResult of a side-by-side compare's deploys (no benchmark)
    measured_order: list = field(default_factory=list)  # the deploys in the order they ran (profile names)
    plan: dict = field(default_factory=dict)  # api.comparison.plan_cost: deploys, restarts, the estimate
    floor: float = noise.DEFAULT_FLOOR  # the smallest difference a verdict calls
    settings: dict = field(default_factory=dict)
    workload: dict = field(default_factory=dict)
    emulated: bool = False
    routers: dict = field(default_factory=dict)
    router_workload: dict = field(default_factory=dict)
    sla: dict = field(default_factory=dict)  # profile -> {host: highest rate meeting the SLA, median} (sla_rates)
    objectives: list = field(default_factory=list)  # tune.Objective: what the profiles are ranked by
    limits: list = field(default_factory=list)  # tune.Limit: a profile outside one ranks after those within
    rankings: dict = field(default_factory=dict)  # objective name -> rows best first (rank_profiles)

    @property
    def all_runs(self) -> list:
        return [r for runs in self.runs.values() for r in runs]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in (*self.all_runs, *self.setups, *self.restores))

    @property
    def repeats(self) -> int:
        """The most deploys of one profile."""
        return max((len(runs) for runs in self.runs.values()), default=0)

    @property
    def hosts(self) -> list:
        """The hosts benchmarked on their own."""
        return sorted({r["host"] for r in self.rows if r["via"] == "host"})

    @property
    def targets(self) -> list:
        """(host, via) of every table: the hosts, then the routers."""
        return [(h, "host") for h in self.hosts] + [(h, "router") for h in sorted(self.routers)]

    def label(self, host: str, via: str) -> str:
        """The title of a table: each host alone, or through a router (what its clients see)."""
        if via == "router":
            replicas = self.routers.get(host) or []
            return f"through router {host} (the aggregate its clients see: {len(replicas)} replicas)"
        return f"host {host} (on its own, out of the router)" if self.routers else f"host {host}"

    def failures(self) -> dict:
        """profile -> [Failure] of its first failed deploy; 'restore <profile>' for failed restores."""
        out = {}
        for name, runs in self.runs.items():
            bad = next((r for r in (*runs, *(s for s in self.setups if s.profile == name)) if not r.ok), None)
            if bad is not None:
                out[name] = bad.failures
        for r in self.restores:
            if not r.ok:
                out[f"restore {r.profile}"] = r.failures
        return out

    def dropped(self) -> list:
        """A line per benchmark result dropped as unsound (compare.validate): which deploy, which host, why."""
        return [
            f"{name} (deploy {i}/{len(runs)}) on {host}: benchmark result dropped: {why}"
            for name, runs in self.runs.items()
            for i, r in enumerate(runs, 1)
            for host, why in r.dropped_benchmarks.items()
        ]

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "dropped": self.dropped(),
            "profiles": self.profiles,
            "repeats": self.repeats,
            "plan": self.plan,
            "floor": self.floor,
            "emulated": self.emulated,
            "settings": self.settings,
            "workload": self.workload,
            "routers": self.routers,
            "router_workload": self.router_workload,
            "sla": self.sla,
            "objectives": [o.name for o in self.objectives],
            "limits": [lim.text for lim in self.limits],
            "rankings": self.rankings,
            "quality": {name: [r.gate for r in runs] for name, runs in self.runs.items()},
            "fastest_that_answers_right": gate.leader_line(self.rows, self.runs),
            "rows": self.rows,
            "runs": {name: [r.to_dict() for r in runs] for name, runs in self.runs.items()},
            "restores": [r.to_dict() for r in self.restores],
            "setups": [r.to_dict() for r in self.setups],
            "measured_order": self.measured_order,
        }


def _levels(per_repeat: list, host: str) -> list:
    """{level name: level} of each repeat's result on ``host`` (repeats without one left out)."""
    out = []
    for per_host in per_repeat:
        res = per_host.get(host)
        if res:
            out.append({table.label(m): m for m in res.get("levels") or []})
    return out


def comparison_rows(
    profiles: list, results: dict, via: str = "host", ranked: bool = True, floor: float = noise.DEFAULT_FLOOR
) -> list:
    """results: profile -> [{host: benchmark result}], one per repeat. One row per host, level and profile
    (profile order): FIGURES over the repeats; ratios to the first profile and verdicts only when `ranked` (the
    workloads are comparable)."""
    rows = []
    hosts = sorted({h for per_repeat in results.values() for per_host in per_repeat for h in per_host})
    for host in hosts:
        per_profile = {p: _levels(results.get(p) or [], host) for p in profiles}
        names = list(dict.fromkeys(n for p in profiles for rep in per_profile[p] for n in rep))
        for level_name in names:
            base = None
            any_level = next(rep[level_name] for p in profiles for rep in per_profile[p] if level_name in rep)
            for i, name in enumerate(profiles):
                got = [rep[level_name] for rep in per_profile[name] if level_name in rep]
                values = {key: [read(lv) for lv in got] for key, (read, _unused) in FIGURES.items()}
                spread = {key: noise.spread(v) for key, v in values.items()}
                row = {
                    "host": host,
                    "via": via,
                    "level": level_name,
                    "concurrency": any_level["concurrency"],
                    "profile": name,
                    **{key: spread[key]["median"] for key in FIGURES},
                    "spread": spread,
                    "values": values,
                    "runs": len(got),
                    "completed": sum(lv["completed"] for lv in got),
                    "requests": sum(lv["requests"] for lv in got),
                    "missing": not got,
                    "vs_first": {},
                }
                if i == 0:
                    base = row
                for key, ratio_key, _unused in JUDGED:
                    row[ratio_key] = ratio(row[key], base[key]) if ranked else None
                    if ranked and i > 0:
                        row["vs_first"][key] = noise.verdict(base["values"][key], values[key], FIGURES[key][1], floor)
                rows.append(row)
    return rows


def _workload(results: dict) -> dict:
    """The workload of the first result (figures.COMPARABLE's settings), `same_for_all` when every result had it, and
    `differs`: the first setting that differs (None when comparable)."""
    workloads = [comparable(r) for per_repeat in results.values() for per in per_repeat for r in per.values()]
    differs = first_difference(workloads)
    first = workloads[0] if workloads else comparable({})
    full = next(
        (r.get("workload") or {} for per_repeat in results.values() for per in per_repeat for r in per.values()), {}
    )
    return {**first, "same_for_all": differs is None, "differs": differs, "lengths": lengths_text(full)}


def lengths_text(workload: dict) -> str:
    """The lengths a workload sent, as the reports say them: a trace's figures (table.describe), else in= out=."""
    if workload.get("dataset_name") == "trace":
        return table.describe(workload)
    return f"in={workload.get('input_len')} out={workload.get('output_len')} tokens"


def sla_rates(results: dict) -> dict:
    """profile -> {host: the highest rate meeting the SLA, the median over repeats} of the results that ran an SLA
    search."""
    found: dict = {}
    for name, per_repeat in results.items():
        for per_host in per_repeat:
            for host, res in per_host.items():
                if res.get("sla_search"):
                    found.setdefault(name, {}).setdefault(host, []).append(res["sla_search"]["best_rate"])
    return {name: {h: noise.spread(v)["median"] for h, v in per.items()} for name, per in found.items()}


def build_comparison(
    profiles: list,
    runs: dict,
    restores: list = (),
    settings: dict | None = None,
    objectives: list = (),
    limits: list = (),
    measured_order: list | None = None,
    plan: dict | None = None,
    floor: float = noise.DEFAULT_FLOOR,
    setups: list = (),
) -> Comparison:
    """A Comparison from each profile's deploy results (profile -> [api.RunResult], one per repeat, or one
    RunResult: their `benchmarks`, and their `router_benchmarks` on a fleet); ranked by the objectives
    (tune.Objective) within the limits (tune.Limit) when the profiles ran the same workload."""
    runs = {
        name: [] if name not in runs else list(runs[name]) if isinstance(runs[name], list) else [runs[name]]
        for name in profiles
    }
    results = {name: [r.benchmarks for r in rs if r.benchmarks] for name, rs in runs.items()}
    through = {name: [r.router_benchmarks for r in rs if r.router_benchmarks] for name, rs in runs.items()}
    routers: dict = {}
    for per_repeat in through.values():
        for per_router in per_repeat:
            for host, res in per_router.items():
                routers.setdefault(host, sorted((res.get("context") or {}).get("replicas") or {}))
    everything = [r for per in (*results.values(), *through.values()) for rep in per for r in rep.values()]
    workload, router_workload = _workload(results), _workload(through)
    return Comparison(
        profiles=list(profiles),
        rows=comparison_rows(profiles, results, ranked=workload["same_for_all"], floor=floor)
        + comparison_rows(profiles, through, via="router", ranked=router_workload["same_for_all"], floor=floor),
        runs=runs,
        restores=list(restores),
        setups=list(setups),
        measured_order=list(measured_order or [n for n, rs in runs.items() for _unused in rs]),
        plan=dict(plan or {}),
        floor=floor,
        settings=dict(settings or {}),
        workload=workload,
        emulated=any(r.get("server_emulated") for r in everything),
        routers=routers,
        router_workload=router_workload if routers else {},
        sla=sla_rates(results),
        objectives=list(objectives),
        limits=list(limits),
        rankings=rank_profiles(
            profiles,
            results,
            objectives,
            limits,
            {n: gate.deployed([*rs, *(s for s in setups if s.profile == n)]) for n, rs in runs.items()},
            floor,
        )
        if workload["same_for_all"]
        else {},
    )


def _ranking_lines(comp: Comparison) -> list:
    """A line per objective: the profiles best first with their values (the mean over hosts) and ratios to the
    first profile, those outside a limit marked; or why nothing is ranked."""
    lines = []
    for obj in comp.objectives:
        rows = comp.rankings.get(obj.name)
        head = f"{obj.name} ({obj.goal})" + (
            f" within {'; '.join(lim.text for lim in comp.limits)}" if comp.limits else ""
        )
        if not comp.workload.get("same_for_all", True):
            lines.append(f"{head}: not ranked, the workloads differ")
            continue
        ranked = [
            f"{r['rank']}. {r['profile']} {_spread_text(r['spread'], 2)}"
            + (f" (x{r['ratio']:.2f})" if r["ratio"] is not None and r["profile"] != comp.profiles[0] else "")
            + (" [tied with the leader at this noise]" if r.get("tied") else "")
            + ("" if r["within_limits"] else f" [over: {'; '.join(r['limits_broken'])}]")
            for r in rows or []
            if r["rank"] is not None
        ]
        left = [f"{r['profile']} ({r['not_ranked']})" for r in rows or [] if r["rank"] is None]
        lines.append(
            f"{head}: "
            + (", ".join(ranked) or "no profile measured it")
            + (f"; not ranked: {', '.join(left)}" if left else "")
        )
    return lines


def _spread_text(spread: dict, digits: int) -> str:
    """median, and (min-max) over more than one repeat."""
    text = table.fmt(spread["median"], digits)
    if spread["n"] > 1:
        text += f" ({table.fmt(spread['min'], digits)}-{table.fmt(spread['max'], digits)})"
    return text


def _cells(row: dict) -> list:
    if row["missing"]:
        return ["no result"] + ["-"] * (len(COLUMNS) - 1)
    return [
        _spread_text(row["spread"][key], digits) if key in row["spread"] else table.fmt(row[key], digits)
        for key, _unused, digits in COLUMNS
    ]


def verdict_lines(comp: Comparison, host: str, via: str) -> list:
    """A line per level and profile after the first: each judged figure against the first profile (noise.verdict)."""
    lines = []
    for row in (r for r in comp.rows if (r["host"], r["via"]) == (host, via) and r["vs_first"]):
        first = comp.profiles[0]
        parts = [
            noise.describe(row["vs_first"][key], words, first)
            for key, _unused, words in JUDGED
            if key in row["vs_first"]
        ]
        lines.append(f"{row['level']} {row['profile']}: " + "; ".join(parts))
    return lines


def repeats_note(comp: Comparison) -> str:
    """What the figures are over: the repeats, their order, and the rule of the verdicts."""
    n = comp.repeats
    if n < noise.MIN_RUNS:
        return (
            f"{n} run{'s' * (n != 1)} per profile: too few for a verdict (--repeats {noise.MIN_RUNS} or more for one)"
        )
    return (
        f"each figure: median (min-max) over {n} repeats, run in the order {' '.join(comp.measured_order)}; a verdict "
        f"needs the 95% bootstrap interval of the ratio of medians to exclude 1 and a difference over "
        f"{comp.floor:.0%}"
    )


def format_table(comp: Comparison) -> str:
    """Text table: per host, each concurrency level with one line per profile; a host's control characters (in a
    failure, a gate's problem) escaped (host/text.py)."""
    lines = []
    if comp.emulated:
        lines.append(SYNTHETIC_NOTE)
    w = comp.workload
    lines.append(
        f"{w.get('lengths') or lengths_text(w)}; out tok/s = aggregate output, "
        f"dec tok/s = per-request decode (mean); x first = ratio to {comp.profiles[0]}"
    )
    lines.append(repeats_note(comp))
    if not w.get("same_for_all", True):
        lines.append(f"NOT RANKED: the profiles ran different workloads ({w['differs']} differs)")
    if comp.routers:
        rw = comp.router_workload
        lines.append(f"through the router: {rw.get('lengths') or lengths_text(rw)}")
    for host, via in comp.targets:
        lines += [comp.label(host, via), *_text_grid(comp, host, via)]
        lines += ["  " + text for text in verdict_lines(comp, host, via)]
    for name, per_host in comp.sla.items():
        for host, rate in per_host.items():
            lines.append(f"{name} on {host}: highest rate meeting the SLA {table.fmt(rate, 2)} req/s")
    lines += [f"ranked by {text}" for text in _ranking_lines(comp)]
    lines += gate.lines(comp.runs) + [line for line in [gate.leader_line(comp.rows, comp.runs)] if line]
    return escaped("\n".join(lines + _failure_lines(comp) + comp.dropped()), IN_LINES)


def _target_rows(comp: Comparison, host: str, via) -> list:
    return [r for r in comp.rows if (r["host"], r["via"]) == (host, via)]


def _text_grid(comp: Comparison, host: str, via) -> list:
    """One target's levels as aligned text, a line per profile."""
    grid = [HEADER] + [[row["level"], row["profile"]] + _cells(row) for row in _target_rows(comp, host, via)]
    widths = [max(len(r[i]) for r in grid) for i in range(len(HEADER))]
    return [
        "  ".join(cell.ljust(widths[i]) if i == 1 else cell.rjust(widths[i]) for i, cell in enumerate(r)) for r in grid
    ]


def _failure_lines(comp: Comparison) -> list:
    lines = []
    for name, failures in comp.failures().items():
        for f in failures or []:
            lines.append(f"{name}: FAILED on {f.host}, task '{f.task}': {f.message.splitlines()[0]}")
        if not failures:
            bad = next((r for r in comp.runs.get(name, []) if not r.ok), None)
            lines.append(f"{name}: FAILED ({bad.error if bad is not None and bad.error else 'see artifacts'})")
    return lines


def runs_section(comp: Comparison) -> list:
    """The report's list of runs: every deploy with its status and artifacts, in the order they ran when it is not
    the order given."""
    out = ["## Runs", ""]
    if comp.setups:
        out += [
            f"{comp.plan.get('text', 'side by side')[:1].upper()}{comp.plan.get('text', 'side by side')[1:]}. "
            f"Benchmarked in this order: {', '.join(comp.measured_order)} "
            "(each round the reverse of the one before).",
            "",
        ]
    elif comp.measured_order and comp.measured_order != comp.profiles[: len(comp.measured_order)]:
        out += [
            f"Deployed in this order: {', '.join(comp.measured_order)} (each round the reverse of the one before, "
            "the profile the hosts are restored to last, so that the hosts it passed on stay on it; `--keep-order` "
            "starts from the order given).",
            "",
        ]
    out += ["| run | status | artifacts |", "|---|---|---|"]
    for name, runs in comp.runs.items():
        for i, r in enumerate(runs, 1):
            out.append(f"| deploy {name} ({i}/{len(runs)}) | {r.status} | `{r.artifacts}` |")
    for r in comp.setups:
        out.append(f"| deploy {r.profile} side by side (no benchmark) | {r.status} | `{r.artifacts}` |")
    for r in comp.restores:
        out.append(f"| restore {r.profile} (no benchmark) | {r.status} | `{r.artifacts}` |")
    return out


def markdown(comp: Comparison, plot_name: str | None = "compare.png") -> str:
    """The Markdown report; a host's control characters (in a failure, a gate's problem) escaped (host/text.py)."""
    w = comp.workload
    out = [f"# SGLang profile comparison: {' vs '.join(comp.profiles)}", ""]
    if comp.emulated:
        out += [f"> **{SYNTHETIC_NOTE}.** They exercise the pipeline; they say nothing about GPU performance.", ""]
    out += [
        f"- Date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Hosts: {', '.join(comp.hosts) or '(none benchmarked)'}",
        *(
            f"- Through router `{host}` (the aggregate its clients see): replicas {', '.join(replicas) or '?'}; "
            f"input {comp.router_workload.get('input_len')}, output {comp.router_workload.get('output_len')} tokens, "
            f"requests per level {json.dumps(comp.router_workload.get('requests_per_level'))}"
            for host, replicas in sorted(comp.routers.items())
        ),
        f"- Workload: {w.get('lengths') or lengths_text(w)} (forced), "
        f"requests per level {json.dumps(w.get('requests_per_level'))}"
        + ("" if w.get("same_for_all", True) else f" (**differs between profiles: {w['differs']}; not ranked**)"),
        *(
            f"- Highest request rate meeting the SLA {json.dumps(w.get('slo'))}: **{name}** "
            + ", ".join(f"{table.fmt(rate, 2)} req/s on `{host}`" for host, rate in per_host.items())
            for name, per_host in comp.sla.items()
        ),
        f"- Ratios (`x first`) are to **{comp.profiles[0]}**; `dec tok/s` is the per-request decode speed (mean), "
        "`out tok/s` the aggregate output throughput of the level.",
        f"- Repeats: {repeats_note(comp)}.",
        *([f"- Plan: {comp.plan['text']}."] if comp.plan.get("text") else []),
        *(f"- Ranked by {text}" for text in _ranking_lines(comp)),
        *(f"- {line[:1].upper()}{line[1:]}" for line in [gate.leader_line(comp.rows, comp.runs)] if line),
        *(f"- {line[:1].upper()}{line[1:]}" for line in gate.lines(comp.runs)),
        "",
    ]
    if plot_name:
        out += [f"![output and decode tok/s against concurrency]({plot_name})", ""]
    for host, via in comp.targets:
        out += _markdown_target(comp, host, via)
    dropped = [*(f"- {text}" for text in comp.dropped()), ""] if comp.dropped() else []
    out += _markdown_failures(comp) + dropped + runs_section(comp)
    return escaped("\n".join(out) + "\n", IN_LINES)


def _markdown_target(comp: Comparison, host: str, via) -> list:
    """One target's section: its levels as a table (the first profile in bold), then the verdicts."""
    out = [
        f"## {comp.label(host, via)}",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "|".join("---:" if i != 1 else "---" for i in range(len(HEADER))) + "|",
    ]
    for row in _target_rows(comp, host, via):
        cells = _cells(row)
        if row["profile"] == comp.profiles[0]:
            cells = [f"**{c}**" if c != "-" else c for c in cells]
        out.append("| " + " | ".join([row["level"], row["profile"]] + cells) + " |")
    out.append("")
    verdicts = verdict_lines(comp, host, via)
    if verdicts:
        out += ["Against " + f"**{comp.profiles[0]}**:", "", *(f"- {text}" for text in verdicts), ""]
    return out


def _markdown_failures(comp: Comparison) -> list:
    failures = comp.failures()
    if not failures:
        return []
    out = ["## Failures", ""]
    for name, items in failures.items():
        for f in items or []:
            out.append(f"- **{name}** on `{f.host}`, task *{f.task}*:")
            out += ["", "  ```", *("  " + line for line in f.message.splitlines()), "  ```", ""]
        if not items:
            out.append(f"- **{name}**: see the run's artifacts")
    return out + [""]


def write_report(comp: Comparison, out_dir=None) -> Path:
    """results/compare-<time>/ with ARTIFACTS, credentials masked, through host/files.write_files (a link refused)."""
    from sglang_deploy.paths import RESULTS

    out = out_dir or RESULTS / f"compare-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    has_figures = any(r["output_tok_s"] is not None for r in comp.rows)
    files = {"report.md": mask_shown(markdown(comp, "compare.png" if has_figures else None))}
    files["comparison.json"] = mask_shown(json.dumps(comp.to_dict(), indent=2, default=str) + "\n")
    if has_figures:
        from sglang_deploy.compare.compare_plot import plot  # matplotlib: only where there is something to plot

        files["compare.png"] = plot(comp)
    return Path(write_files(out, files))
