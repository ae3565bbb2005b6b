"""`sglang-deploy traffic`: a trace of the operator's own traffic (bench_serving's Mooncake JSONL) summarised,
plotted and imported; the work is the domain's (sglang_deploy.traffic)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sglang_deploy.cli.errors import UsageError
from sglang_deploy.host.files import write_file
from sglang_deploy.traffic import traffic


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "traffic", help="summarise, plot and import request traces (replayed by bench --dataset-name trace)"
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    summary = actions.add_parser(
        "summary",
        help="a trace's requests, arrival rate, burstiness, lengths and prefix reuse",
        description="Burstiness is the coefficient of variation of the gaps between arrivals (1: Poisson); prefix "
        "reuse the share of 512-token prompt blocks an earlier request already sent.",
    )
    summary.add_argument("file", type=Path, help="trace JSONL (timestamp, input_length, output_length, hash_ids)")
    summary.add_argument("--plot", type=Path, metavar="PNG", help="also write a plot: arrivals over time, lengths")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(func=run_summary)
    imp = actions.add_parser(
        "import",
        help="check a trace (e.g. one of Mooncake's) and write it sorted, timestamps from 0, mode 0600",
    )
    imp.add_argument("file", type=Path, help="trace JSONL to import")
    imp.add_argument("--out", type=Path, required=True, help="where to write the checked trace")
    imp.set_defaults(func=run_import)


def run_summary(args: argparse.Namespace) -> int:
    try:
        records, s = traffic.summarize(str(args.file))
        if args.plot:
            from sglang_deploy.traffic import traffic_plot

            write_file(traffic_plot.plot(records, f"trace {args.file.name}"), str(args.plot), 0o644)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(json.dumps(s, indent=2) if args.json else "\n".join(traffic.summary_lines(s)))
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    try:
        out = traffic.import_trace(str(args.file), str(args.out))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    s = out["summary"]
    print(f"imported {s['requests']} requests over {s['duration_s']:.3g} s into {out['path']}")
    return 0
