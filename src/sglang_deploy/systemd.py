"""systemd unit syntax for a launch command: quoting and one flag per line."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z0-9_@:,./+=-]+$")


def quote(arg: str, expand: bool = False) -> str:
    """Quote one ExecStart word. `%` and `$` are literal unless `expand` keeps `${VAR}` for systemd to fill in."""
    text = str(arg).replace("%", "%%")
    if not expand:
        text = text.replace("$", "$$")
    if _PLAIN.match(text) or (expand and re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", text)):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def flag_lines(argv: list[str]) -> list[str]:
    """Group argv into lines: each `--flag` with the values that follow it, quoted for ExecStart."""
    lines: list[list[str]] = []
    for arg in argv:
        word = quote(arg, expand=arg.startswith("${"))
        if arg.startswith("--") or not lines:
            lines.append([word])
        else:
            lines[-1].append(word)
    return [" ".join(words) for words in lines]
