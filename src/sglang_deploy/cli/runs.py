"""`sglang-deploy deploy | compare | status | rollback | lab`: playbook runs through sglang_deploy.api."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from sglang_deploy import api
from sglang_deploy.compare import compare_report, gate, noise
from ansible_collections.sglang.deploy.plugins.module_utils import bench
from ansible_collections.sglang.deploy.plugins.module_utils.files import check_folder
from sglang_deploy.cli import workload
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.cli.extravars import parse_extravars
from sglang_deploy.cli.monitor_view import format_alerts, format_prometheus
from sglang_deploy.cli.progress import Progress

PROGRESS = (
    "Live progress goes to stderr. Exit status: 0 success, 1 a run failed, 2 usage error (an unknown profile included)."
)


def run_options() -> argparse.ArgumentParser:
    """The options of every command that runs playbooks: inventory, limit, extra variables, --json."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-i",
        "--inventory",
        metavar="PATH",
        help="inventory file or folder (default: inventory/lab.yml, the lab containers)",
    )
    common.add_argument("-l", "--limit", metavar="PATTERN", help="only these hosts (ansible --limit pattern)")
    common.add_argument(
        "-e",
        "--extra-vars",
        dest="extravars",
        action="append",
        default=[],
        metavar="VARS",
        help="key=value (value read as YAML), @file.yml or a YAML/JSON mapping; repeatable, later "
        "wins. Secrets (names with api_key, token, password, secret) never reach the run's files; "
        "prefer @file.yml for them (argv is visible to other users)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    return common


def register(sub: argparse._SubParsersAction) -> None:
    common = run_options()

    p = sub.add_parser(
        "deploy",
        parents=[common],
        help="deploy a launch profile and benchmark it (site.yml)",
        description="Deploy PROFILE with site.yml through ansible-runner, wait for the server, "
        "benchmark it and print the table. " + PROGRESS,
        epilog="Small sweep: --concurrency 1,4 --num-prompts 4. Rates under an SLA: --request-rate 2,4 --slo "
        "ttft_p99_ms=2000 or --slo ttft_p99_ms=2000 --sla-search 1,16. The workload flags set the sglang_benchmark "
        "role's variables (over -e). Deploy only: --no-benchmark.",
    )
    p.add_argument("profile", help="launch profile, a key of sglang_profiles (see `sglang-deploy profiles`)")
    workload.add_options(p, playbook=True)
    measure = p.add_mutually_exclusive_group()
    measure.add_argument(
        "--bench-again",
        action="store_true",
        help="benchmark a server this run did not restart although the controller keeps a result of its profile, "
        "launch, unit and stack (skipped by default: -e sglang_benchmark_again=true)",
    )
    measure.add_argument(
        "--no-benchmark",
        action="store_true",
        help="deploy only, benchmark nothing (-e sglang_benchmark_enabled=false)",
    )
    p.add_argument(
        "--tags",
        type=_phases,
        metavar="PHASES",
        help=f"only these phases, comma-separated: {', '.join(api.PHASES)} (validation always runs)",
    )
    p.set_defaults(func=deploy)

    p = sub.add_parser(
        "compare",
        parents=[common],
        help="benchmark several profiles in turn and report",
        description="Deploy and benchmark each PROFILE --repeats times, interleaved, on the same hosts with the "
        "same settings (the one to restore last, unless --keep-order: the hosts its roll leaves on it need no restore), "
        "restore the profile that served before (or --restore's) where it does not serve (no benchmark), print the "
        "comparison and "
        "write report.md, compare.png and comparison.json under results/compare-<time>/. " + PROGRESS,
    )
    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="two or more profiles; ratios are to the first")
    workload.add_options(p, playbook=True)
    p.add_argument(
        "--restore", metavar="PROFILE", help="profile to leave serving (default: what each host served before)"
    )
    p.add_argument(
        "--keep-order",
        action="store_true",
        help="deploy the profiles in the order given (default: the one to restore last, which saves its restore)",
    )
    p.add_argument(
        "--repeats",
        type=_repeats,
        default=api.DEFAULT_REPEATS,
        metavar="N",
        help=f"deploy and benchmark each profile N times, interleaved (A B B A A B; default {api.DEFAULT_REPEATS}): "
        "every figure is a median with its min-max, and a profile is called better or worse than the first only "
        "where the 95%% bootstrap interval of the ratio of medians excludes 1; the plan and the cost of its server "
        "starts are printed first. Under 3: no verdict",
    )
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="each profile on a host of its own (a fleet's replicas: alike hosts), deployed once; then the rounds "
        "benchmark them in turn with no restart between, so drift falls on no side and a round costs its "
        "benchmarks only (behind a router the replicas serve different profiles meanwhile)",
    )
    p.add_argument(
        "--noise",
        dest="floor",
        type=_fraction,
        default=noise.DEFAULT_FLOOR,
        metavar="FRACTION",
        help=f"the smallest difference a verdict calls, as tune's `noise` (default {noise.DEFAULT_FLOOR})",
    )
    p.add_argument("--out", metavar="DIR", help="report folder (default results/compare-<time>)")
    p.add_argument(
        "--objective",
        action="append",
        default=[],
        metavar="METRIC[@LEVEL]",
        help="rank the profiles by this metric (repeatable), as tune's objectives: e.g. sla_rate_req_s (the SLA "
        "search's highest rate), goodput_req_s@rate=8, output_tok_s@c=32 (docs/tune.md lists the metrics)",
    )
    p.add_argument(
        "--require",
        dest="limits",
        action="append",
        default=[],
        metavar="METRIC[@LEVEL]<=X",
        help="a limit as tune's: a profile outside this bound ranks last (repeatable), e.g. "
        "'ttft_p99_ms@c=32<=2000' or 'sla_rate_req_s>=4' (quoted: < and > are the shell's)",
    )
    p.set_defaults(func=compare)

    p = sub.add_parser(
        "status",
        parents=[common],
        help="what each host serves, the fleet behind each router, the alerts that fire (read-only)",
        description="Per host: the profile of the installed unit, the unit state, the last good "
        "profile and the stack manifest. Per router (inventory group sglang_router): its unit, readiness and "
        "workers as smg reports them (GET /workers, with sglang_router_admin_api_key), what each replica serves, and "
        "every mismatch with its fix (a replica serving another profile or stack, a replica the router does not "
        "list or route to, a worker the inventory does not have). Per Prometheus (inventory group monitoring): the "
        "alerts it fires; they leave the exit status 0, a Prometheus that does not answer makes it 1. " + PROGRESS,
    )
    p.set_defaults(func=status)

    p = sub.add_parser(
        "rollback",
        parents=[common],
        help="re-deploy each host's last good profile",
        description="Re-deploy the last good profile recorded on each host (no benchmark). " + PROGRESS,
    )
    p.set_defaults(func=rollback)

    p = sub.add_parser(
        "lab",
        parents=[common],
        help="create or remove the lab containers, or run Prometheus beside the lab",
        description="up: build the lab image if needed and start the lab containers of the "
        "inventory group `lab`; down: remove them (the image stays). With -i inventory/fleet-lab.yml: the lab "
        "fleet, three replicas and the smg router on the Docker network sglang-fleet. monitor: deploy --profile "
        "with the metrics on and Prometheus, Alertmanager and the exporters on the lab host (site.yml, no "
        "benchmark, inventory inventory/lab-monitoring), then print where Prometheus answers. " + PROGRESS,
    )
    p.add_argument("action", choices=["up", "down", "monitor"])
    p.add_argument("--profile", help="monitor: the profile deployed with the metrics on (default baseline)")
    p.set_defaults(func=lab)


def _repeats(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= api.MAX_REPEATS:
        raise argparse.ArgumentTypeError(f"a whole number from 1 to {api.MAX_REPEATS} is needed (got {text!r})")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"a fraction from 0 to below 1 is needed, e.g. 0.02 for 2% (got {text!r})")
    return value


def _phases(text: str) -> str:
    wrong = [t for t in text.split(",") if t not in api.PHASES]
    if wrong:
        raise argparse.ArgumentTypeError(f"unknown phase {', '.join(wrong)}: choose from {', '.join(api.PHASES)}")
    return text


def _extravars(args: argparse.Namespace) -> dict:
    """Check the inventory and read the -e items before anything runs; for a command with the workload flags, they
    become the role's variables (deploy and compare then check the workload on each host: workload.check)."""
    try:
        if args.inventory:
            api.inventory_path(args.inventory)
        extravars = parse_extravars(args.extravars)
        if args.func in (deploy, compare):
            extravars = workload.role_vars(extravars, workload.settings(args))
        return extravars
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def _emit_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=str))


def _print_failures(result: api.RunResult) -> None:
    for f in result.failures:
        kind = "UNREACHABLE" if f.unreachable else "FAILED"
        print(f"{kind} {f.host}: task '{f.task}':\n  " + f.message.replace("\n", "\n  "), file=sys.stderr)
    if result.error:
        print(f"ansible-playbook failed (rc {result.rc}):\n{result.error}", file=sys.stderr)
    if not result.ok:
        print(f"artifacts: {result.artifacts}", file=sys.stderr)


def _unknown_profile(results: list) -> str | None:
    """The usage message when a run failed because a profile name is unknown."""
    found = api.unknown_profile(results)
    if not found:
        return None
    name, available = found
    return (
        f"unknown profile '{name}'. Available profiles: {', '.join(available) or '(none found)'} "
        "(sglang_profiles: the sglang role's defaults, or your group_vars/all)"
    )


def _exit_code(result: api.RunResult) -> int:
    """0 success, 1 failed, 130 cancelled (Ctrl-C)."""
    if result.status == "canceled":
        return 130
    return 0 if result.ok else 1


def _outcomes(result: api.RunResult) -> list[str]:
    """Per host what the run did there (deployed, unchanged, rolled back, ...), what it serves, for a server the
    run restarted where its start went, the quality gate's result and SGLang's warnings that its output may be wrong."""
    lines = []
    for r in result.outcomes:
        startup = r.get("startup") or {}
        lines.append(
            f"{r['host']}: {r['state']}"
            + (f" (serves {r['serves']})" if r.get("serves") else "")
            + (f"; {startup['summary']}" if startup.get("summary") else "")
        )
        checked = gate.summary(r.get("quality")) or result.gate.get(r["host"])
        if checked:
            lines.append(
                f"{r['host']}: quality gate {gate.text(checked)}" + "".join(f"; {p}" for p in checked["problems"])
            )
        lines += [f"{r['host']}: SGLang warned: {w}" for w in (startup.get("accuracy_warnings") or [])[:5]]
    return lines


def _recap(result: api.RunResult) -> str:
    return (
        "; ".join(
            f"{h}: {o.state} (ok={o.ok} changed={o.changed} failed={o.failed} unreachable={o.unreachable})"
            for h, o in result.hosts.items()
        )
        or "no host ran"
    )


def _print_deploy(result: api.RunResult, profile: str) -> None:
    """A deploy's benchmarks (or why they were skipped), what each host serves, and the recap."""
    for host, path in sorted((result.data.get("sglang_benchmark_skipped") or {}).items()):
        print(f"{host}: benchmark skipped: nothing changed since {path} measured it (--bench-again runs it)")
    for host, res in sorted(result.benchmarks.items()):
        print(f"\n{host}: profile {profile}")
        print(bench.format_table(res))
        path = result.result_files.get(host)
        if path:
            print(f"result: {path}")
    for host, res in sorted(result.router_benchmarks.items()):
        replicas = ", ".join(sorted((res.get("context") or {}).get("replicas") or {}))
        print(f"\nthrough router {host} (the aggregate its clients see; replicas {replicas}): profile {profile}")
        print(bench.format_table(res))
        path = result.router_result_files.get(host)
        if path:
            print(f"result: {path}")
    if result.emulated:
        print(compare_report.SYNTHETIC_NOTE)
    for line in _outcomes(result):
        print(line)
    print(_recap(result), file=sys.stderr)


def deploy(args: argparse.Namespace) -> int:
    extravars = _extravars(args)
    if args.bench_again:
        extravars["sglang_benchmark_again"] = True
    if args.no_benchmark:
        extravars["sglang_benchmark_enabled"] = False
    try:
        workload.check(extravars, args.inventory, args.limit)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with Progress() as progress:
        result = api.deploy(
            args.profile,
            inventory=args.inventory,
            limit=args.limit,
            extravars=extravars,
            on_event=progress,
            tags=args.tags,
        )
    usage = _unknown_profile([result])
    if args.json:
        _emit_json(result.to_dict())
    else:
        _print_deploy(result, args.profile)
    if usage:
        raise UsageError(usage)
    _print_failures(result)
    return _exit_code(result)


def compare(args: argparse.Namespace) -> int:
    if len(args.profiles) < 2:
        raise UsageError("give at least two profiles to compare")
    if len(set(args.profiles)) < len(args.profiles):
        raise UsageError(f"a profile is given twice: {' '.join(args.profiles)}; give each once")
    extravars = _extravars(args)
    try:
        objectives, limits = workload.check(
            extravars, args.inventory, args.limit, args.objective, args.limits, fleet=True
        )
        if args.out:
            check_folder(args.out, compare_report.ARTIFACTS)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    with Progress() as progress:
        comp = api.compare(
            args.profiles,
            inventory=args.inventory,
            limit=args.limit,
            extravars=extravars,
            restore=args.restore,
            keep_order=args.keep_order,
            repeats=args.repeats,
            floor=args.floor,
            side_by_side=args.side_by_side,
            on_event=progress,
            objectives=objectives,
            limits=limits,
        )
    usage = _unknown_profile(comp.all_runs + comp.setups + comp.restores)
    out = _write_report(comp, args.out)
    if args.json:
        _emit_json({**comp.to_dict(), "report_dir": str(out)})
    else:
        print(compare_report.format_table(comp))
        print(f"report: {out / 'report.md'}")
        if (out / "compare.png").exists():
            print(f"plot: {out / 'compare.png'}")
    if usage:
        raise UsageError(usage)
    for r in comp.restores:
        _print_failures(r)
    if any(r.status == "canceled" for r in comp.all_runs):
        return 130
    return 0 if comp.ok else 1


def _write_report(comp, out_dir) -> Path:
    """compare's report folder; a link planted there while it ran is a usage error (host/files.check_folder)."""
    try:
        return compare_report.write_report(comp, out_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _columns(rows: list) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]


def format_status(hosts: dict) -> str:
    """A row per host: the profile of its unit, the one the last deploy asked for (and whether it failed there and
    rolled back), the unit's state, the last good profile and the stack."""
    rows = [("host", "profile", "asked last", "unit", "last good", "stack")]
    for h, s in hosts.items():
        if s.error:
            rows.append((h, "?", f"refused: {s.error}", "?", "?", "?"))
            continue
        back = s.rolled_back or {}
        rows.append(
            (
                h + (" (lab)" if s.emulated else ""),
                s.profile or "-",
                (s.asked or "-") + (f" (failed, rolled back to {back.get('to')})" if back else ""),
                f"{s.active_state or '?'}/{s.sub_state or '?'}",
                s.last_good_profile or "-",
                s.stack or "-",
            )
        )
    return "\n".join(_columns(rows))


def _readiness(router: dict) -> str:
    body = router.get("readiness") or {}
    if router.get("ready"):
        return f"ready ({body.get('healthy_workers', '?')}/{body.get('total_workers', '?')} workers healthy)"
    if router.get("ready") is False:
        return f"NOT READY ({body.get('reason') or body.get('status') or 'HTTP 503'})"
    return "not answering"


def format_fleet(fleet: dict) -> list[str]:
    """Per router (fleet.fleet_view()): its state, a row per replica (what it serves, how the router sees it), the
    workers the inventory does not have, then the mismatches with their fixes."""
    lines = []
    for host, view in sorted(fleet.items()):
        r = view["router"]
        lines.append(
            f"\nrouter {host}: smg {r.get('version') or '?'}, policy {r.get('policy') or '?'}, {r.get('url') or '-'}, "
            f"unit {r.get('unit') or '?'}, {_readiness(r)}"
        )
        rows = [("  replica", "profile", "stack", "router", "health", "load", "url")]
        for x in view["replicas"]:
            health = "-" if x["healthy"] is None else ("healthy" if x["healthy"] else "unhealthy")
            rows.append(
                (
                    f"  {x['host']}",
                    x["profile"] or "-",
                    x["stack"] or "-",
                    x["router_status"] or "?",
                    health,
                    "-" if x["load"] is None else str(x["load"]),
                    x["url"],
                )
            )
        for w in view["unknown_workers"]:
            health = "healthy" if w.get("healthy") else "unhealthy"
            rows.append(
                ("  (not in inventory)", "?", "?", w.get("status") or "?", health, str(w.get("load")), w["url"])
            )
        lines += _columns(rows)
        if view["ok"] and view["profiles"]:
            lines.append(f"fleet behind {host}: every replica serves {', '.join(view['profiles'])}, routed and healthy")
        elif view["ok"]:
            lines.append(f"fleet behind {host}: every replica routed and healthy (what they serve was not read)")
        else:
            lines.append(f"fleet behind {host}: {len(view['mismatches'])} mismatch(es)")
            lines += [f"  {m['kind']}: {m['message']}" for m in view["mismatches"]]
    return lines


def status(args: argparse.Namespace) -> int:
    _extravars(args)
    with Progress() as progress:
        found = api.status(inventory=args.inventory, limit=args.limit, on_event=progress)
    if args.json:
        _emit_json(found.to_dict())
    else:
        print(format_status(found.hosts))
        for line in format_fleet(found.fleet) + format_alerts(found.alerts):
            print(line)
    _print_failures(found.run)
    refused = any(s.error for s in (*found.hosts.values(), *found.alerts.values()))
    return 1 if refused else _exit_code(found.run)


def rollback(args: argparse.Namespace) -> int:
    extravars = _extravars(args)
    with Progress() as progress:
        result = api.rollback(inventory=args.inventory, limit=args.limit, extravars=extravars, on_event=progress)
    if args.json:
        _emit_json(result.to_dict())
    else:
        print(_recap(result))
    _print_failures(result)
    return _exit_code(result)


def lab(args: argparse.Namespace) -> int:
    extravars = _extravars(args)
    if args.action == "monitor":
        return _lab_monitor(args, extravars)
    if args.profile:
        raise UsageError("--profile is for `sglang-deploy lab monitor` only")
    with Progress() as progress:
        result = api.lab(
            "present" if args.action == "up" else "absent",
            inventory=args.inventory,
            extravars=extravars,
            on_event=progress,
        )
    if args.json:
        _emit_json(result.to_dict())
    else:
        print(f"lab {args.action}: {'done' if result.ok else 'FAILED'}")
    _print_failures(result)
    return _exit_code(result)


def _lab_monitor(args: argparse.Namespace, extravars: dict) -> int:
    inventory = args.inventory or os.path.relpath(api.LAB_MONITORING)
    with Progress() as progress:
        result = api.lab_monitor(
            args.profile or "baseline", inventory=inventory, extravars=extravars, on_event=progress
        )
    urls = api.prometheus_urls(result.data)
    if args.json:
        _emit_json({**result.to_dict(), "prometheus": urls})
    else:
        print(f"lab monitor: {'done' if result.ok else 'FAILED'}")
        if urls:
            print("\n".join(format_prometheus(urls, inventory)))
    usage = _unknown_profile([result])
    if usage:
        raise UsageError(usage)
    _print_failures(result)
    if result.ok and not urls:
        raise UsageError(f"the inventory {inventory} has no host in the group monitoring: leave -i out (the lab's)")
    return _exit_code(result)
