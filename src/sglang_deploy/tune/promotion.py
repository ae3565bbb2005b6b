"""Promotion: the winner written as a profile into a group_vars file (comments and order kept), with a diff
that shows only the profiles' lines, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..launch import group_vars, profiles
from ..paths import GROUP_VARS
from .outcome import Outcome
from .planning import Planned
from .searchfile import Search, SearchError


def limits_broken(outcome: Outcome, p: Planned) -> list:
    """The limits of the search that candidate ``p`` broke with the full workload (the rankings' texts)."""
    rows = outcome.rankings.get(outcome.search.objectives[0].name, [])
    return next((r["limits_broken"] for r in rows if r["key"] == p.key), [])


def promotion_body(
    search: Search, p: Planned, outcome: Outcome | None = None, base_profiles: dict | None = None
) -> dict:
    """The winner as a profile: extends the base profile (a named one) with the candidate's own args/env. A null
    (remove the key) is kept only where the base, resolved in ``base_profiles``, sets that key."""
    obj = search.objectives[0]
    desc = f"Found by `sglang-deploy tune` (search {search.name}): {p.candidate.label}."
    if outcome is not None:
        row = next((r for r in outcome.rankings.get(obj.name, []) if r["key"] == p.key), None)
        if row:
            desc += f" {obj.name}: median {row['median']:.1f} over {row['n']} run(s)"
            desc += " (synthetic, lab emulator)." if outcome.emulated else "."
    if isinstance(search.base, str):
        base = profiles.resolve(search.base, base_profiles) if base_profiles else None
        body: dict = {"description": desc, "extends": search.base}
        for part, own in (("args", p.candidate.args), ("env", p.candidate.env)):
            inherited = getattr(base, part) if base else None
            kept = {k: v for k, v in own.items() if v is not None or inherited is None or k in inherited}
            if kept:
                body[part] = kept
        return body
    return {"description": desc, "args": p.body["args"], "env": p.body["env"]}


def default_target() -> Path:
    """Where the winner is promoted without --into: the file of the project's group_vars/all that defines
    sglang_profiles (profiles.profiles_file), else group_vars/all/profiles.yml, which promote_profile starts."""
    found = profiles.profiles_file()
    return GROUP_VARS / "all" / "profiles.yml" if found == profiles.PROFILES_FILE else found


def check_promotion(name: str | None, path: str | Path) -> tuple[str, Any]:
    """(text, round-trip document) of the group_vars file ``path`` ('' and an empty mapping when new), or
    SearchError naming the fix when the winner cannot be promoted as ``name`` into it: a bad profile name (../x),
    a folder, a link, a file that is not regular, not YAML, or a sglang_profiles that is not a mapping."""
    if not isinstance(name, str) or not profiles.NAME_RE.match(name):
        raise SearchError(f"profile name {name!r}: letters, digits, '_', '.', '-' only (it names a profile)")
    try:
        old, doc = group_vars.load(path)
    except group_vars.GroupVarsError as exc:
        raise SearchError(f"--into: {exc}") from exc
    if not hasattr(doc.get(profiles.PROFILES_VAR, {}), "keys"):
        raise SearchError(f"{path}: {profiles.PROFILES_VAR} must be a mapping")
    return old, doc


def promote_profile(path: str | Path, name: str, body: dict, host_profiles: dict | None = None) -> tuple[str, str]:
    """Write profile ``name`` into sglang_profiles of the YAML file ``path``; returns (diff, new text).

    Comments and order are kept (ruamel round trip). A file without sglang_profiles gets a copy of the profiles
    the hosts use now (``host_profiles``; unknown: the sglang role's defaults) plus the new one, and the diff says
    so: Ansible replaces a whole variable, so a mapping with only the new profile would hide the others.
    """
    path = Path(path)
    old, doc = check_promotion(name, path)
    started = ""
    if profiles.PROFILES_VAR not in doc:
        defaults = profiles.load_profiles(profiles.PROFILES_FILE)
        seed = host_profiles or defaults
        doc[profiles.PROFILES_VAR] = json.loads(json.dumps(seed))
        whose = "the sglang role's default profiles" if seed == defaults else "the profiles the hosts use"
        started = (
            f"({path} had no {profiles.PROFILES_VAR}: it starts with {whose}, {', '.join(seed)}, which the new"
            " variable would otherwise hide, Ansible replacing a variable whole)\n"
        )
    profiles_map = doc[profiles.PROFILES_VAR]
    base = body.get("extends")
    if base is not None and base not in profiles_map:
        raise SearchError(f"{path}: the winner extends {base!r}, which this file's {profiles.PROFILES_VAR} lacks")
    profiles_map[name] = json.loads(json.dumps(body))
    try:
        profiles.resolve(name, json.loads(json.dumps(profiles_map)))
    except profiles.ProfileError as exc:
        raise SearchError(f"{path}: the promoted profile does not resolve: {exc}") from exc
    new = group_vars.write(path, old, doc)
    diff = started + group_vars.diff(path, old, new, profiles.PROFILES_VAR)
    return diff, new
