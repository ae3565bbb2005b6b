"""The `sglang-deploy` command line. Exit codes: 0 success, 1 a deploy or check failed, 2 usage error."""

from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """Bad input from the user: printed without a traceback, exit code 2."""


def _add_profile_commands(sub: argparse._SubParsersAction) -> None:
    """profiles, render, validate (issue 4)."""


def _add_bench_command(sub: argparse._SubParsersAction) -> None:
    """bench (issue 6)."""


def _add_runner_commands(sub: argparse._SubParsersAction) -> None:
    """deploy, compare, status, rollback, lab (issues 2 and 8)."""


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
