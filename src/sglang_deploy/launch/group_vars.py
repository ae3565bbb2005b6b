"""A group_vars file rewritten with its comments and order kept (ruamel round trip), and the diff of the variable
that changed: lines of other variables are counted, never shown (a private key block or a folded password's tail),
and secret values are masked. Used by tune's promotion (sglang_profiles) and the stack canary (sglang_stack_bundle).
"""

from __future__ import annotations

import difflib
import io
import re
from pathlib import Path
from typing import Any

from ansible_collections.sglang.deploy.plugins.module_utils.files import check_dest, write_file
from ..secret_names import is_secret_name
from . import profiles


class GroupVarsError(ValueError):
    """A group_vars file that cannot be rewritten: names the file and what is wrong."""


def round_trip():
    from ruamel.yaml import YAML

    ry = YAML()
    ry.preserve_quotes = True
    ry.width = 110
    ry.indent(mapping=2, sequence=4, offset=2)
    return ry


def load(path: str | Path) -> tuple[str, Any]:
    """(text, round-trip document) of the group_vars file ``path`` ('' and an empty mapping when new), or
    GroupVarsError: a folder, a link, a file that is not regular, not YAML or not a mapping."""
    from ruamel.yaml.comments import CommentedMap

    try:
        check_dest(str(path))
    except ValueError as exc:
        raise GroupVarsError(str(exc)) from exc
    path = Path(path)
    try:
        old = profiles.read_text(path) if path.exists() else ""
        doc = round_trip().load(old) if old.strip() else CommentedMap()
    except profiles.ProfileError as exc:
        raise GroupVarsError(str(exc)) from exc
    except Exception as exc:  # ruamel raises several parser error types
        raise GroupVarsError(f"{path} is not valid YAML: {exc}") from exc
    if not hasattr(doc, "keys"):
        raise GroupVarsError(f"{path}: expected a mapping of variables (a group_vars file)")
    return old, doc


def write(path: str | Path, old: str, doc: Any) -> str:
    """Write ``doc`` to ``path`` (the file keeps its mode: group_vars may hold secrets in a 0600 file); returns the
    new text."""
    path = Path(path)
    buf = io.StringIO()
    if not old:
        buf.write("---\n")
    round_trip().dump(doc, buf)
    new = buf.getvalue()
    if old.startswith("---") and not new.startswith("---"):
        new = "---\n" + new
    write_file(new, str(path), mode=path.stat().st_mode & 0o7777 if path.exists() else 0o644)
    return new


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


def diff(path: Path, old: str, new: str, variable: str) -> str:
    """The changed lines (no context) of ``variable``, secrets masked; changed lines of other variables counted."""
    a, b = old.splitlines(True), new.splitlines(True)
    owner_a, owner_b = _variable_of_each_line(a), _variable_of_each_line(b)
    hunks, hidden = [], 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        rows = [("-", a[i], owner_a[i]) for i in range(i1, i2)] + [("+", b[j], owner_b[j]) for j in range(j1, j2)]
        shown = [sign + line.rstrip("\r\n") + "\n" for sign, line, var in rows if var in (None, variable)]
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


def set_variable(path: str | Path, name: str, value: str) -> str:
    """Set the top-level variable ``name`` to ``value`` in the group_vars file ``path`` (made when missing);
    returns the diff of that variable ('' when it already held it)."""
    old, doc = load(path)
    if doc.get(name) == value:
        return ""
    doc[name] = value
    return diff(Path(path), old, write(path, old, doc), name)
