"""Profile values into a launch: each flag value or environment value as one word (refused where unsafe: not a
single value, a line break, too long, a URL password, a value argparse would read as a flag), a profile's flags as
argv (secret flags refused), where the server will listen, and the API key's checks. profiles.render uses them."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from . import flags, formats, nodes
from .formats import MAX_VALUE_BYTES
from ansible_collections.sglang.deploy.plugins.module_utils.launch import MIN_KEY_LENGTH, SECRET_FLAGS
from ..secret_names import is_secret_name, value_secrets

API_KEY_ENV = "SGLANG_API_KEY"
SECRETS_VAR = "sglang_server_secret_env"
# What argparse reads as an option rather than a value: a dash and more, unless a negative number
# (argparse.ArgumentParser._parse_optional and _negative_number_matcher).
OPTION_LIKE = re.compile(r"-(?!\d+\Z|\d*\.\d+\Z).")


def word(value: Any, where: str, problems: list[tuple[str, str]], flag: bool = True) -> str:
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
    elif value_secrets(text):
        problems.append(
            (
                "secret-in-profile",
                f"{where}: the value is a URL with a password or holds another secret (a query parameter such as ?token=, a"
                " secret-named JSON key; profiles reach argv, results and logs): remove the"
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


def argv_words(args: dict[str, Any], table: flags.FlagTable, problems: list[tuple[str, str]]) -> list[str]:
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
            argv.extend(word(v, where, problems) for v in value)
        else:
            argv.append(word(value, where, problems))
    return argv


def listen_address(args: dict[str, Any], table: flags.FlagTable) -> dict[str, Any]:
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
