"""Launch profiles as data: load ``sglang_profiles``, resolve ``extends`` chains, render a launch for a version.

A profile (group_vars/all/profiles.yml)::

    nextn:
      description: what it is for and what is known about it
      extends: baseline            # optional, one parent
      args:                        # SGLang flags without leading dashes
        speculative-algorithm: NEXTN
        disable-custom-all-reduce: true    # true = bare switch, false = switch left out
        cuda-graph-bs: [1, 2, 4]           # list = several values
        attention-backend: null            # null removes a flag inherited from the parent
      env:
        OMP_NUM_THREADS: 16                # rendered as strings; true/false as 1/0
        SGLANG_ENABLE_SPEC_V2: null        # null removes an inherited variable

Model and host flags come from the project-wide settings (``sglang_model_path``, ``sglang_served_model_name``,
``sglang_tp``, ``sglang_host``, ``sglang_port``); a profile flag of the same name overrides them.
``sglang_api_key`` never enters argv: its value is returned in ``Launch.secret_env`` as SGLANG_API_KEY, which the
server's 0600 EnvironmentFile holds and the launcher (launch.py) turns into ``--api-key`` inside the process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import flags
from .paths import GROUP_VARS

PROFILES_FILE = GROUP_VARS / "all" / "profiles.yml"
SETTINGS_FILE = GROUP_VARS / "all" / "sglang.yml"
PROFILES_VAR = "sglang_profiles"
DEFAULT_SGLANG_VERSION = "0.5.23"
API_KEY_ENV = "SGLANG_API_KEY"
PROFILE_KEYS = {"description", "extends", "args", "env"}

# settings variable -> SGLang flag
SETTING_FLAGS = {
    "sglang_model_path": "model-path",
    "sglang_served_model_name": "served-model-name",
    "sglang_tp": "tp-size",
    "sglang_host": "host",
    "sglang_port": "port",
}


class ProfileError(ValueError):
    """A profile that cannot be resolved: unknown name or parent, cycle, malformed entry."""


@dataclass
class Profile:
    """A profile after ``extends`` is resolved (parent first)."""

    name: str
    description: str
    args: dict[str, Any]
    env: dict[str, str]
    chain: list[str]


@dataclass
class Launch:
    """One rendered launch: ``python -m sglang.launch_server`` + argv, with env and the secret env apart."""

    profile: str
    sglang_version: str
    flags_release: str
    args: dict[str, Any]
    argv: list[str]
    env: dict[str, str]
    secret_env: dict[str, str] = field(repr=False)
    notes: list[str]
    dropped: list[str]


def _read_var(path: Path, var: str | None = None) -> Any:
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ProfileError(f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: expected a mapping of variables")
    if var is None:
        return doc
    if var not in doc:
        raise ProfileError(f"{path} has no variable {var!r}")
    return doc[var]


def load_profiles(path: str | Path | None = None) -> dict[str, dict]:
    """The ``sglang_profiles`` mapping from a YAML file (default: the repo's group_vars/all/profiles.yml)."""
    profiles = _read_var(path or PROFILES_FILE, PROFILES_VAR)
    if not isinstance(profiles, dict):
        raise ProfileError(f"{PROFILES_VAR} must be a mapping of profile name -> profile")
    return profiles


def load_settings(path: str | Path | None = None) -> dict[str, Any]:
    """Project-wide settings (group_vars/all/sglang.yml): sglang_model_path, sglang_tp, sglang_port, ..."""
    return _read_var(path or SETTINGS_FILE)


def _check_mapping(name: str, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"profile {name!r}: {key} must be a mapping")
    for k in value:
        if not isinstance(k, str) or not k or k.startswith("-"):
            raise ProfileError(f"profile {name!r}: {key} key {k!r} must be a name without leading dashes")
    return value


def _env_str(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def resolve(name: str, profiles: dict[str, dict]) -> Profile:
    """Merge ``name`` with its ``extends`` ancestors; a child's ``null`` removes an inherited flag or variable."""
    if name not in profiles:
        raise ProfileError(f"unknown profile {name!r}; available: {', '.join(sorted(profiles)) or '(none)'}")
    chain: list[str] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            raise ProfileError(f"profile {name!r}: extends cycle {' -> '.join(chain + [current])}")
        if current not in profiles:
            raise ProfileError(f"profile {chain[-1]!r} extends unknown profile {current!r}")
        body = profiles[current]
        if not isinstance(body, dict):
            raise ProfileError(f"profile {current!r} must be a mapping")
        unknown = set(body) - PROFILE_KEYS
        if unknown:
            raise ProfileError(f"profile {current!r}: unknown keys {sorted(unknown)}; allowed {sorted(PROFILE_KEYS)}")
        parent = body.get("extends")
        if parent is not None and not isinstance(parent, str):
            raise ProfileError(f"profile {current!r}: extends must be one profile name")
        chain.append(current)
        current = parent
    chain.reverse()  # root first

    args: dict[str, Any] = {}
    env: dict[str, str] = {}
    for member in chain:
        body = profiles[member]
        for key, value in _check_mapping(member, "args", body.get("args")).items():
            args.pop(key, None)
            if value is not None:
                args[key] = value
        for key, value in _check_mapping(member, "env", body.get("env")).items():
            env.pop(key, None)
            if value is not None:
                env[key] = _env_str(value)
    description = profiles[name].get("description")
    if not isinstance(description, str) or not description.strip():
        raise ProfileError(f"profile {name!r} needs a description")
    return Profile(name, description.strip(), args, env, chain)


def _argv(args: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in args.items():
        if value is False:
            continue
        argv.append(f"--{key}")
        if value is True:
            continue
        if isinstance(value, (list, tuple)):
            argv.extend(str(v) for v in value)
        else:
            argv.append(str(value))
    return argv


def render(
    profile_name: str,
    profiles: dict[str, dict],
    settings: dict[str, Any],
    sglang_version: str | None = None,
) -> Launch:
    """Render ``profile_name`` for ``sglang_version`` (default 0.5.23, the newest stable release)."""
    profile = resolve(profile_name, profiles)
    version = str(sglang_version or DEFAULT_SGLANG_VERSION)
    try:
        table = flags.flag_table(version)
    except flags.FlagError as exc:
        raise ProfileError(str(exc)) from exc

    merged: dict[str, Any] = {}
    for var, flag in SETTING_FLAGS.items():
        value = settings.get(var)
        if value not in (None, ""):
            merged[flag] = value
    merged.update(profile.args)
    translated = flags.translate(merged, profile.env, version)

    api_key = settings.get("sglang_api_key")
    secret_env = {API_KEY_ENV: str(api_key)} if api_key else {}
    argv = _argv(translated.args)
    notes = list(translated.notes)
    if table.release != version:
        notes.insert(0, f"sglang {version}: no recorded flag list, using the nearest lower one ({table.release})")
    return Launch(
        profile=profile_name,
        sglang_version=version,
        flags_release=table.release,
        args=translated.args,
        argv=argv,
        env=translated.env,
        secret_env=secret_env,
        notes=notes,
        dropped=translated.dropped,
    )
