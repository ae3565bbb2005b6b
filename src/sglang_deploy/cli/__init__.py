"""The `sglang-deploy` command line: argument parsing and terminal output over sglang_deploy.api and the domain.

One module per command group; each registers its subcommands with the function that runs them.
Exit codes: 0 success, 1 a deploy or check failed, 2 usage error, 130 cancelled (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys

from sglang_deploy.api import HostReportError
from sglang_deploy.cli import bench, model, profiles, runs, stack, traffic, tune
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.cli.shown import Shown
from sglang_deploy.paths import ProjectNotFound

GROUPS = (runs, tune, bench, traffic, profiles, stack, model)  # the order of `sglang-deploy --help`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-deploy",
        description="Deploy, validate and benchmark SGLang launch profiles with Ansible.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; what it prints shows control characters as escapes (cli/shown.py)."""
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Shown(stdout), Shown(stderr)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = stdout, stderr


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, ProjectNotFound) as exc:
        print(f"sglang-deploy {args.command}: {exc}", file=sys.stderr)
        return 2
    except HostReportError as exc:  # a host's record broke the schema: refused before anything was deployed
        print(f"sglang-deploy {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`sglang-deploy profiles | head`): stop quietly. stdout goes to /dev/null so the
        # interpreter's flush at exit does not raise again (the recipe in Python's signal module documentation).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
