"""The result store of a search: one JSON file per run key, written atomically as the run completes, so an
interrupted search resumes where it stopped and nothing measured runs twice; its search.json keeps the time the
search took over all its runs and what served before it began, until that is restored. And the figures of a
stored run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..host.bench.sweep import write_file
from .measures import METRICS, RESULT_METRICS, SLA_LEVEL, level_key, level_text
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
        return Path(write_file(json.dumps(doc, indent=2, default=str) + "\n", str(path), sync=True))

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


def level_metrics(result: dict) -> dict:
    """level key (measures.level_key: the concurrency of a closed-loop level, rate=R of a request-rate level) ->
    {metric: value} from a benchmark result (bench.run_benchmark's dict); with an SLA search also SLA_LEVEL ->
    {sla_rate_req_s: its highest rate meeting every SLO, 0.0 when even its lowest rate broke one}."""
    out = {}
    for level in result.get("levels") or []:
        row = {"completed": level.get("completed"), "requests": level.get("requests")}
        for metric, (key, stat, _) in METRICS.items():
            value = level.get(key)
            if stat is not None:
                value = value.get(stat) if isinstance(value, dict) else None
            row[metric] = value
        out.setdefault(level_key(level.get("concurrency"), level.get("request_rate")), row)
    for metric, (key, field, _) in RESULT_METRICS.items():
        part = result.get(key)
        if isinstance(part, dict) and part.get("probes"):
            value = part.get(field)
            if value is None and not result.get("stopped"):  # a search that stopped early found no 0
                value = 0.0
            out.setdefault(SLA_LEVEL, {})[metric] = value
    return out


def unanswered(level: dict) -> int:
    """Requests of a benchmark level without an answer: those that failed, or that it did not complete."""
    requests, completed = level.get("requests"), level.get("completed")
    short = requests - completed if isinstance(requests, int) and isinstance(completed, int) else 0
    return max(level.get("failed") or 0, short)


def measurement_problem(ok: bool, benchmarks: dict, level: str | None = None) -> str | None:
    """Why a deploy (``ok``: it succeeded) and its benchmarks (host -> bench result) are no measurement, None when
    they are one: the deploy failed, no benchmark, or requests without an answer (at ``level``, a level key, where
    SLA_LEVEL is every probe of the SLA search; None: at any level). tune records such a run FAILED, compare does
    not rank it: the one rule of both."""
    if not ok:
        return "the deploy failed"
    if not benchmarks:
        return "no benchmark"
    failed = {}
    for host, res in sorted(benchmarks.items()):
        n = sum(
            unanswered(lv)
            for lv in res.get("levels") or []
            if level in (None, SLA_LEVEL) or level_key(lv.get("concurrency"), lv.get("request_rate")) == str(level)
        )
        if n:
            failed[host] = n
    if not failed:
        return None
    where = "" if level is None else " in the SLA search" if level == SLA_LEVEL else f" at {level_text(level)}"
    return f"{sum(failed.values())} benchmark requests failed{where} (on {', '.join(failed)})"


def metric_value(record: dict, metric: str, level) -> float | None:
    """A metric of one run at a level (its key, or a concurrency): the mean over hosts (one host: its value)."""
    level = str(level)
    values = [
        m[level][metric]
        for m in (record.get("metrics") or {}).values()
        if level in m and m[level].get(metric) is not None
    ]
    return sum(values) / len(values) if values else None
