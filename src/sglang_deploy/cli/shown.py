"""What the command line prints shows control characters instead of obeying them.

Profile descriptions, host names, task names and failure messages come from files and hosts: an escape sequence in
one could retitle, clear or rewrite the terminal, and a bidirectional override could reorder what is read. main()
wraps stdout and stderr in Shown, so every line printed goes through shown(); the data itself keeps its text.
A value shaped like a credential (a flag's `Authorization: Bearer ...`) is masked there too, whatever its key.
"""

from __future__ import annotations

from typing import TextIO

from ansible_collections.sglang.deploy.plugins.module_utils import text as host_text
from sglang_deploy.secret_names import mask_shown


def shown(text: str) -> str:
    """``text`` with each credential masked (secret_names.mask_shown) and each control character written as its
    escape (ESC as \\x1b, RLO as \\u202e)."""
    return host_text.escaped(mask_shown(text), host_text.IN_LINES)


class Shown:
    """A text stream that writes shown(text) to ``terminal``, which stays at hand for the progress line's own
    control sequences; everything else (fileno, isatty, flush) is the terminal's."""

    def __init__(self, terminal: TextIO):
        self.terminal = terminal

    def write(self, text: str) -> int:
        return self.terminal.write(shown(text))

    def __getattr__(self, name: str):
        return getattr(self.terminal, name)
