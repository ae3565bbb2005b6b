"""compare's plot: output and decode speed against concurrency, a line per profile (and host or router) through the
medians over the repeats, with min..max bars."""

from __future__ import annotations

import io

from sglang_deploy.compare.compare_report import SYNTHETIC_NOTE, Comparison, lengths_text


def plot(comp: Comparison) -> bytes:
    """PNG bytes: aggregate output tok/s and per-request decode tok/s against concurrency, one line per profile through
    the medians over the repeats, with min..max bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    targets = comp.targets
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    panels = (
        ("output_tok_s", "Aggregate output throughput", "output tok/s (all requests)"),
        ("decode_tok_s", "Per-request decode speed", "decode tok/s per request (mean)"),
    )
    closed_loop = [r for r in comp.rows if r["level"] == f"c={r['concurrency']}"]  # rate levels: no x position
    levels = sorted({r["concurrency"] for r in closed_loop})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "os^Dvp*h"
    styles = ["-", "--", ":", "-."]  # per host or router
    for ax, (key, title, ylabel) in zip(axes, panels):
        top = 0.0
        for i, name in enumerate(comp.profiles):
            for j, (host, via) in enumerate(targets):
                pts = [
                    (r["concurrency"], r[key], r["spread"][key]["min"], r["spread"][key]["max"])
                    for r in closed_loop
                    if r["profile"] == name and (r["host"], r["via"]) == (host, via) and r[key] is not None
                ]
                if not pts:
                    continue
                top = max(top, *(p[3] for p in pts))
                where = f"router {host}" if via == "router" else host
                label = name if len(targets) == 1 else f"{name} @ {where}"
                # Distinct markers keep profiles with near-equal figures apart where the lines overlap; the bars
                # span min..max over the repeats, the line joins the medians.
                ax.errorbar(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                    capsize=4,
                    marker=markers[i % len(markers)],
                    markersize=7,
                    linewidth=2,
                    alpha=0.85,
                    color=colors[i % len(colors)],
                    linestyle=styles[j % len(styles)],
                    label=label,
                )
        ax.set_title(title)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel(ylabel)
        if len(levels) > 1 and levels[-1] / levels[0] >= 4:
            ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(levels))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(c) for c in levels])
        ax.margins(x=0.08)
        ax.set_ylim(0, top * 1.12 or 1)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", title="profile", frameon=False)
    w = comp.workload
    fig.suptitle(
        f"{' vs '.join(comp.profiles)}  ({w.get('lengths') or lengths_text(w)}; "
        f"median and min..max of {comp.repeats} repeat{'s' * (comp.repeats != 1)})",
        fontsize=12,
    )
    notes = []
    missing = [
        p
        for p in comp.profiles
        if not any(r["profile"] == p and r[k] is not None for r in comp.rows for k, _unused, _unused in panels)
    ]
    if missing:
        notes.append(f"not plotted (deploy failed): {', '.join(missing)}")
    if comp.emulated:
        notes.append(SYNTHETIC_NOTE)
    if notes:
        fig.supxlabel("\n".join(notes), color="#b00020", fontsize=10)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    return png.getvalue()
