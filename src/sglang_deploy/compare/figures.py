"""The figures of benchmark results as compare and tune read them: the metrics of a level (METRICS) and of a whole
run (RESULT_METRICS), the levels' keys, what makes two results comparable, whether a deploy and its benchmarks are a
measurement, and a metric's value over hosts. Pure functions over bench.run_benchmark's result dicts."""

from __future__ import annotations

import math

from . import gate

# metric -> (key of a benchmark level, statistic or None, default goal)
METRICS = {
    "output_tok_s": ("output_throughput_tok_s", None, "max"),
    "decode_tok_s": ("decode_tok_s_per_request", "mean", "max"),
    "ttft_p50_ms": ("ttft_ms", "p50", "min"),
    "ttft_p99_ms": ("ttft_ms", "p99", "min"),
    "tpot_p50_ms": ("tpot_ms", "p50", "min"),
    "tpot_p99_ms": ("tpot_ms", "p99", "min"),
    "itl_p50_ms": ("itl_ms", "p50", "min"),
    "e2e_p50_ms": ("e2e_ms", "p50", "min"),
    "e2e_p99_ms": ("e2e_ms", "p99", "min"),
    "goodput_req_s": ("goodput_req_s", None, "max"),
}
# metric -> (key of the benchmark result, its field, default goal): one value per run, not per level.
RESULT_METRICS = {"sla_rate_req_s": ("sla_search", "best_rate", "max")}
SLA_LEVEL = "sla"  # the level key of RESULT_METRICS
TRACE_LEVEL = "trace"  # the key of a trace's replay (workload mode trace: one level, whatever its cap)


# What makes two benchmark results comparable: the same value of each of these in their `workload` (what the
# benchmark did: the dataset and its sha256, the lengths, how recorded answers were counted...). compare ranks only
# such results; tune does not rank a run whose result differs from the first of its stage.
COMPARABLE = (
    "dataset_name",
    "dataset_sha256",
    "seed",
    "input_len",
    "output_len",
    "random_range_ratio",
    "trace_time_scale",
    "trace_loops",
    "forced_length",
    "mode",
    "request_rates",
    "arrivals",
    "max_concurrency",
    "slo",
    "requests_per_level",
    "answer_lengths",  # how recorded answers' lengths were counted: the server's /v1/tokenize, or words x a ratio
)


def comparable(result: dict) -> dict:
    """The COMPARABLE settings of a benchmark result's workload."""
    workload = result.get("workload") or {}
    return {k: workload.get(k) for k in COMPARABLE}


def first_difference(workloads: list) -> str | None:
    """The first COMPARABLE setting in which one of ``workloads`` (comparable()'s) differs from the first one;
    None when they are comparable."""
    first = workloads[0] if workloads else {}
    return next((k for k in COMPARABLE for w in workloads if w.get(k) != first.get(k)), None)


def level_key(concurrency: int | None, rate: float | None) -> str:
    """The key of a benchmark level: its concurrency for a closed-loop level (as before request rates), else
    rate=R (R requests per second, inf: all at once without a cap)."""
    if rate is None or math.isinf(rate):
        return str(concurrency) if concurrency else "rate=inf"
    return f"rate={rate:g}"


def result_level_key(result: dict, level: dict) -> str:
    """The key of a level of a benchmark result: TRACE_LEVEL for a trace's replay, else level_key's."""
    if (result.get("workload") or {}).get("mode") == "trace":
        return TRACE_LEVEL
    return level_key(level.get("concurrency"), level.get("request_rate"))


def level_text(key: str) -> str:
    """A level key (level_key, SLA_LEVEL, TRACE_LEVEL) as reports name it: c=8, rate=2, the SLA search, the trace."""
    key = str(key)
    names = {SLA_LEVEL: "the SLA search", TRACE_LEVEL: "the trace"}
    return names.get(key) or (f"c={key}" if key.isdigit() else key)


def level_metrics(result: dict) -> dict:
    """level key (result_level_key: a closed-loop level's concurrency, rate=R, TRACE_LEVEL) ->
    {metric: value} from a benchmark result (bench.run_benchmark's dict); with an SLA search also SLA_LEVEL ->
    {sla_rate_req_s: its highest rate meeting every SLO, 0.0 when even its lowest rate broke one}."""
    out = {}
    for level in result.get("levels") or []:
        row = {"completed": level.get("completed"), "requests": level.get("requests")}
        for metric, (key, stat, _unused) in METRICS.items():
            value = level.get(key)
            if stat is not None:
                value = value.get(stat) if isinstance(value, dict) else None
            row[metric] = value
        out.setdefault(result_level_key(result, level), row)
    for metric, (key, field, _unused) in RESULT_METRICS.items():
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
    """Why a deploy (``ok``: True when it succeeded, else False or why not: compare.gate.deployed) and its
    benchmarks (host -> bench result) are no measurement, None when they are one: the deploy failed, no benchmark, a
    server that does not answer right (its quality gate failed in report mode), or requests without an answer (at ``level``, a level key, where
    SLA_LEVEL is every probe of the SLA search; None: at any level). tune records such a run FAILED, compare does
    not rank it: the one rule of both."""
    if ok is not True:
        return ok if isinstance(ok, str) and ok else "the deploy failed"
    if not benchmarks:
        return "no benchmark"
    wrong = gate.problem({host: gate.of_result(res) for host, res in benchmarks.items()})
    if wrong:
        return wrong
    failed = {}
    for host, res in sorted(benchmarks.items()):
        n = sum(
            unanswered(lv)
            for lv in res.get("levels") or []
            if level in (None, SLA_LEVEL) or result_level_key(res, lv) == str(level)
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
