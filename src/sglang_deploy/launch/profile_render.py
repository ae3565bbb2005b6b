"""Load and render a profile's launch, and format it for `sglang-deploy render` (argv, env, shell, unit)."""

from __future__ import annotations

import json
from pathlib import Path

from . import formats, profiles
from .. import paths


class CommandError(Exception):
    """Bad input (unknown profile, unreadable file): the CLI turns it into a usage error (exit 2)."""


def load(profiles_file: Path | None = None) -> tuple[dict, dict]:
    """(sglang_profiles, settings): from the profiles file, else as profiles.load_profiles and load_settings read
    them (the sglang role's defaults, overlaid by the project's group_vars/all)."""
    paths.require_project()
    try:
        return profiles.load_profiles(profiles_file), profiles.load_settings()
    except profiles.ProfileError as exc:
        raise CommandError(str(exc)) from exc


def render_launch(
    profile: str, profiles_file: Path | None = None, sglang_version: str | None = None
) -> profiles.Launch:
    """The profile's launch for an SGLang release (default: sglang_version of the settings)."""
    profile_defs, settings = load(profiles_file)
    try:
        return profiles.render(profile, profile_defs, settings, sglang_version)
    except profiles.ProfileError as exc:
        raise CommandError(str(exc)) from exc


def format_launch(launch: profiles.Launch, fmt: str, python: str | None = None) -> str:
    """argv: JSON array after `python -m sglang.launch_server`; env: the profile's lines of the server's 0600
    EnvironmentFile; shell: a command line; unit: the [Service] launch lines as the sglang_server role writes them.
    One quoting implementation (sglang_deploy.launch.formats) for all, the role's templates included."""
    try:
        if fmt == "argv":
            return json.dumps(launch.argv)
        if fmt == "env":
            return formats.env_file(launch.env).rstrip("\n")
        if fmt == "shell":
            python = python or formats.role_defaults()["sglang_server_python"]
            return formats.shell([python, "-m", "sglang.launch_server", *launch.argv], launch.env)
        if fmt == "unit":
            return formats.unit_service(launch.argv, python)
    except formats.FormatError as exc:
        raise CommandError(f"--format {fmt}: {exc}") from exc
    raise CommandError(f"unknown format {fmt!r}")
