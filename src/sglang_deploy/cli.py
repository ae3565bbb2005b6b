"""The `sglang-deploy` command line. Exit codes: 0 success, 1 a deploy or check failed, 2 usage error."""

from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """Bad input from the user: printed without a traceback, exit code 2."""


def _add_profile_commands(sub: argparse._SubParsersAction) -> None:
    """profiles, render, validate (issue 4)."""
    from sglang_deploy import profile_cmd

    def wrap(func):
        def run(args: argparse.Namespace) -> int:
            try:
                return func(args)
            except profile_cmd.CommandError as exc:
                raise UsageError(str(exc)) from exc
        return run

    p = sub.add_parser("profiles", help="list launch profiles with their descriptions")
    profile_cmd.add_common(p)
    p.set_defaults(func=wrap(profile_cmd.cmd_profiles))

    p = sub.add_parser("render", help="render a profile's launch for an SGLang release",
                       description="Print a profile's launch; notes on translated/dropped flags go to stderr.")
    profile_cmd.add_target(p)
    p.add_argument("--format", choices=["argv", "shell", "unit", "env"], default="argv",
                   help="argv: JSON array after `python -m sglang.launch_server`; env: KEY=VALUE lines (argv)")
    p.add_argument("--python", default=profile_cmd.DEFAULT_PYTHON, help="interpreter for shell/unit formats")
    p.set_defaults(func=wrap(profile_cmd.cmd_render))

    p = sub.add_parser("validate", help="check a profile's launch against the rules (exit 1 if refused)",
                       description="Exit 0 valid (warnings allowed), 1 refused, 2 usage error. "
                       "Rules whose facts are not given are skipped (shown with -v).")
    profile_cmd.add_target(p)
    p.add_argument("--gpu-arch", metavar="ARCH", help="GPU architecture, e.g. sm_120")
    p.add_argument("--gpus", type=int, metavar="N", help="GPU count of the host")
    p.add_argument("--nvlink", action=argparse.BooleanOptionalAction, default=None, help="GPUs linked by NVLink")
    p.add_argument("--model-config", metavar="PATH", help="the checkpoint's config.json (or its directory)")
    p.add_argument("--concurrency", type=int, metavar="N", help="highest benchmark concurrency planned")
    p.add_argument("-v", "--verbose", action="store_true", help="also print info findings (skipped rules)")
    p.set_defaults(func=wrap(profile_cmd.cmd_validate))


def _add_bench_command(sub: argparse._SubParsersAction) -> None:
    """bench (issue 6)."""
    import os

    from sglang_deploy import bench

    def levels(text: str) -> list:
        try:
            return bench.parse_concurrency(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    def run(args: argparse.Namespace) -> int:
        try:
            bench.Target.from_url(args.url)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if args.api_key_env and args.api_key_env not in os.environ:
            raise UsageError(f"environment variable {args.api_key_env} is not set")
        return bench.cli_main(args)

    p = sub.add_parser("bench", help="benchmark a running SGLang server over a concurrency sweep",
                       description="Concurrency sweep against an SGLang OpenAI-compatible server; prints the "
                       "table, writes the JSON result (formulas in its `definitions`).")
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.0.5:30000")
    p.add_argument("--concurrency", type=levels, default=[1, 8, 32], help="comma-separated levels (1,8,32)")
    p.add_argument("--requests", type=int, help="requests per level (default max(8, 2 x concurrency))")
    p.add_argument("--input-len", type=int, default=1024, help="prompt length in tokens, about (1024)")
    p.add_argument("--output-len", type=int, default=512, help="output tokens, forced and verified (512)")
    p.add_argument("--warmup", type=int, default=2, help="uncounted warm-up requests (2)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (600)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--model", help="served model name (default: from /server_info or /v1/models)")
    p.add_argument("--json", metavar="FILE", help="write the result JSON here")
    p.set_defaults(func=run)


def _add_runner_commands(sub: argparse._SubParsersAction) -> None:
    """deploy, compare, status, rollback, lab (issues 2 and 8). Logic: runner.py, report.py."""
    import os

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-i", "--inventory", metavar="PATH",
                        help="inventory file or folder (default: inventory/lab.yml, the lab containers)")
    common.add_argument("-l", "--limit", metavar="PATTERN", help="only these hosts (ansible --limit pattern)")
    common.add_argument("-e", "--extra-vars", dest="extravars", action="append", default=[], metavar="VARS",
                        help="key=value (value read as YAML), @file.yml or a YAML/JSON mapping; repeatable, later "
                        "wins. Secrets (names with api_key, token, password, secret) never reach the run's files; "
                        "prefer @file.yml for them (argv is visible to other users)")
    common.add_argument("--json", action="store_true", help="machine-readable result on stdout")

    def wire(name: str):
        def run(args: argparse.Namespace) -> int:
            from sglang_deploy import runner

            if args.inventory and not os.path.exists(args.inventory):
                raise UsageError(f"inventory {args.inventory} does not exist")
            try:
                extravars = runner.parse_extravars(args.extravars)
            except ValueError as exc:
                raise UsageError(str(exc)) from exc
            return getattr(runner, f"cli_{name}")(args, extravars)
        return run

    progress = "Live progress goes to stderr. Exit status: 0 success, 1 a run failed, 2 usage error " \
               "(an unknown profile included)."
    p = sub.add_parser("deploy", parents=[common], help="deploy a launch profile and benchmark it (site.yml)",
                       description="Deploy PROFILE with site.yml through ansible-runner, wait for the server, "
                       "benchmark it and print the table. " + progress,
                       epilog="Small sweep: -e 'sglang_benchmark_concurrency=[1,4]' -e sglang_benchmark_requests=4. "
                       "Deploy only: -e sglang_benchmark_enabled=false.")
    p.add_argument("profile", help="launch profile, a key of sglang_profiles (group_vars/all/profiles.yml)")
    p.set_defaults(func=wire("deploy"))

    p = sub.add_parser("compare", parents=[common], help="benchmark several profiles in turn and report",
                       description="Deploy and benchmark each PROFILE in turn on the same hosts with the same "
                       "settings, restore the profile that served before (no benchmark), print the comparison and "
                       "write report.md, compare.png and comparison.json under results/compare-<time>/. " + progress)
    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="two or more profiles; ratios are to the first")
    p.add_argument("--restore", metavar="PROFILE",
                   help="profile to leave serving (default: what each host served before)")
    p.add_argument("--out", metavar="DIR", help="report folder (default results/compare-<time>)")

    def compare(args: argparse.Namespace) -> int:
        if len(args.profiles) < 2:
            raise UsageError("give at least two profiles to compare")
        return wire("compare")(args)
    p.set_defaults(func=compare)

    p = sub.add_parser("status", parents=[common], help="what each host serves (read-only)",
                       description="Per host: the profile of the installed unit, the unit state, the last good "
                       "profile and the stack manifest. " + progress)
    p.set_defaults(func=wire("status"))

    p = sub.add_parser("rollback", parents=[common], help="re-deploy each host's last good profile",
                       description="Re-deploy the last good profile recorded on each host (no benchmark). " + progress)
    p.set_defaults(func=wire("rollback"))

    p = sub.add_parser("lab", parents=[common], help="create or remove the lab containers",
                       description="up: build the lab image if needed and start the lab containers of the "
                       "inventory group `lab`; down: remove them (the image stays). " + progress)
    p.add_argument("action", choices=["up", "down"])
    p.set_defaults(func=wire("lab"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-deploy",
        description="Deploy, validate and benchmark SGLang launch profiles with Ansible.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_runner_commands(sub)
    _add_bench_command(sub)
    _add_profile_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"sglang-deploy {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
