"""`sglang-deploy profiles | render | validate`: launch profiles, offline (no host, no ansible)."""

from __future__ import annotations

import argparse
import sys
import time
from functools import wraps
from pathlib import Path
from typing import Any

from sglang_deploy.launch import profile_render, profiles
from sglang_deploy.rules import rules
from sglang_deploy.cli.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profiles", help="list launch profiles with their descriptions")
    _add_profiles_file(p)
    p.set_defaults(func=list_profiles)

    p = sub.add_parser(
        "render",
        help="render a profile's launch for an SGLang release",
        description="Print a profile's launch; notes on translated/dropped flags go to stderr.",
    )
    _add_target(p)
    p.add_argument(
        "--format",
        choices=["argv", "shell", "unit", "env"],
        default="argv",
        help="argv: JSON array after `python -m sglang.launch_server`; env: the profile's lines of the 0600"
        " environment file; shell: a command line; unit: the [Service] launch lines the role writes",
    )
    p.add_argument(
        "--python", help="interpreter for shell/unit formats (default: the sglang_server role's sglang_server_python)"
    )
    p.set_defaults(func=render)

    p = sub.add_parser(
        "validate",
        help="check a profile's launch against the rules (exit 1 if refused)",
        description="Exit 0 valid (warnings allowed), 1 refused, 2 usage error. "
        "Rules whose facts are not given are skipped (shown with -v).",
        epilog=_rules_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_target(p)
    p.add_argument("--gpu-arch", metavar="ARCH", help="GPU architecture, e.g. sm_120")
    p.add_argument("--gpus", type=int, metavar="N", help="GPU count of the host")
    p.add_argument("--nvlink", action=argparse.BooleanOptionalAction, default=None, help="GPUs linked by NVLink")
    p.add_argument("--model-config", metavar="PATH", help="the checkpoint's config.json (or its directory)")
    p.add_argument("--concurrency", type=int, metavar="N", help="highest benchmark concurrency planned")
    p.add_argument("-v", "--verbose", action="store_true", help="also print info findings (skipped rules)")
    p.set_defaults(func=validate)


def _rules_help() -> str:
    """The rules, one per line: id, level, what it refuses or warns about, and the facts it needs."""
    lines = ["rules (src/sglang_deploy/rules/rules.py):"]
    for rule in rules.RULES:
        needs = f" [needs {', '.join(rule.needs)}]" if rule.needs else ""
        lines.append(f"  {rule.id} ({rule.level}): {rule.summary}{needs}")
    return "\n".join(lines)


def _add_profiles_file(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profiles-file",
        type=Path,
        metavar="FILE",
        help="YAML file holding `sglang_profiles` (default: the project's group_vars/all where it defines them, else"
        " the sglang role's defaults/main/profiles.yml)",
    )


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", help="profile name (see `sglang-deploy profiles`)")
    p.add_argument(
        "--sglang-version",
        metavar="V",
        help="target SGLang release (default: sglang_version_default of the sglang role's defaults, or of the"
        " project's group_vars/all)",
    )
    _add_profiles_file(p)


def _usage_errors(func):
    """profile_render.CommandError (unknown profile, unreadable file) -> UsageError."""

    @wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except profile_render.CommandError as exc:
            raise UsageError(str(exc)) from exc

    return run


def _launch(args: argparse.Namespace) -> profiles.Launch:
    return profile_render.render_launch(args.profile, args.profiles_file, args.sglang_version)


def _print_notes(launch: profiles.Launch) -> None:
    for note in launch.notes:
        print(f"note: {note}", file=sys.stderr)
    for key in launch.secret_env:
        print(f"note: {key} (secret) is not printed: it goes into the 0600 EnvironmentFile", file=sys.stderr)


@_usage_errors
def list_profiles(args: argparse.Namespace) -> int:
    found, _ = profile_render.load(args.profiles_file)
    for name in found:
        try:
            profile = profiles.resolve(name, found)
        except profiles.ProfileError as exc:
            print(f"{name}\n    BROKEN: {exc}")
            continue
        parent = f" (extends {profile.chain[-2]})" if len(profile.chain) > 1 else ""
        # on one line: a line break in a description would print lines that look like other profiles
        print(f"{name}{parent}\n    {' '.join(profile.description.split())}")
    return 0


@_usage_errors
def render(args: argparse.Namespace) -> int:
    launch = _launch(args)
    _print_notes(launch)
    print(profile_render.format_launch(launch, args.format, args.python))
    return 0


def _facts(args: argparse.Namespace) -> dict[str, Any]:
    facts: dict[str, Any] = {"gpu_arch": args.gpu_arch, "gpu_count": args.gpus, "nvlink": args.nvlink}
    if args.model_config:
        try:
            facts.update(rules.model_facts_from_path(args.model_config))
        except ValueError as exc:
            raise UsageError(f"--model-config {args.model_config}: {exc}") from exc
    return {k: v for k, v in facts.items() if v is not None}


@_usage_errors
def validate(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    launch = _launch(args)
    facts = _facts(args)
    findings = rules.validate(launch, facts, args.concurrency)
    _print_notes(launch)
    for f in findings:
        if f.level != rules.INFO or args.verbose:
            print(f"{f.level.upper():7} [{f.rule}] {f.message}")
    bad = rules.errors(findings)
    warn = sum(f.level == rules.WARNING for f in findings)
    skipped = sum(f.level == rules.INFO for f in findings)
    verdict = "REFUSED" if bad else "OK"
    print(
        f"{verdict}: profile {launch.profile} for sglang {launch.sglang_version} (flags {launch.flags_release}):"
        f" {len(bad)} error(s), {warn} warning(s), {skipped} info(s){'' if args.verbose else ' (-v shows them)'}"
        f" in {(time.perf_counter() - start) * 1000:.0f} ms"
    )
    return 1 if bad else 0
