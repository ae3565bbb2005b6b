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
``sglang_tp``, ``sglang_host``, ``sglang_port``); a profile flag of the same name overrides them. A node of a
multi-node group (settings ``sglang_node``, see nodes.node) adds --nnodes, --node-rank, --dist-init-addr,
--dist-timeout and the socket interface variables.
``sglang_api_key`` never enters argv: its value is returned in ``Launch.secret_env`` as SGLANG_API_KEY, which the
server's 0600 EnvironmentFile holds and the launcher (launch.py) turns into ``--api-key`` inside the process.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import flags, formats, nodes
from .formats import MAX_LAUNCH_BYTES, MAX_VALUE_BYTES
from .host.launch import MIN_KEY_LENGTH, SECRET_FLAGS
from .paths import GROUP_VARS, read_bounded
from .secret_names import is_secret_name, url_passwords

PROFILES_FILE = GROUP_VARS / "all" / "profiles.yml"
SETTINGS_FILE = GROUP_VARS / "all" / "sglang.yml"
PROFILES_VAR = "sglang_profiles"
API_KEY_ENV = "SGLANG_API_KEY"
PROFILE_KEYS = {"description", "extends", "args", "env"}
# Profile and flag names: they land in the unit's Description and comments and in argv.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# YAML nodes a profiles or settings file may expand to through aliases (a shipped file has a few hundred).
MAX_YAML_NODES = 100_000
# Size of a profiles, settings, search or stack file (the shipped ones are a few KB, a lock under 100 KB).
MAX_YAML_BYTES = 4 << 20
SECRETS_VAR = "sglang_server_secret_env"
# Flags, and environment variables, one resolved profile may set: SGLang 0.5.23 has 559 option strings and reads 747
# variables, so every one fits; 33,000 flags took 45 s to validate and printed a line each.
MAX_PROFILE_ENTRIES = 1024
# Where a secret environment variable belongs instead of a profile (the sglang_server role's variables).
SECRET_ENV_HOMES = {API_KEY_ENV: "sglang_api_key", "HF_TOKEN": "sglang_server_hf_token"}
# What argparse reads as an option rather than a value: a dash and more, unless a negative number
# (argparse.ArgumentParser._parse_optional and _negative_number_matcher).
OPTION_LIKE = re.compile(r"-(?!\d+\Z|\d*\.\d+\Z).")

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
        for key_node, _ in node.value:
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


def parse_yaml(text: str, where: str) -> Any:
    """YAML text read with the profiles' limits (no key twice in a mapping, bounded aliases, values Python can
    hold); ProfileError naming ``where`` and the line otherwise. Rule id ``yaml-duplicate-key`` for a repeated key."""
    try:
        doc = yaml.load(text, Loader=_Loader)
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


def _read_var(path: Path, var: str | None = None) -> Any:
    doc = parse_yaml(read_text(path), str(path)) or {}
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
    for name in profiles:
        _check_name(name)
    return profiles


def load_settings(path: str | Path | None = None) -> dict[str, Any]:
    """Project-wide settings (group_vars/all/sglang.yml): sglang_model_path, sglang_tp, sglang_port, ..."""
    return _read_var(path or SETTINGS_FILE)


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
    chain.reverse()  # root first

    args: dict[str, Any] = {}
    env: dict[str, Any] = {}
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


def _word(value: Any, where: str, problems: list[tuple[str, str]], flag: bool = True) -> str:
    """``value`` as one argv word or environment value, or a problem: only scalars, finite numbers, no line breaks
    or NUL, and (argv) nothing that argparse would read as another flag."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        hint = "; give a JSON string in quotes" if isinstance(value, dict) else ""
        problems.append(("value-type", f"{where}: {type(value).__name__} {_short(value)} is not a single value{hint}"))
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(("value-type", f"{where}: {value} is not a finite number"))
        return ""
    text = str(value)
    bad = formats.unsafe_char(text)
    if bad:
        problems.append(
            (
                "unsafe-value",
                f"{where}: the value holds {bad} (line break, NUL or a character systemd refuses): remove it",
            )
        )
    elif len(text.encode()) > MAX_VALUE_BYTES:
        problems.append(
            (
                "value-length",
                f"{where}: the value is {len(text.encode())} bytes, over the {MAX_VALUE_BYTES} a launch value may"
                " hold: shorten it (a long template or JSON belongs in a file whose path the flag takes)",
            )
        )
    elif url_passwords(text):
        problems.append(
            (
                "secret-in-profile",
                f"{where}: the value is a URL with a password (profiles reach argv, results and logs): remove the"
                f" credential; give it to the server through {SECRETS_VAR} (vault it)",
            )
        )
    elif flag and OPTION_LIKE.match(text):
        problems.append(
            (
                "unsafe-value",
                f"{where}: the value {_short(text)} begins with '-', which SGLang's parser would read as another"
                " flag: remove it, or write the flag as its own key",
            )
        )
    return text


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _secret_flag(canonical: str) -> str | None:
    """Where a secret flag belongs instead of the profile, or None if ``canonical`` is not a secret."""
    for env_name, flag in SECRET_FLAGS.items():
        if flag == f"--{canonical}":
            home = "sglang_api_key" if env_name == API_KEY_ENV else f"{SECRETS_VAR} as {env_name}"
            return f"set {home} (vault it): the 0600 environment file holds it and the launcher passes it to SGLang"
    if is_secret_name(canonical):
        return "a secret has no safe place in argv (every user can read it in /proc): remove it"
    return None


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
    problems = []
    for name in args:
        if not isinstance(name, str):
            problems.append(f"{var} has a key of type {type(name).__name__}: flag names are strings (quote it)")
            continue
        if not NAME_RE.match(name):
            valid = re.match(r"[A-Za-z0-9_.-]*", name).group()
            shown = valid if valid == name else f"{valid}…"
            problems.append(
                f"{var} has {shown!r}, not a flag name: give the name without dashes (letters, digits, '.', '_',"
                " '-') and its value as the value"
            )
            continue
        full = next((flag for flag in secret_flags if flag.startswith(name) and flag != name), None)
        if is_secret_name(name) or name in secret_flags or full:
            what = f"an abbreviation of --{full}, which argparse takes for it" if full else "a secret"
            problems.append(
                f"{var} sets {name}, {what}: argv is readable by every user of the host (/proc) and is in the unit"
                f" file; remove it ({secret_fix})"
            )
        elif name in owned or any(flag.startswith(name) for flag in owned):
            flag = name if name in owned else next(flag for flag in owned if flag.startswith(name))
            home = str(owned[flag])
            what = "" if flag == name else f" (an abbreviation of --{flag})"
            fix = "remove it" if home.startswith("__") else f"set {home} instead"
            problems.append(f"{var} sets {name}{what}, which the role sets itself: {fix}")
        else:  # the values, never shown: a list item or a value may be a smuggled flag or hold a password
            values = args[name] if isinstance(args[name], list) else [args[name]]
            if any(isinstance(v, (dict, list)) for v in values):
                problems.append(f"{var}: {name} takes one value or a list of values, not a mapping or nested list")
            elif any(isinstance(v, str) and OPTION_LIKE.match(v) for v in values):
                problems.append(
                    f"{var}: a value of {name} begins with '-', which the parser would read as another flag: write"
                    " each flag as its own key"
                )
            elif any(url_passwords(str(v)) for v in values):
                problems.append(
                    f"{var}: a value of {name} is a URL with a password, which argv and the unit file would show:"
                    f" remove it ({secret_fix})"
                )
    return problems


def _argv(args: dict[str, Any], table: flags.FlagTable, problems: list[tuple[str, str]]) -> list[str]:
    argv: list[str] = []
    for key, value in args.items():
        where = f"--{key}"
        found = table.lookup(key) or next(
            (table.lookup(r.old) for r in flags.FLAG_RENAMES if r.new == key and table.lookup(r.old)), None
        )
        home = _secret_flag(found[0] if found else key)
        if home:
            problems.append(
                ("secret-in-profile", f"{where} is a secret in a profile (it would reach argv and the results): {home}")
            )
            continue
        if value is False:
            continue
        argv.append(where)
        if value is True:
            continue
        if isinstance(value, (list, tuple)):
            nargs = found[1]["nargs"] if found else "*"
            if nargs not in ("+", "*"):
                problems.append(
                    (
                        "flag-list",
                        f"{where} takes one value in sglang {table.release} but the profile"
                        f" gives a list {_short(value)}: give one value",
                    )
                )
                continue
            if not value and nargs == "+":
                problems.append(("flag-list", f"{where} needs at least one value: give one, or null to remove it"))
            argv.extend(_word(v, where, problems) for v in value)
        else:
            argv.append(_word(value, where, problems))
    return argv


def _listen(args: dict[str, Any], table: flags.FlagTable) -> dict[str, Any]:
    """Where the server will listen (the settings unless the profile overrides them), whether that is reachable
    from other hosts, and the URL to reach it from the host itself."""

    def get(name: str) -> Any:
        dest = table.flags[name]["dest"] if name in table.flags else name
        for key, value in args.items():
            found = table.lookup(key)
            if (found[1]["dest"] if found else key) == dest:
                return value
        return None

    host, port = get("host"), get("port")
    host = "127.0.0.1" if host is None else str(host)  # SGLang's default (server_args.py: ServerArgs.host)
    try:
        port = int(str(port))
    except ValueError:
        port = 30000 if port is None else 0  # SGLang's default port; 0: the bad-type rule reports it
    address = host.strip("[]")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        ip = None
    is_open = not nodes.loopback(host)
    connect = "127.0.0.1" if ip is None and address in ("", "0") or ip is not None and ip.is_unspecified else address
    if ":" in connect:
        connect = f"[{connect}]"
    return {"host": host, "port": port, "open": is_open, "url": f"http://{connect}:{port}"}


def check_api_key(key: Any, var: str = "sglang_api_key") -> list[tuple[str, str]]:
    """Problems with the API key in variable ``var`` (never its value): the launcher refuses a short key and masks
    the key in the server's output, which a short key would turn into masking ordinary text."""
    if key in (None, ""):
        return []
    text = str(key)
    if len(text) < MIN_KEY_LENGTH:
        return [
            (
                "api-key",
                f"{var} has {len(text)} characters: use at least {MIN_KEY_LENGTH}"
                " (e.g. `openssl rand -hex 24`) and keep it in a vault",
            )
        ]
    if formats.unsafe_char(text) or any(c.isspace() for c in text):
        return [("api-key", f"{var} holds whitespace, a line break or NUL: use letters, digits and punctuation only")]
    return []


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
    if not (sglang_version or settings.get("sglang_version_default")):
        raise ProfileError(
            "no SGLang release given: pass one (--sglang-version) or set sglang_version_default "
            "in group_vars/all/sglang.yml"
        )
    version = str(sglang_version or settings["sglang_version_default"]).strip()
    try:
        table = flags.flag_table(version)
    except flags.FlagError as exc:
        raise ProfileError(str(exc), [("sglang-version", str(exc))]) from exc

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
    merged: dict[str, Any] = {}
    for var, flag in SETTING_FLAGS.items():
        value = settings.get(var)
        if value is not False and value not in (None, ""):
            merged[flag] = value
    # A mapping once the playbook has resolved it (the settings file itself holds its Jinja expression).
    place = settings.get("sglang_node")
    node_args, node_env = nodes.launch_args(place if isinstance(place, dict) else {})
    merged.update(node_args)
    merged.update(profile.args)
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
    translated = flags.translate(merged, {**node_env, **profile.env}, version)
    env = {key: _word(value, f"env {key}", problems, flag=False) for key, value in translated.env.items()}
    argv = _argv(translated.args, table, problems)
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
        raise ProfileError(f"profile {profile_name!r}: " + "; ".join(message for _, message in problems), problems)
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
        listen=_listen(translated.args, table),
    )
