"""The result store of a search: one JSON file per run key, written atomically as the run completes, so an
interrupted search resumes where it stopped and nothing measured runs twice; its search.json keeps the time the
search took over all its runs and what served before it began, until that is restored. A stored run's figures
are read by compare/figures.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..host.files import write_file
from ..secret_names import mask_shown
from .searchfile import SearchError

OK, FAILED = "ok", "failed"  # a run record's status


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
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError):
            return None  # a damaged record is measured again

    def put(self, key: str, record: dict) -> Path:
        return self._write(self._path(key), record)

    def _write(self, path: Path, doc: dict) -> Path:
        self.check()
        return Path(write_file(mask_shown(json.dumps(doc, indent=2, default=str) + "\n"), str(path), sync=True))

    def meta(self) -> dict:
        """The search's own record (search.json): spent_s, the seconds every run of it took together, and before,
        what each host served when it began (kept until restored)."""
        try:
            doc = json.loads((self.root / "search.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def update_meta(self, **fields) -> None:
        """Set these fields of search.json (None removes one)."""
        doc = {k: v for k, v in {**self.meta(), **fields}.items() if v is not None}
        self._write(self.root / "search.json", doc)

    def records(self) -> list:
        return [r for r in (self.get(p.stem) for p in sorted((self.root / "runs").glob("*.json"))) if r]
