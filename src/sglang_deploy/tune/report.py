"""The report of a flag-matrix search (Outcome): text summary, Markdown, Pareto PNG, JSON.

Pure functions over the outcome; the API writes them under results/tune-<search>/.
"""

from __future__ import annotations

import io
import json
import re
from datetime import datetime
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.files import check_folder, write_files
from ..compare.compare_report import SYNTHETIC_NOTE
from ..secret_names import mask_shown
from .expansion import one_line
from .outcome import Outcome

PLOT_NAME = "pareto.png"
ARTIFACTS = ("report.md", PLOT_NAME, "outcome.json")


def _f(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _code(value, cell: bool = False) -> str:
    """A user value as Markdown inline code on one line: delimited by more backticks than it holds; in a table
    cell (``cell``) its '|' escaped."""
    text = one_line(value)
    ticks = "`" * (1 + max((len(r) for r in re.findall(r"`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    text = f"{ticks}{pad}{text}{pad}{ticks}"
    return text.replace("|", "\\|") if cell else text


def _spread(row: dict) -> str:
    if row["n"] == 1:
        return _f(row["median"])
    return f"{_f(row['median'])} ({_f(row['min'])}-{_f(row['max'])}, n={row['n']})"


def summary(out: Outcome) -> str:
    """Text for the terminal: counts, per objective the top five and the decision, failures."""
    c = out.counts()
    lines = [SYNTHETIC_NOTE] if out.emulated else []
    lines.append(
        f"search {out.search.name}: {c['expanded']} expanded, {c['excluded']} excluded by constraints, "
        f"{c['pruned']} pruned by the rules, {c['run']} run ({c['new_runs']} runs new this time), "
        f"{c['failed']} failed, {c['not_run_budget']} not run (budget {out.budget})"
        + (
            f", {c['not_run_wrong']} not run (they hold a combination that answered wrong)"
            if c["not_run_wrong"]
            else ""
        )
    )
    for obj in out.search.objectives:
        rows = out.rankings.get(obj.name, [])
        lines.append(f"{obj.name} ({obj.goal}):")
        for r in rows[:5]:
            flag = "" if r["within_limits"] else "  [over limit: " + "; ".join(r["limits_broken"]) + "]"
            lines.append(f"  {r['rank']:>2}. {_spread(r):<34} #{r['candidate']} {r['label']}{flag}")
        d = out.decisions.get(obj.name) or {}
        lines.append(f"  => {_decision_text(out, d)}")
    for p, r in out.failed():
        first = (r.get("error") or "").strip().splitlines()[:1]
        lines.append(
            f"FAILED #{p.candidate.index} ({one_line(r.get('kind'))}): {p.candidate.label}: "
            + one_line(first[0] if first else "")
        )
    return "\n".join(lines)


def _label_of(out: Outcome, key: str) -> str:
    p = next((q for q in out.runnable if q.key == key), None)
    return f"#{p.candidate.index} {p.candidate.label}" if p else key


def _decision_text(out: Outcome, d: dict) -> str:
    if d.get("winner"):
        return f"winner {_label_of(out, d['winner'])}: {d['reason']}"
    if d.get("tied"):
        return f"no winner: {d['reason']}: " + "; ".join(_label_of(out, k) for k in d["tied"])
    return f"no winner: {d.get('reason', 'nothing measured')}"


def pareto_front(points: list) -> list:
    """Indexes of the points (x, y), both to maximise, that no other point beats in both."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return front


def plot_points(out: Outcome) -> tuple:
    """(x objective, y objective, points) for the plot, the first two objectives: per candidate measured for both
    {planned, x, y (ranking rows), over (broke a limit), front (on the Pareto front of those within the limits)}."""
    objs = out.search.objectives
    if len(objs) < 2:
        return None, None, []
    xo, yo = objs[0], objs[1]
    xs = {r["key"]: r for r in out.rankings.get(xo.name, [])}
    ys = {r["key"]: r for r in out.rankings.get(yo.name, [])}
    pts = [
        {"planned": p, "x": xs[p.key], "y": ys[p.key], "over": not xs[p.key]["within_limits"], "front": False}
        for p in out.runnable
        if p.key in xs and p.key in ys
    ]
    sx, sy = (1 if o.goal == "max" else -1 for o in (xo, yo))
    ok = [pt for pt in pts if not pt["over"]]
    for i in pareto_front([(sx * pt["x"]["median"], sy * pt["y"]["median"]) for pt in ok]):
        ok[i]["front"] = True
    return xo, yo, pts


def markdown(out: Outcome, plot_name: str | None = PLOT_NAME, promote_hint: str | None = None) -> str:
    """The report; ``promote_hint``: the command that promotes the winner (the command line spells it)."""
    lines = [f"# Flag-matrix search `{out.search.name}`", ""]
    if out.emulated:
        lines += [f"> **{SYNTHETIC_NOTE}** (the emulator's synthetic performance model, not a GPU).", ""]
    lines += _settings(out)
    if plot_name:
        lines += [f"![Pareto plot]({plot_name})", ""]
    for obj in out.search.objectives:
        lines += _ranking_table(out, obj)
    lines += _winner(out, promote_hint) + _failed(out) + _not_run(out)
    return "\n".join(lines) + "\n"


def _settings(out: Outcome) -> list:
    """The search's settings and counts, one bullet each."""
    s, c, w = out.search, out.counts(), out.search.workload
    base = _code(s.base) if isinstance(s.base, str) else "inline " + _code(json.dumps(s.base))
    lines = [
        f"- Date: {datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Base profile: {base}; axes: "
        + "; ".join(f"{_code(a.name)} = {', '.join(_code(lb) for lb in a.shown)}" for a in s.axes),
        f"- Workload: {w.describe()}, requests per level {w.requests or 'default'}"
        + (
            f"; two-stage: short output {s.short.output_len} tokens for all, full for the top {s.full_top}"
            if s.short
            else ""
        ),
        f"- Candidates: {c['expanded']} expanded, {c['excluded']} excluded by constraints, {c['pruned']} pruned "
        f"by the rules, {c['run']} run, {c['failed']} failed, {c['not_run_budget']} not run (budget {out.budget})",
        f"- Repeats: top {s.repeat_top} of each objective measured {s.repeat_times} times; "
        f"a winner needs the 95% bootstrap interval of the ratio of medians to exclude 1 against every other "
        f"candidate and a median gap above {s.noise:.0%}; otherwise they are tied",
    ]
    if s.limits:
        lines.append("- Limits: " + "; ".join(lim.text for lim in s.limits))
    return [*lines, ""]


def _ranking_table(out: Outcome, obj) -> list:
    lines = [
        f"## {obj.name} ({obj.goal})",
        "",
        _decision_text(out, out.decisions.get(obj.name) or {}),
        "",
        "| rank | candidate | median | min | max | runs | limits |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in out.rankings.get(obj.name, []):
        lim = "ok" if r["within_limits"] else "over: " + "; ".join(r["limits_broken"])
        lines.append(
            f"| {r['rank']} | #{r['candidate']} {_code(r['label'], cell=True)} | {_f(r['median'])} | {_f(r['min'])} "
            f"| {_f(r['max'])} | {r['n']} | {lim} |"
        )
    return [*lines, ""]


def _winner(out: Outcome, promote_hint: str | None) -> list:
    if out.winner is None:
        return []
    lines = [
        "## Winner as a profile",
        "",
        "```yaml",
        json.dumps({out.winner.profile: out.winner.body}, indent=2),
        "```",
        "",
    ]
    if promote_hint:
        lines += [f"{_code(promote_hint)} writes it as profile NAME into a group_vars file.", ""]
    return lines


def _failed(out: Outcome) -> list:
    """Each failed candidate with its error in a fence longer than any backtick run in it."""
    failed = out.failed()
    lines = ["## Failed", ""]
    if not failed:
        lines.append("None.")
    for p, r in failed:
        error = [one_line(ln) for ln in (r.get("error") or "").splitlines()]
        fence = "`" * (1 + max((len(t) for ln in error for t in re.findall(r"`+", ln)), default=2))
        lines += [
            f"- #{p.candidate.index} {_code(p.candidate.label)} ({one_line(r.get('kind'))}), profile "
            f"{_code(p.profile)}:",
            "",
            f"  {fence}",
            *("  " + ln for ln in error),
            f"  {fence}",
            "",
        ]
    return lines


def _not_run(out: Outcome) -> list:
    """The candidates pruned, excluded by the constraints and left out by the budget."""
    lines = ["", "## Pruned before launch", ""]
    if not out.pruned:
        lines.append("None.")
    for p in out.pruned:
        lines.append(f"- #{p.candidate.index} {_code(p.candidate.label)}: " + one_line("; ".join(p.reasons)))
    if out.excluded:
        lines += ["", "## Excluded by the search file's constraints", ""]
        for choices, reason in out.excluded:
            lines.append(f"- {_code(', '.join(f'{a}={v}' for a, v in choices.items()))}: {one_line(reason)}")
    if out.skipped_wrong:
        lines += ["", "## Not run (they hold a combination that answered wrong)", ""]
        lines += [
            f"- #{p.candidate.index} {_code(p.candidate.label)}: holds every flag of #{w.candidate.index}"
            f" {_code(w.candidate.label)}, which failed the quality gate"
            for p, w in out.skipped_wrong
        ]
    if out.skipped_budget:
        lines += ["", "## Not run (budget spent)", ""]
        lines += [f"- #{p.candidate.index} {_code(p.candidate.label)}" for p in out.skipped_budget]
    return lines


def figure(out: Outcome):
    """The plot as a matplotlib figure (None when there are fewer than two objectives or no point): first
    objective against the second, one point per candidate (median, whiskers min-max), the Pareto front of the
    candidates within the limits joined and labelled, those over a limit crossed; the legend beside the axes,
    where it covers no label."""
    xo, yo, pts = plot_points(out)
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 6), constrained_layout=True)
    styles = {  # kind -> marker, colour, size, legend label
        "front": ("o", "#c0392b", 9, None),
        "other": (".", "#7f8c8d", 7, None),
        "over": ("X", "#e67e22", 9, "over a limit (not eligible)"),
    }
    labelled = set()
    for pt in pts:
        kind = "over" if pt["over"] else "front" if pt["front"] else "other"
        marker, colour, size, label = styles[kind]
        x, y = pt["x"], pt["y"]
        ax.errorbar(
            x["median"],
            y["median"],
            xerr=[[x["median"] - x["min"]], [x["max"] - x["median"]]],
            yerr=[[y["median"] - y["min"]], [y["max"] - y["median"]]],
            fmt=marker,
            color=colour,
            markersize=size,
            capsize=3,
            label=label if label and kind not in labelled else None,
        )
        labelled.add(kind)
        ax.annotate(
            f"#{pt['planned'].candidate.index}" + (" over limit" if pt["over"] else ""),
            (x["median"], y["median"]),
            textcoords="offset points",
            xytext=(6, 4),
            fontsize=8,
            color=colour if pt["over"] else "black",
        )
    front = sorted((pt for pt in pts if pt["front"]), key=lambda pt: pt["x"]["median"])
    ax.plot(
        [pt["x"]["median"] for pt in front],
        [pt["y"]["median"] for pt in front],
        "-",
        color="#c0392b",
        alpha=0.5,
        label="Pareto front (within the limits)",
    )
    for pt in front:  # the values alone keep the label short; the report's tables have the axis names
        ax.annotate(
            mask_shown(one_line(" / ".join(pt["planned"].candidate.choices.values()))),
            (pt["x"]["median"], pt["y"]["median"]),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=8,
            color="#c0392b",
        )
    ax.margins(x=0.25, y=0.12)
    ax.set_xlabel(f"{xo.name} ({xo.goal})")
    ax.set_ylabel(f"{yo.name} ({yo.goal})")
    ax.grid(True, alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    c = out.counts()
    ax.set_title(f"tune {out.search.name}: {c['measured_ok']} measured, {c['failed']} failed, {c['pruned']} pruned")
    if out.emulated:
        fig.supxlabel(SYNTHETIC_NOTE, color="#b00020", fontsize=10)
    return fig


def plot(out: Outcome) -> bytes | None:
    """pareto.png (figure()) as PNG bytes; None when there is nothing to plot."""
    fig = figure(out)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    return png.getvalue()


def check(out_dir) -> None:
    """ValueError naming the fix when the report cannot be written into out_dir (host/files.check_folder)."""
    check_folder(out_dir, ARTIFACTS)


def write(out: Outcome, out_dir, promote_hint: str | None = None) -> Path:
    """report.md, pareto.png (two objectives or more) and outcome.json in out_dir, through host/files.write_files
    (each a private temporary file, renamed; a link or odd file refused before anything is written)."""
    png = plot(out)
    files = {
        "report.md": mask_shown(markdown(out, PLOT_NAME if png else None, promote_hint)),
        "outcome.json": mask_shown(json.dumps(out.to_dict(), indent=2, default=str) + "\n"),
    }
    return Path(write_files(out_dir, {**files, PLOT_NAME: png} if png else files))
