"""What the command line prints shows control characters instead of obeying them.

Profile descriptions, host names, task names and failure messages come from files and hosts: an escape sequence in
one could retitle, clear or rewrite the terminal, and a bidirectional override could reorder what is read. main()
wraps stdout and stderr in Shown, so every line printed goes through shown(); the data itself keeps its text.
"""

from __future__ import annotations

import re
from typing import TextIO

# C0 controls other than tab and newline, DEL, C1 controls, and the bidirectional marks, embeddings, overrides and
# isolates (Unicode's Bidi_Control).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text`` with each control character written as its escape (ESC as \\x1b, RLO as \\u202e)."""
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], text)


class Shown:
    """A text stream that writes shown(text) to ``terminal``, which stays at hand for the progress line's own
    control sequences; everything else (fileno, isatty, flush) is the terminal's."""

    def __init__(self, terminal: TextIO):
        self.terminal = terminal

    def write(self, text: str) -> int:
        return self.terminal.write(shown(text))

    def __getattr__(self, name: str):
        return getattr(self.terminal, name)
