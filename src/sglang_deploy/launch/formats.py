"""Every launch format, quoted in one place: the systemd unit's ExecStart, its EnvironmentFile, a shell command.

The sglang_server role's templates (through filter_plugins/sglang.py) and `sglang-deploy render` both call these.
Each function refuses what its format cannot hold safely (a line break, NUL, a bad variable name) even though
profiles.render refuses it earlier: no caller can add a line to a unit, an environment file or a shell command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

import yaml

from ansible_collections.sglang.deploy.plugins.module_utils.launch import API_KEYS, MIN_KEY_LENGTH
from ..paths import REPO

# systemd's env_name_is_valid() (src/basic/env-util.c) also takes other bytes; this is the portable shell subset.
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# A line end for systemd's and the shell's line readers, NUL, and what systemd's EnvironmentFile rejects
# (systemd.exec(5): U+FEFF and Unicode noncharacters); lone surrogates cannot be written as UTF-8.
_UNSAFE = re.compile("[\x00\r\n\ufeff\ufdd0-\ufdef\ufffe\uffff\ud800-\udfff]")
_EXEC_PLAIN = re.compile(r"[A-Za-z0-9_@:,./+=-]+\Z")
# systemd reads at most this many bytes per (continued) line and drops longer ones (LONG_LINE_MAX, src/basic/fileio.h).
LINE_MAX = 1024 * 1024 - 1
# Longest launch value (a flag's or an environment variable's), in UTF-8 bytes: Linux refuses to start a program
# with an argument or environment string over 128 KiB (MAX_ARG_STRLEN), systemd drops unit lines over 1 MiB.
MAX_VALUE_BYTES = 64 << 10
# All argv words and environment values of a launch together (Linux's limit for both is 2 MiB with an 8 MiB stack).
MAX_LAUNCH_BYTES = 512 << 10
LAUNCHER = "launch.py"
LAB_PYTHON = "/usr/bin/python3"


class FormatError(ValueError):
    """A name or value that the format cannot carry exactly."""


def check_env_name(name: object) -> str:
    if not isinstance(name, str) or not ENV_NAME_RE.match(name):
        raise FormatError(f"environment variable name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    return name


def unsafe_char(text: str) -> str | None:
    """The first character of ``text`` that no launch format may hold (as repr), or None."""
    found = _UNSAFE.search(text)
    return repr(found.group()) if found else None


def check_text(text: object, what: str = "value") -> str:
    text = str(text)
    bad = unsafe_char(text)
    if bad:
        raise FormatError(f"{what} holds {bad} (a line break, NUL or a character systemd refuses): remove it")
    return text


def unit_value(value: object) -> str:
    """A value for any other unit setting (User=, WorkingDirectory=, Description=, a comment): one line, with `%`
    kept literal (systemd.unit(5) "Specifiers")."""
    return check_text(value, "a unit setting").replace("%", "%%")


def exec_word(arg: object) -> str:
    """One ExecStart word (systemd.service(5) "Command lines"): `%` and `$` stay literal, quoted unless plain."""
    text = check_text(arg, "a command-line word").replace("%", "%%").replace("$", "$$")
    if _EXEC_PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def exec_start(command: Sequence[str], argv: Sequence[str]) -> str:
    """``ExecStart=`` with the command on the first line and each ``--flag`` with its values on its own line."""
    if not command or not str(command[0]).startswith("/"):
        raise FormatError(f"the command {command[0] if command else ''!r} must be an absolute path")
    lines: list[list[str]] = [[exec_word(w) for w in command]]
    for arg in argv:
        if str(arg).startswith("--"):
            lines.append([])
        lines[-1].append(exec_word(arg))
    return _fits("ExecStart=" + " \\\n    ".join(" ".join(words) for words in lines), "the ExecStart line")


def _fits(line: str, what: str) -> str:
    size = len(line.encode("utf-8"))
    if size > LINE_MAX:
        raise FormatError(f"{what} is {size} bytes; systemd ignores lines over {LINE_MAX}: shorten the values")
    return line


def env_value(value: object) -> str:
    """A value for systemd's EnvironmentFile (systemd.exec(5)): double quotes, with `"`, `\\`, `` ` `` and `$`
    backslash-escaped, read back exactly."""
    text = check_text(value, "an environment value")
    return '"' + re.sub(r'(["\\`$])', r"\\\1", text) + '"'


def env_file(env: Mapping[str, object]) -> str:
    """The lines of an EnvironmentFile, sorted by name, each ``NAME="value"``."""
    return "".join(_fits(f"{check_env_name(k)}={env_value(v)}", f"variable {k}") + "\n" for k, v in sorted(env.items()))


def env_problems(env: Mapping[object, object]) -> list[str]:
    """Why ``env`` cannot be written as an environment file, naming variables but never their values."""
    problems, total = [], 0
    for key, value in env.items():
        try:
            check_env_name(key)
            size = len(check_text(value, f"environment variable {key}").encode())
        except FormatError as exc:
            problems.append(str(exc))
            continue
        total += size
        if size > MAX_VALUE_BYTES:
            problems.append(
                f"environment variable {key} is {size} bytes, over the {MAX_VALUE_BYTES} a launch value may hold"
                " (Linux starts no program with one over 128 KiB): shorten it"
            )
        if key in API_KEYS and len(str(value)) < MIN_KEY_LENGTH:
            problems.append(f"{key} has {len(str(value))} characters: use at least {MIN_KEY_LENGTH}")
    if total > MAX_LAUNCH_BYTES:
        problems.append(f"the environment's values are {total} bytes together, over {MAX_LAUNCH_BYTES}: shorten them")
    return problems


def shell(command: Sequence[str], env: Mapping[str, object]) -> str:
    """A POSIX shell command line: ``env NAME='value' ... command args``, one quoting for every word."""
    words = [f"{check_env_name(k)}={shlex.quote(check_text(v, 'an environment value'))}" for k, v in env.items()]
    line = " ".join(shlex.quote(check_text(w, "a command-line word")) for w in command)
    return " \\\n  ".join(([" ".join(["env", *words])] if words else []) + [line])


def server_command(tools_dir: str, python: str, emulated: bool = False) -> list[str]:
    """What the sglang_server unit runs: the launcher (secrets from the environment) and SGLang or the lab's emulator."""
    launcher = f"{tools_dir}/{LAUNCHER}"
    if emulated:
        return [LAB_PYTHON, launcher, "-m", "emulator"]  # the emulator package beside launch.py
    return [python, launcher, "-m", "sglang.launch_server"]


def env_file_path(config_dir: str, service: str) -> str:
    return f"{config_dir}/{service}.env"


def role_defaults() -> dict:
    """The sglang_server role's defaults: the paths its unit uses (one source for the role and `render`)."""
    return yaml.safe_load((REPO / "roles" / "sglang_server" / "defaults" / "main.yml").read_text())


def unit_service(argv: Sequence[str], python: str | None = None) -> str:
    """The launch lines of the [Service] section exactly as the sglang_server role writes them (real hosts)."""
    d = role_defaults()
    command = server_command(d["sglang_server_tools_dir"], python or d["sglang_server_python"])
    env_path = env_file_path(d["sglang_server_config_dir"], d["sglang_server_service"])
    return f"[Service]\nEnvironmentFile={env_path}\n{exec_start(command, argv)}"
