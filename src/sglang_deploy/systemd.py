"""systemd unit syntax for a launch command: quoting and one flag per line."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z0-9_@:,./+=-]+$")


def quote(arg: str) -> str:
    """Quote one ExecStart word; `%` and `$` stay literal."""
    text = str(arg).replace("%", "%%").replace("$", "$$")
    if _PLAIN.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def flag_lines(argv: list[str]) -> list[str]:
    """Group argv into lines: each `--flag` with the values that follow it, quoted for ExecStart."""
    lines: list[list[str]] = []
    for arg in argv:
        if arg.startswith("--") or not lines:
            lines.append([quote(arg)])
        else:
            lines[-1].append(quote(arg))
    return [" ".join(words) for words in lines]
