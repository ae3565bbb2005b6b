"""The host record: what the sglang_server role deployed on a host, kept as the local fact sglang_server
(/etc/ansible/facts.d/sglang_server.fact). Stdlib only; runs on hosts (the sglang_host_record module writes it).

One schema (FIELDS), one writer (update, through the module) and one reader (read: every field, None where the
record lacks it). Three events change it:
- asked: a run wrote the unit of ``profile`` (its rollback, if any, is the past);
- deployed: that profile passed the wait: it is the last good one, with the launch and the venv it ran on;
- rolled_back: ``profile`` failed and the last good profile serves again (``from``, ``to``, ``at``).
"""

from __future__ import annotations

import json
import os
import tempfile

PATH = "/etc/ansible/facts.d/sglang_server.fact"

# field -> what it holds
FIELDS = {
    "profile": "the profile of the installed unit",
    "asked": "the profile the last run asked for",
    "last_good_profile": "the last profile that passed the readiness wait",
    "rolled_back": "{from, to, at} when the profile asked for failed and the last good one serves again",
    "service": "the systemd unit of the server",
    "url": "where the running server listens",
    "sglang_version": "the SGLang release the launch was rendered for",
    "argv": "the launch's arguments",
    "emulated": "whether the lab's emulated server runs",
    "venv_link": "the stack's venv symlink the last good profile ran on ('' when it was none)",
    "venv_target": "where that symlink pointed",
}
EVENTS = ("asked", "deployed", "rolled_back")
# The fields each event takes from its caller.
EVENT_FIELDS = {
    "asked": ("profile", "service"),
    "deployed": ("profile", "service", "url", "sglang_version", "argv", "emulated", "venv_link", "venv_target"),
    "rolled_back": ("profile", "at"),
}


class RecordError(ValueError):
    """An event without a field it needs, or a rollback with no last good profile on record."""


def read(local: dict | None) -> dict:
    """The record among a host's local facts (ansible_local), every field present (None where unrecorded)."""
    return complete((local or {}).get("sglang_server"))


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
        return {**fields, "last_good_profile": values["profile"], "asked": values["profile"]}
    last_good = known.get("last_good_profile")
    if not last_good:
        raise RecordError("no last good profile is recorded on this host to roll back to")
    back = {"from": values["profile"], "to": last_good, "at": values["at"]}
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
