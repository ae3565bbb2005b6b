"""Launch profiles as data: load ``sglang_profiles``, resolve ``extends`` chains, render a launch for a version.

A profile (``sglang_profiles``: the sglang role's defaults/main/profiles.yml, or the project's group_vars/all)::

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
``sglang_tp``, ``sglang_host``, ``sglang_port``); a profile flag of the same name overrides them. A node of a
multi-node group (settings ``sglang_node``, see nodes.node) adds --nnodes, --node-rank, --dist-init-addr,
--dist-timeout and the socket interface variables.
``sglang_api_key`` never enters argv: its value is returned in ``Launch.secret_env`` as SGLANG_API_KEY, which the
server's 0600 EnvironmentFile holds and the launcher (launch.py) turns into ``--api-key`` inside the process.
launch_values.py turns each value into an argv word or environment value and says where the server listens.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from . import flags, formats, launch_values, nodes
from .formats import MAX_LAUNCH_BYTES
from ansible_collections.sglang.deploy.plugins.module_utils.launch import SECRET_FLAGS
from .launch_values import API_KEY_ENV, OPTION_LIKE, SECRETS_VAR, check_api_key
from ansible_collections.sglang.deploy.plugins.module_utils import host_record
from ..paths import GROUP_VARS, SHARED_DEFAULTS, read_bounded
from ..secret_names import is_secret_name, value_secrets

# The shipped profiles and settings: the defaults of the role sglang, which the project's group_vars/all overlays.
PROFILES_FILE = SHARED_DEFAULTS / "profiles.yml"
SETTINGS_FILE = SHARED_DEFAULTS / "sglang.yml"
PROFILES_VAR = "sglang_profiles"
PROFILE_KEYS = {"description", "extends", "args", "env"}
# Profile and flag names (they land in the unit's Description and comments and in argv): the host record's rule, so a
# profile name a host reports is held to the same one.
NAME_RE = host_record.NAME_RE
# YAML nodes a profiles or settings file may expand to through aliases (a shipped file has a few hundred).
MAX_YAML_NODES = 100_000
# Size of a profiles, settings, search or stack file (the shipped ones are a few KB, a lock under 100 KB).
MAX_YAML_BYTES = 4 << 20
# Flags, and environment variables, one resolved profile may set: SGLang 0.5.23 has 559 option strings and reads 747
# variables, so every one fits; 33,000 flags took 45 s to validate and printed a line each.
MAX_PROFILE_ENTRIES = 1024
# Where a secret environment variable belongs instead of a profile (the sglang_server role's variables).
SECRET_ENV_HOMES = {API_KEY_ENV: "sglang_api_key", "HF_TOKEN": "sglang_server_hf_token"}

# settings variable -> SGLang flag
SETTING_FLAGS = {
    "sglang_model_path": "model-path",
    "sglang_served_model_name": "served-model-name",
    "sglang_tp": "tp-size",
    "sglang_host": "host",
    "sglang_port": "port",
    "sglang_enable_metrics": "enable-metrics",
}


# argparse dests of rank 0's rendezvous address (--dist-init-addr, its alias --nccl-init-addr): the inventory's alone.
NODE_ADDRESS_DESTS = {"dist_init_addr"}


class ProfileError(ValueError):
    """A profile that cannot be resolved or rendered safely. ``problems``: (rule id, message) for each finding."""

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.problems = problems or [("profile", message)]


class UnknownProfile(ProfileError):
    """The asked-for profile is not in sglang_profiles: its name and the names that are."""

    def __init__(self, name: str, available: list[str]):
        self.name, self.available = name, available
        super().__init__(
            f"unknown profile {name!r}; available: {', '.join(available) or '(none)'}", [("unknown-profile", name)]
        )


@dataclass
class Profile:
    """A profile after ``extends`` is resolved (parent first)."""

    name: str
    description: str
    args: dict[str, Any]
    env: dict[str, Any]
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
    listen: dict[str, Any]


def _bounded(doc: Any, path: Path | str) -> None:
    """Refuse a document that aliases expand past MAX_YAML_NODES (a "billion laughs" file loads fast but every
    walk over it, rendering included, would run for minutes and fill memory)."""
    stack, seen = [doc], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise ProfileError(f"{path}: YAML aliases expand to over {MAX_YAML_NODES} values: write the values out")
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)


class _DuplicateKey(yaml.MarkedYAMLError):
    """A key given twice in one mapping."""


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (on libyaml where PyYAML has it: 5 times faster), refusing a key given twice in one
    mapping (it would keep the last one silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first: dict[Any, yaml.Node] = {}
        for key_node, _unused in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` then overrides: what merge keys are for
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class refuses it
                continue
            if seen is not key_node:
                problem = f"key {key!r} given twice (first on line {seen.start_mark.line + 1})"
                raise _DuplicateKey(problem=problem, problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep)


class _VarsLoader(_Loader):
    """_Loader for a user's group_vars file: Ansible's !vault and !unsafe values read as their text (no secret is
    decrypted; the settings and profiles the package reads hold none)."""


for _tag in ("!vault", "!unsafe"):
    _VarsLoader.add_constructor(_tag, lambda loader, node: loader.construct_scalar(node))


def parse_yaml(text: str, where: str, loader: type = _Loader) -> Any:
    """YAML text read with the profiles' limits (no key twice in a mapping, bounded aliases, values Python can
    hold); ProfileError naming ``where`` and the line otherwise. Rule id ``yaml-duplicate-key`` for a repeated key."""
    try:
        doc = yaml.load(text, Loader=loader)
    except _DuplicateKey as exc:
        message = f"{where}, line {exc.problem_mark.line + 1}: {exc.problem}: keep one"
        raise ProfileError(message, [("yaml-duplicate-key", message)]) from exc
    except (yaml.YAMLError, RecursionError) as exc:
        raise ProfileError(f"{where} is not valid YAML: {exc}") from exc
    except ValueError as exc:  # a value YAML accepts but Python cannot hold, e.g. an integer of over 4300 digits
        raise ProfileError(f"{where}: a value is out of range ({exc})") from exc
    _bounded(doc, where)
    return doc


def read_yaml(path: Path) -> dict:
    """A YAML file that must hold a mapping, read with the profiles' limits (a regular file of bounded size,
    UTF-8, parse_yaml's). Every YAML file the package reads from users goes through here."""
    return _read_var(path)


def read_text(path: Path) -> str:
    """A UTF-8 file of at most MAX_YAML_BYTES (a regular file); ProfileError naming the fix otherwise."""
    try:
        return read_bounded(path, MAX_YAML_BYTES, "a YAML file").decode("utf-8")
    except OSError as exc:
        raise ProfileError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path} is not UTF-8 (byte {exc.start}): save it as UTF-8") from exc
    except ValueError as exc:
        raise ProfileError(str(exc)) from exc


def _read_var(path: Path, var: str | None = None, loader: type = _Loader) -> Any:
    doc = parse_yaml(read_text(path), str(path), loader) or {}
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: expected a mapping of variables")
    if var is None:
        return doc
    if var not in doc:
        raise ProfileError(f"{path} has no variable {var!r}")
    return doc[var]


def group_vars_all() -> list[Path]:
    """The files of the group `all` in the project's group_vars, in the order Ansible reads them (its
    DataLoader.find_vars_files): the first of all (a folder: its files, sorted, subfolders included), all.yml,
    all.yaml, all.json."""

    def files(path: Path) -> list[Path]:
        out = []
        for child in sorted(path.iterdir(), key=lambda p: p.name):
            if child.name.startswith(".") or child.name.endswith("~"):  # hidden and backups: skipped
                continue
            if child.is_dir() and not child.suffix:
                out += files(child)
            elif child.is_file() and child.suffix in ("", ".yml", ".yaml", ".json"):
                out.append(child)
        return out

    for name in ("all", "all.yml", "all.yaml", "all.json"):
        path = GROUP_VARS / name
        if path.exists():
            return files(path) if path.is_dir() else [path]
    return []


def user_vars(path: Path) -> dict[str, Any]:
    """The variables of a group_vars file of the user's: a file vaulted whole holds secrets only, none of them read."""
    if read_text(path).startswith("$ANSIBLE_VAULT;"):
        return {}
    return _read_var(path, loader=_VarsLoader)


def profiles_file() -> Path:
    """The file whose ``sglang_profiles`` the hosts get: the last file of the project's group_vars/all that defines it
    (a variable defined again replaces the whole value, as in Ansible), else the sglang role's defaults."""
    defining = [path for path in group_vars_all() if PROFILES_VAR in user_vars(path)]
    return defining[-1] if defining else PROFILES_FILE


def load_profiles(path: str | Path | None = None) -> dict[str, dict]:
    """The ``sglang_profiles`` mapping from a YAML file (default: profiles_file())."""
    profiles = _read_var(path or profiles_file(), PROFILES_VAR, _VarsLoader)
    if not isinstance(profiles, dict):
        raise ProfileError(f"{PROFILES_VAR} must be a mapping of profile name -> profile")
    for name in profiles:
        _check_name(name)
    return profiles


def load_settings(path: str | Path | None = None) -> dict[str, Any]:
    """The settings every role shares (sglang_model_path, sglang_tp, sglang_port, ...) from a YAML file; default: the
    sglang role's defaults, each variable that the project's group_vars/all defines again replaced by its value."""
    if path:
        return _read_var(path)
    settings = _read_var(SETTINGS_FILE)
    for overlay in group_vars_all():
        settings.update({k: v for k, v in user_vars(overlay).items() if k != PROFILES_VAR})
    return settings


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ProfileError(
            f"profile name {name!r} must be a string of letters, digits, '.', '_' and '-' (quote a numeric name in"
            " YAML: '1':)",
            [("profile-name", f"bad profile name {name!r}")],
        )


def _check_mapping(name: str, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProfileError(f"profile {name!r}: {key} must be a mapping")
    for k in value:
        if key == "env":
            if not isinstance(k, str) or not formats.ENV_NAME_RE.match(k):
                raise ProfileError(
                    f"profile {name!r}: env name {k!r} must match [A-Za-z_][A-Za-z0-9_]*",
                    [("env-name", f"env name {k!r}")],
                )
        elif not isinstance(k, str) or not NAME_RE.match(k):
            raise ProfileError(
                f"profile {name!r}: args key {k!r} must be a flag name without leading dashes"
                " (letters, digits, '.', '_', '-')",
                [("flag-name", f"flag name {k!r}")],
            )
    return value


def _env_str(value: Any) -> Any:
    """Environment values as strings (true/false as 1/0); anything else is left for render() to refuse."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (str, int)) or isinstance(value, float) and math.isfinite(value):
        return str(value)
    return value


def resolve(name: str, profiles: dict[str, dict]) -> Profile:
    """Merge ``name`` with its ``extends`` ancestors; a child's ``null`` removes an inherited flag or variable."""
    if name not in profiles:
        raise UnknownProfile(str(name), sorted(map(str, profiles)))
    chain = _chain(name, profiles)
    args: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for member in chain:
        body = profiles[member]
        _inherit(args, _check_mapping(member, "args", body.get("args")), lambda value: value)
        _inherit(env, _check_mapping(member, "env", body.get("env")), _env_str)
    for what, entries in (("flags", args), ("environment variables", env)):
        if len(entries) > MAX_PROFILE_ENTRIES:
            message = (
                f"profile {name!r} sets {len(entries)} {what}, over the {MAX_PROFILE_ENTRIES} a profile may set:"
                " keep what the launch changes from SGLang's defaults"
            )
            raise ProfileError(message, [("profile-size", message)])
    description = profiles[name].get("description")
    if not isinstance(description, str) or not description.strip():
        raise ProfileError(f"profile {name!r} needs a description")
    return Profile(name, description.strip(), args, env, chain)


def _chain(name: str, profiles: dict[str, dict]) -> list[str]:
    """``name`` and its ``extends`` ancestors, root first, each checked: a known name, a mapping of known keys."""
    chain: list[str] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            raise ProfileError(f"profile {name!r}: extends cycle {' -> '.join(chain + [current])}")
        if current not in profiles:
            raise ProfileError(f"profile {chain[-1]!r} extends unknown profile {current!r}")
        _check_name(current)
        body = profiles[current]
        if not isinstance(body, dict):
            raise ProfileError(f"profile {current!r} must be a mapping")
        unknown = set(map(str, body)) - PROFILE_KEYS
        if unknown:
            raise ProfileError(f"profile {current!r}: unknown keys {sorted(unknown)}; allowed {sorted(PROFILE_KEYS)}")
        parent = body.get("extends")
        if parent is not None and not isinstance(parent, str):
            raise ProfileError(f"profile {current!r}: extends must be one profile name")
        chain.append(current)
        current = parent
    chain.reverse()
    return chain


def _inherit(merged: dict[str, Any], child: dict, convert: Callable[[Any], Any]) -> None:
    """A child's entries over its parent's in ``merged`` (the child's order last); ``null`` removes one."""
    for key, value in child.items():
        merged.pop(key, None)
        if value is not None:
            merged[key] = convert(value)


def extra_flag_problems(
    args: Any, var: str, owned: dict, secret_fix: str, secret_flags: tuple[str, ...] = ()
) -> list[str]:
    """Why flags that the variable ``var`` adds to a launch ({name without dashes: value}) cannot go to argv, each
    with its fix and never a value: a name that is not a flag name (NAME_RE; shown only up to its first bad
    character, as `api-key=VALUE` would hold a value); a secret by its name, a launcher's secret flag or one of
    ``secret_flags`` (the launched program's flags that take a secret), or an abbreviation of one, which argparse
    takes for it (``secret_fix``: where keys go instead); a flag that the role
    sets from its own variable (``owned``: flag -> that variable; one starting with __ is no variable of the user's),
    or an abbreviation of one (no flag of smg 1.13.0 is a prefix of another flag here, so every prefix is one that
    argparse takes for it, or one it refuses as ambiguous)."""
    if not args:
        return []
    if not isinstance(args, dict):
        return [f"{var} must be a mapping: flag name without dashes -> value (true: a bare switch)"]
    secret_flags = sorted({flag.lstrip("-") for flag in SECRET_FLAGS.values()} | set(secret_flags))
    problems = [_extra_flag_problem(name, args[name], var, owned, secret_fix, secret_flags) for name in args]
    return [problem for problem in problems if problem]


def _extra_flag_problem(
    name: Any, value: Any, var: str, owned: dict, secret_fix: str, secret_flags: list[str]
) -> str | None:
    """Why the flag ``name`` of ``var`` cannot go to argv (extra_flag_problems), or None."""
    if not isinstance(name, str):
        return f"{var} has a key of type {type(name).__name__}: flag names are strings (quote it)"
    if not NAME_RE.match(name):
        valid = re.match(r"[A-Za-z0-9_.-]*", name).group()
        shown = valid if valid == name else f"{valid}…"
        return (
            f"{var} has {shown!r}, not a flag name: give the name without dashes (letters, digits, '.', '_',"
            " '-') and its value as the value"
        )
    full = next((flag for flag in secret_flags if flag.startswith(name) and flag != name), None)
    if is_secret_name(name) or name in secret_flags or full:
        what = f"an abbreviation of --{full}, which argparse takes for it" if full else "a secret"
        return (
            f"{var} sets {name}, {what}: argv is readable by every user of the host (/proc) and is in the unit"
            f" file; remove it ({secret_fix})"
        )
    if name in owned or any(flag.startswith(name) for flag in owned):
        flag = name if name in owned else next(flag for flag in owned if flag.startswith(name))
        home = str(owned[flag])
        what = "" if flag == name else f" (an abbreviation of --{flag})"
        fix = "remove it" if home.startswith("__") else f"set {home} instead"
        return f"{var} sets {name}{what}, which the role sets itself: {fix}"
    # The values, never shown: a list item or a value may be a smuggled flag or hold a password.
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, (dict, list)) for v in values):
        return f"{var}: {name} takes one value or a list of values, not a mapping or nested list"
    if any(isinstance(v, str) and OPTION_LIKE.match(v) for v in values):
        return (
            f"{var}: a value of {name} begins with '-', which the parser would read as another flag: write"
            " each flag as its own key"
        )
    if any(value_secrets(str(v)) for v in values):
        return (
            f"{var}: a value of {name} is a URL with a password or holds another secret (?token=, a secret-named"
            " JSON key), which argv and the unit file would show:"
            f" remove it ({secret_fix})"
        )
    return None


def _release(settings: dict[str, Any], sglang_version: str | None) -> tuple[str, flags.FlagTable]:
    """The release to render for (given, or the settings' sglang_version_default) and its flag table."""
    if not (sglang_version or settings.get("sglang_version_default")):
        raise ProfileError(
            "no SGLang release given: pass one (--sglang-version) or set sglang_version_default in group_vars/all"
        )
    version = str(sglang_version or settings["sglang_version_default"]).strip()
    try:
        return version, flags.flag_table(version)
    except flags.FlagError as exc:
        raise ProfileError(str(exc), [("sglang-version", str(exc))]) from exc


def _profile_problems(
    profile: Profile, profiles: dict[str, dict], table: flags.FlagTable, version: str
) -> list[tuple[str, str]]:
    """What a profile may not set: one flag under two spellings in one member, rank 0's address, a secret variable."""
    problems: list[tuple[str, str]] = []
    for member in profile.chain:  # a parent's spelling overridden by a child's is what extends is for
        for group in flags.spellings(list(profiles[member].get("args") or {}), version):
            problems.append(
                (
                    "flag-spellings",
                    f"profile {member!r} sets {' and '.join(f'--{name}' for name in group)}, one flag of sglang"
                    f" {table.release} (argparse would keep the last): keep one",
                )
            )
    for name in profile.args:
        found = table.lookup(name)
        if found and found[1].get("dest") in NODE_ADDRESS_DESTS:
            problems.append(
                (
                    "node-layout",
                    f"the profile sets --{name}: rank 0's rendezvous address comes from the inventory"
                    " (sglang_node_address, sglang_dist_init_port of the group): remove it from the profile",
                )
            )
    for key in profile.env:
        if is_secret_name(key):
            home = SECRET_ENV_HOMES.get(key, SECRETS_VAR)
            message = f"env {key} looks like a secret (profiles reach results and logs): remove it and set {home}"
            problems.append(("secret-in-profile", message + " (vault it), written only to the 0600 environment file"))
    return problems


def _setting_args(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The flags the settings set (model, tp, host, port, metrics) and a group node's flags and environment."""
    merged: dict[str, Any] = {}
    for var, flag in SETTING_FLAGS.items():
        value = settings.get(var)
        if value is not False and value not in (None, ""):
            merged[flag] = value
    # A mapping once the playbook has resolved it (the settings file itself holds its Jinja expression).
    place = settings.get("sglang_node")
    node_args, node_env = nodes.launch_args(place if isinstance(place, dict) else {})
    merged.update(node_args)
    return merged, node_env


def render(
    profile_name: str,
    profiles: dict[str, dict],
    settings: dict[str, Any],
    sglang_version: str | None = None,
) -> Launch:
    """Render ``profile_name`` for ``sglang_version`` (default: the settings' sglang_version_default).

    Raises ProfileError, with every problem in ``problems``, for anything that cannot be launched safely: bad
    names, values that are not single scalars, line breaks or NUL, lists on one-value flags, values that begin
    with '--', secrets in the profile, a short API key.
    """
    profile = resolve(profile_name, profiles)
    version, table = _release(settings, sglang_version)
    problems = _profile_problems(profile, profiles, table, version)
    merged, node_env = _setting_args(settings)
    merged.update(profile.args)
    translated = flags.translate(merged, {**node_env, **profile.env}, version)
    env = {key: launch_values.word(value, f"env {key}", problems, flag=False) for key, value in translated.env.items()}
    argv = launch_values.argv_words(translated.args, table, problems)
    size = sum(len(word.encode()) for word in [*argv, *env.values()]) if not problems else 0
    if size > MAX_LAUNCH_BYTES:
        problems.append(
            (
                "value-length",
                f"the launch's flags and environment values are {size} bytes together, over {MAX_LAUNCH_BYTES}:"
                " shorten them",
            )
        )
    api_key = settings.get("sglang_api_key")
    problems += check_api_key(api_key)
    if problems:
        raise ProfileError(
            f"profile {profile_name!r}: " + "; ".join(message for _unused, message in problems), problems
        )
    secret_env = {API_KEY_ENV: str(api_key)} if api_key else {}
    notes = list(translated.notes)
    if table.release != version:
        notes.insert(0, f"sglang {version}: no recorded flag list, using the nearest lower one ({table.release})")
    return Launch(
        profile=profile_name,
        sglang_version=version,
        flags_release=table.release,
        args=translated.args,
        argv=argv,
        env=env,
        secret_env=secret_env,
        notes=notes,
        dropped=translated.dropped,
        listen=launch_values.listen_address(translated.args, table),
    )
