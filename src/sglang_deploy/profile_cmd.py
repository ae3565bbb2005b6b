"""`sglang-deploy profiles | render | validate`: command logic (cli.py only wires the arguments)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from . import profiles as prof
from . import rules, systemd

LAUNCH_MODULE = ["-m", "sglang.launch_server"]
DEFAULT_PYTHON = "/opt/sglang/venv/bin/python"
LAUNCHER = "/opt/sglang-deploy/launch.py"  # installed by the sglang_server role


class CommandError(Exception):
    """Bad input (unknown profile, unreadable file): the CLI turns it into a usage error (exit 2)."""


def _load(args: argparse.Namespace) -> tuple[dict, dict]:
    try:
        profiles = prof.load_profiles(args.profiles_file)
        settings = prof.load_settings()
    except prof.ProfileError as exc:
        raise CommandError(str(exc)) from exc
    return profiles, settings


def _render(args: argparse.Namespace) -> prof.Launch:
    profiles, settings = _load(args)
    try:
        return prof.render(args.profile, profiles, settings, args.sglang_version)
    except prof.ProfileError as exc:
        raise CommandError(str(exc)) from exc


def format_launch(launch: prof.Launch, fmt: str, python: str = DEFAULT_PYTHON) -> str:
    """argv: JSON array after `python -m sglang.launch_server`; env: KEY=VALUE; shell; unit (systemd [Service])."""
    if fmt == "argv":
        return json.dumps(launch.argv)
    if fmt == "env":
        return "\n".join(f"{k}={v}" for k, v in launch.env.items())
    words = [python, *LAUNCH_MODULE, *launch.argv]
    if fmt == "shell":
        env = [f"{k}={shlex.quote(v)}" for k, v in launch.env.items()]
        lines = ([" ".join(["env", *env])] if env else []) + [" ".join(shlex.quote(w) for w in words)]
        return " \\\n  ".join(lines)
    if fmt == "unit":
        lines = ["[Service]"]
        for k, v in launch.env.items():
            value = v.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
            lines.append(f'Environment="{k}={value}"')
        if launch.secret_env:
            lines.append("EnvironmentFile=/etc/sglang/sglang.env")
        # As the sglang_server role writes it: the launcher passes secrets from the environment, not argv.
        exec_words = [python, LAUNCHER, *LAUNCH_MODULE]
        flag_lines = systemd.flag_lines(launch.argv)
        lines.append("ExecStart=" + " ".join(map(systemd.quote, exec_words)) + (" \\" if flag_lines else ""))
        lines += [f"    {line}" + (" \\" if i < len(flag_lines) - 1 else "") for i, line in enumerate(flag_lines)]
        return "\n".join(lines)
    raise CommandError(f"unknown format {fmt!r}")


def cmd_profiles(args: argparse.Namespace) -> int:
    profiles, _ = _load(args)
    for name in profiles:
        try:
            profile = prof.resolve(name, profiles)
        except prof.ProfileError as exc:
            print(f"{name}\n    BROKEN: {exc}")
            continue
        parent = f" (extends {profile.chain[-2]})" if len(profile.chain) > 1 else ""
        print(f"{name}{parent}\n    {profile.description}")
    return 0


def _print_notes(launch: prof.Launch) -> None:
    for note in launch.notes:
        print(f"note: {note}", file=sys.stderr)
    for key in launch.secret_env:
        print(f"note: {key} (secret) is not printed: it goes into the 0600 EnvironmentFile", file=sys.stderr)


def cmd_render(args: argparse.Namespace) -> int:
    launch = _render(args)
    _print_notes(launch)
    print(format_launch(launch, args.format, args.python))
    return 0


def facts_from_args(args: argparse.Namespace) -> dict[str, Any]:
    facts: dict[str, Any] = {"gpu_arch": args.gpu_arch, "gpu_count": args.gpus, "nvlink": args.nvlink}
    if args.model_config:
        try:
            facts.update(rules.model_facts_from_path(args.model_config))
        except (OSError, ValueError) as exc:
            raise CommandError(f"--model-config {args.model_config}: {exc}") from exc
    return {k: v for k, v in facts.items() if v is not None}


def cmd_validate(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    launch = _render(args)
    facts = facts_from_args(args)
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


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profiles-file", type=Path, metavar="FILE",
                   help="YAML file holding `sglang_profiles` (default: group_vars/all/profiles.yml)")


def add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("profile", help="profile name (see `sglang-deploy profiles`)")
    p.add_argument("--sglang-version", metavar="V",
                   help="target SGLang release (default: sglang_version in group_vars/all/sglang.yml)")
    add_common(p)
