"""Text from files and hosts that a terminal may show: the characters that act on the terminal instead of being
shown. Stdlib only; the locks refuse them in file paths, the roles' loop labels and the command line escape them."""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (\x9b is a terminal's CSI), the bidirectional marks, embeddings, overrides and
# isolates (Unicode's Bidi_Control), the line and paragraph separators (U+2028, U+2029) and the zero-width characters
# (U+200B-U+200D, U+2060, U+FEFF): an escape sequence retitles, clears or rewrites a terminal, an override reorders
# what is read (U+202E shows "evil\u202egpj.exe" as "evilexe.jpg"), a separator breaks a line, a zero-width
# character makes two different names look the same.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]")
# CONTROL but tab and newline: for text of many lines (what the command line prints, compare's table and report).
IN_LINES = re.compile("(?![\t\n])" + CONTROL.pattern)


def escaped(text: object, control: re.Pattern = CONTROL) -> str:
    """``text`` (as str) with each ``control`` character written as its escape (ESC as \\x1b, RLO as \\u202e)."""
    return control.sub(lambda m: ascii(m.group())[1:-1], str(text))
