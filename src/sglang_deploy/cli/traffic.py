"""`sglang-deploy traffic`: a trace of the operator's own traffic (bench_serving's Mooncake JSONL) captured from a
deployed host (sglang_deploy.api.capture), summarised, plotted and imported (the domain's sglang_deploy.traffic)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sglang_deploy import api
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.cli.progress import Progress
from ansible_collections.sglang.deploy.plugins.module_utils.files import write_file
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
    cap = actions.add_parser(
        "capture",
        help="capture a deployed server's or fleet's traffic as a trace (request logging on at runtime, no restart)",
        description="Turns the server's request logging on (POST /configure_logging), reads its finished requests "
        "from the unit's journal, sets logging back. Kept: arrival, token counts, prefix blocks as hashes; the text "
        "only with --keep-text (FILE.text.jsonl, 0600). While it runs SGLang writes the prompts to its journal. "
        "On a fleet every server is captured at once and merged by arrival; the smg router adds its count of the "
        "client requests it answered (docs/traffic.md).",
    )
    cap.add_argument("--duration", type=float, default=60.0, metavar="S", help="seconds to capture (default 60)")
    cap.add_argument("--max-requests", type=int, default=10_000, metavar="N", help="stop after N requests")
    cap.add_argument("--keep-text", action="store_true", help="also keep the prompts' text in FILE.text.jsonl")
    cap.add_argument("--out", type=Path, required=True, metavar="FILE", help="where to write the trace (0600)")
    cap.add_argument("-i", "--inventory", metavar="PATH", help="inventory (default: inventory/lab.yml)")
    cap.add_argument(
        "-l", "--limit", metavar="HOST", help="the server to capture (default: every server, merged, and the router)"
    )
    cap.set_defaults(func=run_capture)


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


def run_capture(args: argparse.Namespace) -> int:
    try:
        with Progress() as progress:
            res = api.capture(
                str(args.out),
                args.duration,
                args.max_requests,
                args.keep_text,
                inventory=args.inventory,
                limit=args.limit,
                on_event=progress,
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if not res.ok:
        for f in res.run.failures:
            print(f"FAILED {f.host}: task '{f.task}': {f.message}", file=sys.stderr)
        print(f"capture failed: {res.error}\nartifacts: {res.run.artifacts}", file=sys.stderr)
        return 1
    print(f"captured from {res.host} into {res.path}" + (f" (text: {res.text_path})" if res.text_path else ""))
    print("\n".join(traffic.summary_lines(res.summary) + traffic.origin_lines(res.summary)))
    probes = (
        res.probes and f"left out {res.probes} health checks and probes (SGLang's /health_generate, the watchdog's)"
    )
    for note in filter(
        None, (res.stop and f"stopped: {res.stop}", res.unparsed and f"{res.unparsed} lines unread", probes)
    ):
        print(note)
    return 0
