"""A host's benchmark result checked as it is read, before compare or tune read a figure of it (figures.py and
compare_report read results unchecked): a result that is not sound is dropped with the reason, the others kept."""

from __future__ import annotations

import json
import math

from sglang_deploy.compare.figures import METRICS

# Levels of one result: a sweep's concurrency levels or rates and an SLA search's probes (22 at most) fit many times;
# each level costs compare bootstrap verdicts (10,000 levels took 366 s).
MAX_LEVELS = 128
# The figures of a level compare and tune read: key -> the statistics read of it (None: the value itself), each None
# or a finite number >= 0.
STATS: dict = {"spec_accept_length": {"value"}}
for _key, _stat, _goal in METRICS.values():
    STATS.setdefault(_key, set()).add(_stat)


def _shown(value) -> str:
    return repr(value)[:40]


def number(value) -> bool:
    """A finite number >= 0 (not a bool; an int past 2**63, which float() cannot take, is none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 <= value < 2**63 if isinstance(value, int) else math.isfinite(value) and value >= 0


# What the controller writes of a host's result (roles/sglang_benchmark): a real one is a few hundred KB.
MAX_RESULT_BYTES = 16 << 20
MAX_RESULT_DEPTH = 16


def result_text(result) -> str:
    """A benchmark result as the controller writes it (indented JSON); ValueError when it is over MAX_RESULT_BYTES or
    nests deeper than MAX_RESULT_DEPTH: a host's answer is not written whatever its size (indentation multiplies a
    deep one)."""
    compact = json.dumps(result, separators=(",", ":"))
    if len(compact) > MAX_RESULT_BYTES:
        raise ValueError(f"the benchmark result is over {MAX_RESULT_BYTES} bytes: not written")
    if _depth(result) > MAX_RESULT_DEPTH:
        raise ValueError(f"the benchmark result nests deeper than {MAX_RESULT_DEPTH}: not written")
    return json.dumps(result, indent=1) + "\n"


def _depth(value, level: int = 0) -> int:
    if level > MAX_RESULT_DEPTH or not isinstance(value, (dict, list)):
        return level
    items = value.values() if isinstance(value, dict) else value
    return max((_depth(v, level + 1) for v in items), default=level + 1)


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _figure_problem(level: dict, key: str) -> str | None:
    """Why a figure of a level is unsound (STATS)."""
    value, stats = level.get(key), STATS[key]
    if value is None:
        return None
    if None in stats:
        return None if number(value) else f"{key} is {_shown(value)}, not a finite number >= 0"
    if not isinstance(value, dict):
        return f"{key} is {_shown(value)}, not a mapping of statistics"
    bad = next((s for s in sorted(stats) if value.get(s) is not None and not number(value[s])), None)
    return None if bad is None else f"{key}.{bad} is {_shown(value[bad])}, not a finite number >= 0"


def level_problem(level) -> str | None:
    """Why one level of a result is unsound, None when compare and tune can read it."""
    if not isinstance(level, dict):
        return f"a JSON {type(level).__name__}, not an object"
    concurrency = level.get("concurrency", "missing")
    if not (concurrency is None or (_count(concurrency) and concurrency >= 1)):
        return f"concurrency is {_shown(concurrency)}, not a whole number >= 1 or null"
    if level.get("request_rate") is not None and not (number(level["request_rate"]) and level["request_rate"] > 0):
        return f"request_rate is {_shown(level['request_rate'])}, not a finite number > 0 or null"
    requests, completed = level.get("requests"), level.get("completed")
    if not (_count(requests) and _count(completed) and completed <= requests):
        return f"requests and completed must be counts, completed <= requests, got {_shown(requests)} and {_shown(completed)}"
    if level.get("failed") is not None and not _count(level["failed"]):
        return f"failed is {_shown(level['failed'])}, not a count"
    if level.get("label") is not None and not isinstance(level["label"], str):
        return f"label is {_shown(level['label'])}, not a string"
    return next(filter(None, (_figure_problem(level, key) for key in STATS)), None)


def result_problem(result) -> str | None:
    """Why a host's benchmark result (bench.run_benchmark's dict) is unsound, None when it is sound."""
    if not isinstance(result, dict):
        return f"a JSON {type(result).__name__}, not a benchmark result (an object)"
    levels = result.get("levels")
    if levels is not None and not isinstance(levels, list):
        return f"levels is a JSON {type(levels).__name__}, not a list"
    if len(levels or ()) > MAX_LEVELS:
        return f"{len(levels)} levels, more than the {MAX_LEVELS} compare and tune read: benchmark fewer levels"
    for i, level in enumerate(levels or ()):
        why = level_problem(level)
        if why:
            return f"level {i + 1}: {why}"
    for key in ("workload", "context"):
        if result.get(key) is not None and not isinstance(result[key], dict):
            return f"{key} is a JSON {type(result[key]).__name__}, not an object"
    search = result.get("sla_search")
    if search is not None and not (
        isinstance(search, dict)
        and isinstance(search.get("probes") or [], list)
        and (search.get("best_rate") is None or number(search["best_rate"]))
    ):
        return f"sla_search is {_shown(search)}, not an SLA search (best_rate a finite number >= 0 or null, probes)"
    return None


def sound(results) -> tuple[dict, dict]:
    """(host -> result, host -> why its result was dropped) of a mapping host -> benchmark result (set_stats
    `sglang_benchmark`); a mapping that is none is one reason under the name '*'."""
    if results is None:
        return {}, {}
    if not isinstance(results, dict):
        return {}, {"*": f"the benchmark results are a JSON {type(results).__name__}, not an object by host"}
    kept, dropped = {}, {}
    for host, res in results.items():
        why = result_problem(res)
        if why:
            dropped[str(host)] = why
        else:
            kept[host] = res
    return kept, dropped
