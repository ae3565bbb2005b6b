"""`sglang-deploy tune SEARCH.yml`: the flag-matrix search through sglang_deploy.api.tune()."""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys

from sglang_deploy import api
from sglang_deploy.compare import compare_report
from sglang_deploy.tune import Budget, Outcome, SearchError, load_search, one_line, report
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.cli.progress import Progress
from sglang_deploy.cli.runs import _extravars, _print_failures, _repeats, run_options
from sglang_deploy.tune.promotion import default_target


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        parents=[run_options()],
        help="search a matrix of flags for the fastest launch that works",
        description="Expand the search file's axes into candidate profiles, prune those the rules refuse for the "
        "hosts' facts (listed before anything changes), deploy and benchmark the rest one by one (a crash or "
        "garbage output is recorded with its journal and rolled back), repeat the top ones, restore what served "
        "before and write report.md, pareto.png and outcome.json. Each result is stored as it completes under "
        "results/tune-<name>/: a re-run resumes and measures nothing twice. Exit status: 0 done, 1 a run or the "
        "restore failed, 2 usage error, 130 cancelled.",
    )
    p.add_argument("search", help="search file (YAML): base, axes, constraints, workload, objectives, limits")
    p.add_argument("--budget", metavar="N|TIME", help="at most N candidates (12) or this long (90s, 30m, 2h)")
    p.add_argument("--out", metavar="DIR", help="result store and report (default results/tune-<name>)")
    p.add_argument("--no-restore", action="store_true", help="leave the last candidate serving")
    p.add_argument("--promote", metavar="NAME", help="write the winner as profile NAME and show the diff")
    p.add_argument(
        "--into",
        metavar="FILE",
        help="group_vars file for --promote (default: the file of the project's group_vars/all that defines"
        " sglang_profiles, else group_vars/all/profiles.yml, started from the profiles the hosts use)",
    )
    p.add_argument(
        "--repeats",
        type=_repeats,
        metavar="N",
        help="measure the top candidates of each objective N times in all (the search file's repeat: times; its "
        "top, else 3): a winner only where the bootstrap interval of the ratio of medians excludes 1, as compare "
        "decides; a resumed search keeps the N it began with",
    )
    p.add_argument("--candidate", metavar="N|KEY", help="promote this candidate instead of the winner")
    p.add_argument(
        "--over-limit", action="store_true", help="let --candidate promote a candidate that broke a limit of the search"
    )
    p.set_defaults(func=functools.partial(tune, parser=p))


def promote_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command that promotes this search's winner, spelled by ``parser`` (report.md prints it)."""
    option = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings}
    words = ["sglang-deploy", "tune", args.search]
    for dest in ("inventory", "limit", "out"):
        if getattr(args, dest):
            words += [option[dest], getattr(args, dest)]
    return shlex.join(words) + f" {option['promote']} NAME {option['into']} {shlex.quote(args.into)}"


def print_plan(preview: Outcome) -> None:
    c = preview.counts()
    print(
        f"search {preview.search.name}: {c['expanded']} expanded, {c['excluded']} excluded by constraints, "
        f"{c['pruned']} pruned by the rules, {len(preview.runnable)} to run"
        + (f", {c['not_planned_budget']} not planned (budget {preview.budget})" if c["not_planned_budget"] else ""),
        file=sys.stderr,
    )
    if preview.estimate:
        print(f"  {preview.estimate['text']}", file=sys.stderr)
    for p in preview.pruned:
        print(
            f"  PRUNED #{p.candidate.index} {p.candidate.label}: {one_line('; '.join(p.reasons))}",
            file=sys.stderr,
        )


def tune(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    extravars = _extravars(args)
    try:
        args.into = args.into or str(default_target())
        search = load_search(args.search)
        Budget.parse(args.budget)
    except ValueError as exc:  # SearchError too
        raise UsageError(str(exc)) from exc
    try:
        with Progress() as progress:
            res = api.tune(
                search,
                inventory=args.inventory,
                limit=args.limit,
                extravars=extravars,
                budget=args.budget,
                out_dir=args.out,
                restore=not args.no_restore,
                promote=args.promote,
                promote_into=args.into,
                candidate=args.candidate,
                over_limit=args.over_limit,
                promote_hint=promote_command(parser, args),
                repeats=args.repeats,
                on_event=progress,
                on_plan=print_plan,
            )
    except SearchError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        print(json.dumps(res.to_dict(), indent=2, default=str))
    elif res.outcome is not None:
        print_outcome(res.outcome, res.report_dir)
        if res.outcome.winner is not None and not args.promote:
            print(f"promote the winner: {promote_command(parser, args)}")
    if res.promoted:
        print_promoted(res.promoted)
    if res.error:
        print(f"sglang-deploy tune: {res.error}", file=sys.stderr)
    for r in res.restores:
        _print_failures(r)
    if res.outcome is not None and res.outcome.cancelled:
        return 130
    return 0 if res.ok else 1


def print_outcome(outcome: Outcome, report_dir) -> None:
    print(report.summary(outcome))
    print(f"report: {report_dir / 'report.md'}")
    if outcome.emulated:
        print(compare_report.SYNTHETIC_NOTE)


def print_promoted(promoted: dict) -> None:
    if promoted.get("warning"):
        print(f"warning: {promoted['warning']}", file=sys.stderr)
    print(
        f"promoted candidate {promoted['candidate']} as profile {promoted['name']} into {promoted['file']}:",
        file=sys.stderr,
    )
    print(promoted["diff"] or "(no change: the profile is already there)")
