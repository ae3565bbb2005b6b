"""SGLang launch flags per release: recorded flag lists and the rename/removal translations between releases.

Recorded lists live in ``data/flags-<version>.json`` (written by tools/record_flags.py from the real
``ServerArgs.add_cli_args`` parser of that release). A target version without its own list uses the
nearest lower recorded release.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

DATA = Path(__file__).resolve().parents[1] / "data"


class FlagError(ValueError):
    """No recorded flag list can serve the requested version."""


@dataclass(frozen=True)
class FlagTable:
    """The launch flags one recorded release accepts (keys: option strings without leading dashes)."""

    release: str
    source: str
    allow_abbrev: bool
    flags: dict[str, dict[str, Any]]
    env: frozenset[str] = field(default_factory=frozenset)

    def lookup(self, name: str) -> tuple[str, dict[str, Any]] | None:
        """(canonical name, spec) for an option string, an alias or a unique argparse prefix; None if unknown."""
        spec = self.flags.get(name)
        if spec is None and self.allow_abbrev:
            canon = {self.flags[k]["canonical"] for k in self.flags if k.startswith(name)}
            if len(canon) == 1:
                spec = self.flags[next(iter(canon))]
        return (spec["canonical"], spec) if spec else None

    def suggest(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, list(self.flags), n=3, cutoff=0.75)


def recorded_releases() -> list[str]:
    """Versions with a recorded flag list, oldest first."""
    names = (p.name[len("flags-") : -len(".json")] for p in DATA.glob("flags-*.json"))
    return sorted(names, key=Version)


def nearest_release(version: str) -> str:
    """The recorded release used for ``version``: itself if recorded, else the nearest lower one."""
    releases = recorded_releases()
    if not releases:
        raise FlagError(f"no recorded flag lists in {DATA}")
    try:
        target = Version(version)
    except Exception as exc:
        raise FlagError(f"not a version: {version!r}") from exc
    lower = [r for r in releases if Version(r) <= target]
    if not lower:
        raise FlagError(f"sglang {version} is older than every recorded flag list ({', '.join(releases)})")
    return lower[-1]


@functools.lru_cache(maxsize=None)
def _load(release: str) -> FlagTable:
    doc = json.loads((DATA / f"flags-{release}.json").read_text())
    return FlagTable(
        release=doc["sglang_version"],
        source=doc["source"],
        allow_abbrev=doc.get("allow_abbrev", True),
        flags=doc["flags"],
        env=frozenset(doc.get("env", ())),
    )


def flag_table(version: str) -> FlagTable:
    return _load(nearest_release(version))


@dataclass(frozen=True)
class Rename:
    """A flag renamed in ``since``: rendered under the name the target release knows."""

    old: str
    new: str
    since: str


# Renamed in SGLang 0.5.14 (python/sglang/srt/server_args.py, ServerArgs.add_cli_args); the old names were
# deprecated aliases until 0.5.20 removed them. Both directions are translated, so a profile may use either era's name.
FLAG_RENAMES = (
    Rename("mamba-scheduler-strategy", "mamba-radix-cache-strategy", "0.5.14"),
    Rename("cuda-graph-max-bs", "cuda-graph-max-bs-decode", "0.5.14"),
    Rename("cuda-graph-bs", "cuda-graph-bs-decode", "0.5.14"),
)

# Environment variables removed in a release: name -> (release, what replaces it).
SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
ENV_REMOVED = {
    SPEC_V2_ENV: ("0.5.14", "spec v2 (overlap) is the only path; =0 becomes --disable-overlap-schedule"),
}


def is_truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


@dataclass
class Translation:
    args: dict[str, Any]
    env: dict[str, str]
    notes: list[str]
    dropped: list[str]


def _rendered(name: str, target: Version, table: FlagTable, notes: list[str]) -> tuple[str, str]:
    """(the name ``name`` is rendered under for the release, its argparse dest), with a note for each change: a
    rename (FLAG_RENAMES) and an abbreviation expanded. A flag unknown to the release is its own dest."""
    for r in FLAG_RENAMES:
        if name == r.old and target >= Version(r.since):
            notes.append(f"--{r.old} renamed to --{r.new} in sglang {r.since}: rendered as --{r.new}")
            name = r.new
        elif name == r.new and target < Version(r.since):
            notes.append(f"--{r.new} is called --{r.old} before sglang {r.since}: rendered as --{r.old}")
            name = r.old
    found = table.lookup(name)
    if found and name not in table.flags:
        notes.append(f"--{name} is an abbreviation of --{found[0]} in sglang {table.release}: rendered as --{found[0]}")
        name = found[0]
    return name, found[1]["dest"] if found else name


def spellings(names: list[str], version: str) -> list[list[str]]:
    """The groups of ``names`` that are one flag for sglang ``version`` (an alias, an abbreviation, the old and new
    name of a rename: tp-size, tensor-parallel-size, tp), each in the given order; argparse keeps the last."""
    target, table = Version(version), flag_table(version)
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(_rendered(name, target, table, [])[1], []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def translate(args: dict[str, Any], env: dict[str, str], version: str) -> Translation:
    """Rename flags and drop/replace environment variables for sglang ``version``.

    Argparse abbreviations are expanded (``tp`` -> ``tp-size``) and two spellings of one flag (an alias, or a
    profile overriding a setting) keep the later one; a flag unknown to the release is kept as written (the
    validator reports it).
    """
    target = Version(version)
    table = flag_table(version)
    notes: list[str] = []
    dropped: list[str] = []
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}  # argparse dest -> the spelling kept
    for name, value in args.items():
        name, dest = _rendered(name, target, table, notes)
        out.pop(seen.pop(dest, name), None)  # a later spelling of the same flag wins and moves to the end
        seen[dest] = name
        out[name] = value

    new_env: dict[str, str] = {}
    for key, value in env.items():
        removed = ENV_REMOVED.get(key)
        if removed and target >= Version(removed[0]):
            note = f"{key} was removed in sglang {removed[0]} ({removed[1]}): dropped"
            if key == SPEC_V2_ENV and not is_truthy(value) and "disable-overlap-schedule" not in out:
                out["disable-overlap-schedule"] = True
                note += "; added --disable-overlap-schedule"
            notes.append(note)  # its effect is the release's default (or translated): nothing is lost
            continue
        if table.env and key.startswith(("SGLANG_", "SGL_")) and key not in table.env:
            notes.append(f"{key} is not read by sglang {table.release} (not in its recorded environ.py): dropped")
            dropped.append(key)
            continue
        new_env[key] = value
    return Translation(out, new_env, notes, dropped)
