"""Promotion: the winner written as a profile into a group_vars file (comments and order kept), with a diff
that shows only the profiles' lines, secrets masked."""

from __future__ import annotations

import difflib
import io
import json
import re
from pathlib import Path
from typing import Any

from ..launch import profiles
from ..paths import GROUP_VARS
from ..host.files import check_dest, write_file
from ..secret_names import is_secret_name
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


def _round_trip():
    from ruamel.yaml import YAML

    ry = YAML()
    ry.preserve_quotes = True
    ry.width = 110
    ry.indent(mapping=2, sequence=4, offset=2)
    return ry


def default_target() -> Path:
    """Where the winner is promoted without --into: the file of the project's group_vars/all that defines
    sglang_profiles (profiles.profiles_file), else group_vars/all/profiles.yml, which promote_profile starts."""
    found = profiles.profiles_file()
    return GROUP_VARS / "all" / "profiles.yml" if found == profiles.PROFILES_FILE else found


def check_promotion(name: str | None, path: str | Path) -> tuple[str, Any]:
    """(text, round-trip document) of the group_vars file ``path`` ('' and an empty mapping when new), or
    SearchError naming the fix when the winner cannot be promoted as ``name`` into it: a bad profile name (../x),
    a folder, a link, a file that is not regular, not YAML, or a sglang_profiles that is not a mapping."""
    from ruamel.yaml.comments import CommentedMap

    if not isinstance(name, str) or not profiles.NAME_RE.match(name):
        raise SearchError(f"profile name {name!r}: letters, digits, '_', '.', '-' only (it names a profile)")
    try:
        check_dest(str(path))
    except ValueError as exc:
        raise SearchError(f"--into: {exc}") from exc
    path = Path(path)
    try:
        old = profiles.read_text(path) if path.exists() else ""
        doc = _round_trip().load(old) if old.strip() else CommentedMap()
    except profiles.ProfileError as exc:
        raise SearchError(str(exc)) from exc
    except Exception as exc:  # ruamel raises several parser error types
        raise SearchError(f"{path} is not valid YAML: {exc}") from exc
    if not hasattr(doc, "keys"):
        raise SearchError(f"{path}: expected a mapping of variables (a group_vars file)")
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
    buf = io.StringIO()
    if not old:
        buf.write("---\n")
    _round_trip().dump(doc, buf)
    new = buf.getvalue()
    if old.startswith("---") and not new.startswith("---"):
        new = "---\n" + new
    diff = started + _promotion_diff(path, old, new)
    # The file keeps its mode: group_vars may hold secrets in a 0600 file.
    write_file(new, str(path), mode=path.stat().st_mode & 0o7777 if path.exists() else 0o644)
    return diff, new


_TOP_KEY = re.compile(r"""(?:"([^"]*)"|'([^']*)'|([^\s#'"-][^:#]*?))\s*:(?:\s|$)""")


def _variable_of_each_line(lines: list) -> list:
    """The top-level variable each line of a group_vars file belongs to (None before the first)."""
    out, current = [], None
    for line in lines:
        m = _TOP_KEY.match(line)
        if m:
            current = next(g for g in m.groups() if g is not None)
        elif line[:1] not in ("", " ", "\t", "\n", "\r"):  # a comment, '---' or '...' in column 0 ends it
            current = None
        out.append(current)
    return out


def _promotion_diff(path: Path, old: str, new: str) -> str:
    """The changed lines (no context) of sglang_profiles, secrets masked; lines of other variables that the rewrite
    changed are counted, never shown (a private key block or a folded password's tail would be printed)."""
    a, b = old.splitlines(True), new.splitlines(True)
    owner_a, owner_b = _variable_of_each_line(a), _variable_of_each_line(b)
    hunks, hidden = [], 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        rows = [("-", a[i], owner_a[i]) for i in range(i1, i2)] + [("+", b[j], owner_b[j]) for j in range(j1, j2)]
        shown = [sign + line.rstrip("\r\n") + "\n" for sign, line, var in rows if var in (None, profiles.PROFILES_VAR)]
        hidden += len(rows) - len(shown)
        if shown:
            hunks.append(f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@\n")
            hunks += [_mask_secret_line(line) for line in shown]
    if hidden:
        hunks.append(f"({hidden} changed lines of other variables not shown)\n")
    return "".join([f"--- {path} (before)\n", f"+++ {path} (after)\n", *hunks]) if hunks else ""


_YAML_KEY_LINE = re.compile(r"([ +-]\s*(?:-\s+)?)([^\s:#][^:#]*?)(\s*:\s+)(\S.*?)(\r?\n?)$")


def _mask_secret_line(line: str) -> str:
    """A diff line `key: value` with the value masked when the key names a secret (the diff is printed)."""
    m = _YAML_KEY_LINE.match(line)
    if m and is_secret_name(m.group(2).strip("'\"")):
        return f"{m.group(1)}{m.group(2)}{m.group(3)}***{m.group(5)}"
    return line
