"""The host record: what the sglang_server role deployed on a host, kept as the local fact sglang_server
(/etc/ansible/facts.d/sglang_server.fact). Stdlib only; runs on hosts (the sglang_host_record module writes it).

One schema (FIELDS, each field's type in check), one writer (update, through the module) and one reader (read: every
field, None where the record lacks it). A host may be hostile: what it holds is data, checked before anyone uses it,
and a record that breaks the schema is refused naming the field (RecordError), never passed on. Three events change it:
- asked: a run wrote the unit of ``profile`` (its rollback, if any, is the past);
- deployed: that profile passed the wait: it is the last good one, with the launch and the venv it ran on;
- rolled_back: ``profile`` failed and the last good profile serves again (``from``, ``to``, ``at``).
The stall watchdog (host/watchdog.py) keeps its last restart in the field ``watchdog`` (with_watchdog); a deploy keeps it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile

from .text import CONTROL, escaped

PATH = "/etc/ansible/facts.d/sglang_server.fact"

# field -> what it holds
FIELDS = {
    "profile": "the profile of the installed unit",
    "asked": "the profile the last run asked for",
    "last_good_profile": "the last profile that passed the readiness wait",
    "rolled_back": "{from, to, at, why} when the profile asked for failed and the last good one serves again",
    "service": "the systemd unit of the server",
    "url": "where the running server listens",
    "sglang_version": "the SGLang release the launch was rendered for",
    "argv": "the launch's arguments",
    "emulated": "whether the lab's emulated server runs",
    "venv_link": "the stack's venv symlink the last good profile ran on ('' when it was none)",
    "venv_target": "where that symlink pointed",
    "accuracy_warnings": "SGLang's warnings at the start of the last good profile that its output may be wrong",
    "stack": "the stack the last good profile ran on, as the quality gate's store names it (bundle-id)",
    "watchdog": "{at, reason, excerpt, restarts, failures, rate_limited}: the stall watchdog's last restart or refusal",
}
# Profile names: the profile-name rule (launch.profiles uses this one).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
# A systemd service name, never an option (it goes to systemctl's argv).
SERVICE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9@_.:-]*\Z")
MAX_TEXT = 4096  # characters of one text field (no control or bidirectional character: text.CONTROL)
MAX_ARGV = 1024
# The watchdog's entry: the journal excerpt's lines (escaped, each cut to MAX_LINE) and its counts.
MAX_EXCERPT_LINES = 50
MAX_LINE = 512
WATCHDOG_COUNTS = ("restarts", "failures")
NAME_FIELDS = ("profile", "asked", "last_good_profile")
EVENTS = ("asked", "deployed", "rolled_back")
# The fields each event takes from its caller.
EVENT_FIELDS = {
    "asked": ("profile", "service"),
    "deployed": ("profile", "service", "url", "sglang_version", "argv", "emulated", "venv_link", "venv_target"),
    "rolled_back": ("profile", "at"),
}


class RecordError(ValueError):
    """An event without a field it needs, a rollback with no last good profile on record, or a record that breaks
    the schema."""


def read(local: dict | None) -> dict:
    """The record among a host's local facts (ansible_local), every field present (None where unrecorded), checked
    (RecordError naming the field where it breaks the schema)."""
    if local is None:
        return complete(None)
    if not isinstance(local, dict):
        raise RecordError(f"the local facts are a {type(local).__name__}, not a mapping")
    try:
        return complete(check(local.get("sglang_server")))
    except RecordError as exc:
        raise RecordError(f"{PATH}: {exc}") from None


def check(record: object) -> dict | None:
    """``record`` when it is None or a mapping whose schema fields hold what the schema says; else RecordError naming
    the field and the fix. Ansible gives a fact file that is not JSON as a string: that is refused here too."""
    if record is None:
        return None
    if not isinstance(record, dict):
        raise RecordError(f"not a JSON object (read: {_shown(record)}): remove it, the next deploy writes it anew")
    for name in FIELDS:
        problem = _field_problem(name, record.get(name))
        if problem:
            raise RecordError(f"field {name!r} {problem}: remove the file, the next deploy writes it anew")
    return record


def _field_problem(name: str, value: object) -> str | None:
    if value is None:
        return None
    if name in NAME_FIELDS:
        ok = isinstance(value, str) and NAME_RE.match(value)
        return None if ok else f"is {_shown(value)}, not a profile name (letters, digits, '.', '_', '-')"
    if name == "service":
        ok = isinstance(value, str) and len(value) <= 256 and SERVICE_RE.match(value)
        return None if ok else f"is {_shown(value)}, not a systemd service name"
    if name == "emulated":
        return None if isinstance(value, bool) else f"is {_shown(value)}, not true or false"
    if name in ("argv", "accuracy_warnings"):
        ok = isinstance(value, list) and len(value) <= MAX_ARGV and all(_text(v) for v in value)
        return None if ok else f"is not a list of at most {MAX_ARGV} printable strings"
    if name == "rolled_back":
        return _rolled_back_problem(value)
    if name == "watchdog":
        return _watchdog_problem(value)
    return None if _text(value) else f"is {_shown(value)}, not printable text of at most {MAX_TEXT} characters"


def _rolled_back_problem(value: object) -> str | None:
    if not isinstance(value, dict):
        return f"is {_shown(value)}, not a mapping of from, to and at"
    names = [value.get("from"), value.get("to")]
    if not all(isinstance(n, str) and NAME_RE.match(n) for n in names) or not _text(value.get("at")):
        return "needs 'from' and 'to' profile names and 'at' a time"
    return None if value.get("why") is None or _text(value["why"]) else "has a 'why' that is not printable text"


def _watchdog_problem(value: object) -> str | None:
    if not isinstance(value, dict) or not _text(value.get("at")) or not _text(value.get("reason")):
        return f"is {_shown(value)}, not a mapping with 'at' a time and 'reason' text"
    excerpt = value.get("excerpt")
    lines_ok = isinstance(excerpt, list) and len(excerpt) <= MAX_EXCERPT_LINES
    if not lines_ok or not all(_text(line) and len(line) <= MAX_LINE for line in excerpt):
        return f"has an 'excerpt' that is not a list of at most {MAX_EXCERPT_LINES} printable lines"
    if not all(isinstance(value.get(k), int) and not isinstance(value[k], bool) for k in WATCHDOG_COUNTS):
        return "needs whole numbers 'restarts' and 'failures'"
    return None if value.get("rate_limited") is None or _text(value["rate_limited"]) else "has a bad 'rate_limited'"


def with_watchdog(record: dict, entry: dict) -> dict:
    """The record with the watchdog's ``entry`` (at, reason, excerpt: journal lines, restarts, failures,
    rate_limited), bounded and escaped as the schema wants; RecordError when ``entry`` breaks it still."""
    lines = [escaped(line)[:MAX_LINE] for line in entry.get("excerpt") or []][-MAX_EXCERPT_LINES:]
    limited = entry.get("rate_limited")
    field = {
        "at": str(entry["at"]),
        "reason": printable(entry["reason"]),
        "excerpt": lines,
        "restarts": entry.get("restarts", 0),
        "failures": entry.get("failures", 0),
        "rate_limited": None if limited is None else printable(limited),
    }
    problem = _watchdog_problem(field)
    if problem:
        raise RecordError(f"field 'watchdog' {problem}")
    return {**{k: v for k, v in record.items() if k in FIELDS}, "watchdog": field}


def printable(text: str) -> str:
    """``text`` on one line, without control or bidirectional characters, at most MAX_TEXT characters."""
    return re.sub(r"\s+", " ", CONTROL.sub(" ", str(text))).strip()[:MAX_TEXT]


def _text(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT and not CONTROL.search(value)


def _shown(value: object) -> str:
    """A bounded, escaped view of a value (a hostile record's text must not reach a terminal raw)."""
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."


def complete(record: dict | None) -> dict:
    """``record`` with every field of the schema (None where it has none), and only those."""
    return {name: (record or {}).get(name) for name in FIELDS}


def load(path: str = PATH) -> dict:
    """The record on this host as stored; {} where there is none or it is not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def update(record: dict, event: str, values: dict) -> dict:
    """The record after ``event`` with ``values`` (EVENT_FIELDS[event]); only schema fields are kept."""
    missing = [name for name in EVENT_FIELDS.get(event, ()) if values.get(name) is None]
    if event not in EVENTS or missing:
        raise RecordError(f"event {event!r} needs {', '.join(missing)}" if missing else f"unknown event {event!r}")
    known = {k: v for k, v in record.items() if k in FIELDS}
    if event == "asked":
        known.pop("rolled_back", None)
        return {**known, "profile": values["profile"], "service": values["service"], "asked": values["profile"]}
    if event == "deployed":
        fields = {name: values[name] for name in EVENT_FIELDS["deployed"]}
        fields["accuracy_warnings"] = [printable(w) for w in values.get("accuracy_warnings") or []][:MAX_ARGV]
        if values.get("stack"):
            fields["stack"] = printable(values["stack"])
        kept = {"watchdog": known["watchdog"]} if known.get("watchdog") else {}
        return {**kept, **fields, "last_good_profile": values["profile"], "asked": values["profile"]}
    last_good = known.get("last_good_profile")
    if not last_good:
        raise RecordError("no last good profile is recorded on this host to roll back to")
    back = {"from": values["profile"], "to": last_good, "at": values["at"]}
    if values.get("why"):
        back["why"] = printable(values["why"])
    return {**known, "profile": last_good, "rolled_back": back}


def write(record: dict, path: str = PATH) -> None:
    """Replace the record at ``path`` in one step (a reader never sees half of it), mode 0644."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".sglang_server.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=4, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
