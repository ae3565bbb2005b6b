"""The result store of a search: one JSON file per run key, written atomically as the run completes, so an
interrupted search resumes where it stopped and nothing measured runs twice; its search.json keeps the time the
search took over all its runs and what served before it began, until that is restored. A stored run's figures
are read by compare/figures.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..compare.validate import number
from ansible_collections.sglang.deploy.plugins.module_utils.files import write_file
from ..secret_names import mask_shown
from .searchfile import SearchError

OK, FAILED = "ok", "failed"  # a run record's status


def _figures(value) -> bool:
    """host -> level -> figure -> a finite number >= 0 or null, as candidate_fields stores a run's metrics."""
    levels = [lv for host in value.values() if isinstance(host, dict) for lv in host.values()]
    return (
        all(isinstance(host, dict) for host in value.values())
        and all(isinstance(lv, dict) for lv in levels)
        and all(v is None or number(v) for lv in levels for v in lv.values())
    )


# The fields of a stored run that the search reads back: name -> (required, check, what it must be).
RECORD_FIELDS = {
    "candidate_key": (True, lambda v: isinstance(v, str), "a string"),
    "candidate": (True, lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "stage": (True, lambda v: v in ("short", "full"), "short or full"),
    "status": (True, lambda v: v in (OK, FAILED), f"{OK} or {FAILED}"),
    "kind": (False, lambda v: isinstance(v, str), "a string"),
    "error": (False, lambda v: isinstance(v, str), "a string"),
    "elapsed_at_s": (False, number, "a finite number >= 0"),
    "emulated": (False, lambda v: isinstance(v, bool), "true or false"),
    "metrics": (False, lambda v: isinstance(v, dict) and _figures(v), "host -> level -> figure -> number or null"),
    "measured": (
        False,
        lambda v: isinstance(v, dict) and all(isinstance(m, dict) for m in v.values()),
        "host -> object",
    ),
}


_MISSING = object()


def _refused(path: Path, field: str, value, wants: str) -> SearchError:
    got = "missing" if value is _MISSING else f"{json.dumps(value, default=str)[:40]}, not {wants}"
    return SearchError(f"{path}: {field} is {got}: remove or fix it")


class Store:
    """One JSON file per run key under a folder; each written atomically (bench's writer: private temp file, fsync,
    rename). Its folders must not be links: a report or record would land wherever a planted one points."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    def _path(self, key: str) -> Path:
        return self.root / "runs" / f"{key}.json"

    def check(self) -> None:
        """SearchError naming the fix when the store's folders cannot be written safely."""
        for folder in (self.root, self.root / "runs", self.report_dir):
            if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
                raise SearchError(
                    f"{folder} is a link or not a folder: the results are written only into real folders; remove "
                    "it or give --out a new folder"
                )

    def get(self, key: str) -> dict | None:
        """The stored run of ``key``, checked (RECORD_FIELDS: SearchError naming the file and the field); None when
        there is none or it is no JSON (measured again)."""
        path = self._path(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # a damaged record is measured again
        if not isinstance(record, dict):
            raise _refused(path, "the record", record, "an object")
        for field, (required, check, wants) in RECORD_FIELDS.items():
            value = record.get(field, _MISSING)
            if required if value is _MISSING or value is None else not check(value):
                raise _refused(path, field, value, wants)
        return record

    def put(self, key: str, record: dict) -> Path:
        return self._write(self._path(key), record)

    def _write(self, path: Path, doc: dict) -> Path:
        self.check()
        return Path(write_file(mask_shown(json.dumps(doc, indent=2, default=str) + "\n"), str(path), sync=True))

    def meta(self) -> dict:
        """The search's own record (search.json): spent_s, the seconds every run of it took together, and before,
        what each host served when it began (kept until restored)."""
        path = self.root / "search.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        doc = doc if isinstance(doc, dict) else {}
        if doc.get("spent_s") is not None and not number(doc["spent_s"]):
            raise _refused(path, "spent_s", doc["spent_s"], "a finite number >= 0")
        return doc

    def update_meta(self, **fields) -> None:
        """Set these fields of search.json (None removes one)."""
        doc = {k: v for k, v in {**self.meta(), **fields}.items() if v is not None}
        self._write(self.root / "search.json", doc)

    def records(self) -> list:
        return [r for r in (self.get(p.stem) for p in sorted((self.root / "runs").glob("*.json"))) if r]
