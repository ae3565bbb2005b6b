"""Load and render a profile's launch, and format it for `sglang-deploy render` (argv, env, shell, unit)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from . import profiles as prof
from . import systemd

LAUNCH_MODULE = ["-m", "sglang.launch_server"]
DEFAULT_PYTHON = "/opt/sglang/venv/bin/python"
LAUNCHER = "/opt/sglang-deploy/launch.py"  # installed by the sglang_server role


class CommandError(Exception):
    """Bad input (unknown profile, unreadable file): the CLI turns it into a usage error (exit 2)."""


def load(profiles_file: Path | None = None) -> tuple[dict, dict]:
    """(sglang_profiles, settings) from the profiles file (default: group_vars) and group_vars/all/sglang.yml."""
    try:
        return prof.load_profiles(profiles_file), prof.load_settings()
    except prof.ProfileError as exc:
        raise CommandError(str(exc)) from exc


def render_launch(profile: str, profiles_file: Path | None = None, sglang_version: str | None = None) -> prof.Launch:
    """The profile's launch for an SGLang release (default: sglang_version of the settings)."""
    profiles, settings = load(profiles_file)
    try:
        return prof.render(profile, profiles, settings, sglang_version)
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
