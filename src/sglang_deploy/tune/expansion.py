"""A search's matrix expanded: every combination of one value per axis, minus those its constraints drop."""

from __future__ import annotations

import itertools
import unicodedata
from dataclasses import dataclass
from typing import Any

from .searchfile import Search


@dataclass
class Candidate:
    """One combination: the label chosen per axis (as reports show it) and the args/env it sets over the base."""

    index: int
    choices: dict
    args: dict
    env: dict

    @property
    def label(self) -> str:
        return one_line(", ".join(f"{a}={v}" for a, v in self.choices.items()))


def one_line(value: Any) -> str:
    """``value`` as text for one line of a report: control characters (line breaks, tab, ESC, DEL, C1), format
    characters (bidirectional overrides) and line separators written as escapes (a newline as \\n)."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in _NOT_SHOWN else c for c in str(value))


_NOT_SHOWN = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _matches(choices: dict, cond: dict) -> bool:
    return all(choices[axis] in labels for axis, labels in cond.items())


def expand(search: Search) -> tuple[list, list]:
    """(candidates, excluded): every combination, minus those the constraints drop ((choices, reason) pairs)."""
    shown = {ax.name: dict(zip(ax.labels, ax.shown)) for ax in search.axes}

    def labels(cond: dict) -> dict:
        return {a: sorted(shown[a][lb] for lb in v) for a, v in cond.items()}

    candidates, excluded = [], []
    for combo in itertools.product(*(range(len(ax.labels)) for ax in search.axes)):
        choices = {ax.name: ax.labels[i] for ax, i in zip(search.axes, combo)}
        reason = None
        for c in search.constraints:
            if "exclude" in c and _matches(choices, c["exclude"]):
                reason = "excluded by " + ", ".join(f"{a}={'|'.join(v)}" for a, v in labels(c["exclude"]).items())
                break
            if "when" in c and _matches(choices, c["when"]) and not _matches(choices, c["require"]):
                reason = (
                    "constraint: "
                    + ", ".join(f"{a}={'|'.join(v)}" for a, v in labels(c["when"]).items())
                    + " requires "
                    + ", ".join(f"{a} in {v}" for a, v in labels(c["require"]).items())
                )
                break
        choices = {ax.name: ax.shown[i] for ax, i in zip(search.axes, combo)}
        if reason:
            excluded.append((choices, reason))
            continue
        args, env = {}, {}
        for ax, i in zip(search.axes, combo):
            args.update(ax.settings[i]["args"])
            env.update(ax.settings[i]["env"])
        candidates.append(Candidate(len(candidates) + 1, choices, args, env))
    return candidates, excluded
