"""What a search measures: its workload (the benchmark's settings, by the engine's names) and the objectives and
limits over a result's figures (compare/figures.py: the metrics and the levels they are read at)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, make_dataclass
from typing import Any

from ..compare import bench_vars
from ..compare.figures import RESULT_METRICS, SLA_LEVEL, TRACE_LEVEL, level_key
from ansible_collections.sglang.deploy.plugins.module_utils import bench

# A search file's workload: the benchmark's settings, by the engine's names (the table bench.WORKLOAD).
WORKLOAD_KEYS = set(bench.WORKLOAD)
CLOSED_LOOP_KEYS = ("concurrency", "input_len", "output_len", "requests", "warmup")


def _where_text(metric: str, concurrency: int | None, rate: float | None, trace: bool = False) -> str:
    if metric in RESULT_METRICS:
        return f"{metric} (SLA search)"
    if trace:
        return f"{metric} @ trace"
    if rate is not None:
        return f"{metric} @ {rate:g} req/s"
    return f"{metric} @ c={concurrency}"


def _level(measure) -> str:
    """The level key an Objective or a Limit reads (figures.result_level_key's)."""
    if measure.metric in RESULT_METRICS:
        return SLA_LEVEL
    return TRACE_LEVEL if measure.trace else level_key(measure.concurrency, measure.rate)


@dataclass(frozen=True)
class Objective:
    metric: str
    concurrency: int | None
    goal: str  # max or min
    rate: float | None = None  # a request-rate level instead of a concurrency level
    trace: bool = False  # the trace's replay (TRACE_LEVEL) instead of either

    @property
    def level(self) -> str:
        return _level(self)

    @property
    def name(self) -> str:
        return _where_text(self.metric, self.concurrency, self.rate, self.trace)


@dataclass(frozen=True)
class Limit:
    metric: str
    concurrency: int | None
    max: float | None = None
    min: float | None = None
    rate: float | None = None
    trace: bool = False

    @property
    def level(self) -> str:
        return _level(self)

    @property
    def text(self) -> str:
        bound = f"<= {self.max:g}" if self.max is not None else f">= {self.min:g}"
        return f"{_where_text(self.metric, self.concurrency, self.rate, self.trace)} {bound}"

    def holds(self, value: float | None) -> bool:
        if value is None:
            return False
        return (self.max is None or value <= self.max) and (self.min is None or value >= self.min)


class _Workload:
    """The benchmark of every candidate: one field per setting of the table bench.WORKLOAD (its default, a list as a
    tuple; requests 0 = the benchmark module's default, as a search file and the role write it), and dataset_sha256
    (of the dataset file when the search file was read: part of the run key). A dataset_path is on the controller:
    the role copies it to each host."""

    def settings(self) -> dict:
        """The engine's settings (requests 0: the module's default)."""
        return engine_settings(asdict(self))

    def key_fields(self) -> dict:
        """What the run key hashes: the settings of a closed-loop workload as before the other settings existed, and
        every other setting that is not its default (so stored runs of a search from then still resume), the
        dataset file's sha256 among them (a changed file is measured again) but not its path: the same file from
        another folder or clone is the same workload. A workload that draws arrivals also names how (bench.ARRIVALS):
        runs stored before arrivals were drawn as bench_serving draws them are measured again."""
        values, defaults = asdict(self), asdict(Workload())
        fields = {k: v for k, v in values.items() if k in CLOSED_LOOP_KEYS or v != defaults[k]}
        if self.dataset_sha256:
            fields.pop("dataset_path", None)
        drawn = bench.arrivals(self.request_rate or (), self.sla_search)
        if drawn:
            fields["arrivals"] = drawn
        return fields

    def extravars(self) -> dict:
        """The sglang_benchmark role's variables for this workload."""
        return bench_vars.role_vars(self.settings())

    def levels(self) -> list:
        """The keys of the levels every run measures (level_key; TRACE_LEVEL for a trace), and SLA_LEVEL with an SLA
        search."""
        _, fixed = bench.check_settings(**self.settings())
        if self.dataset_name == "trace":
            return [TRACE_LEVEL]
        keys = [level_key(lv.concurrency, None if math.isinf(lv.rate) else lv.rate) for lv in fixed]
        return keys + ([SLA_LEVEL] if self.sla_search else [])

    @property
    def peak_concurrency(self) -> int:
        """The most requests in flight the rules check the launch against: the cap of a request-rate run (or an
        SLA search), else the highest concurrency level."""
        if (self.request_rate or self.sla_search) and self.max_concurrency:
            return self.max_concurrency
        return self.max_concurrency if self.max_concurrency else max(self.concurrency)

    def describe(self) -> str:
        """One line for the report."""
        if self.dataset_name == "trace":
            mode = f"trace replay (time x{self.trace_time_scale:g}, {self.trace_loops} loop(s))"
        elif self.sla_search:
            mode = f"SLA search {self.sla_search[0]:g}-{self.sla_search[1]:g} req/s"
        elif self.request_rate:
            mode = "request rates " + ", ".join(f"{r:g}" for r in self.request_rate) + " req/s"
        else:
            mode = f"concurrency {list(self.concurrency)}"
        if (self.request_rate or self.sla_search) and self.max_concurrency:
            mode += f" (at most {self.max_concurrency} in flight)"
        data = self.dataset_name + (f" {self.dataset_path}" if self.dataset_path else "")
        text = f"{mode}; dataset {data}, seed {self.seed}"
        if self.dataset_name != "trace":  # a trace's lengths are its own
            text += f", input {self.input_len}, output {self.output_len} tokens"
        return text + (f"; SLO {json.dumps(self.slo)}" if self.slo else "")


def _field(name: str, default) -> tuple:
    """A Workload field: a setting of the table with its default as _Workload says."""
    default = 0 if name == "requests" else tuple(default) if isinstance(default, (list, tuple)) else default
    return name, Any, field(default=default)


Workload = make_dataclass(
    "Workload",
    [_field(name, s.default) for name, s in bench.WORKLOAD.items()] + [("dataset_sha256", Any, field(default=None))],
    bases=(_Workload,),
    frozen=True,
    namespace={"__doc__": _Workload.__doc__},
)


def engine_settings(values: dict) -> dict:
    """A workload's values as the engine takes them: lists for tuples, requests 0 as None (the module's default)."""
    out = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items() if k in WORKLOAD_KEYS}
    if "requests" in out:
        out["requests"] = out["requests"] or None
    return out


def parse_measure(text: str, bounded: bool = False) -> dict:
    """The command line's objective or limit as a search file's mapping: METRIC, METRIC@c=N or METRIC@rate=R, and
    for a limit (bounded) <=X or >=X after it, e.g. sla_rate_req_s, goodput_req_s@rate=8, ttft_p99_ms@c=32<=2000.
    ValueError naming the form."""
    form = (
        "METRIC[@c=N|@rate=R]"
        + ("<=X or >=X" if bounded else "")
        + (
            ", e.g. ttft_p99_ms@c=32<=2000 or sla_rate_req_s>=4"
            if bounded
            else ", e.g. sla_rate_req_s or goodput_req_s@rate=8"
        )
    )
    raw: dict = {}
    body = str(text).replace(" ", "")
    if bounded:
        op = "<=" if "<=" in body else ">=" if ">=" in body else None
        if op is None:
            raise ValueError(f"limit {text!r}: give {form}")
        body, _, bound = body.partition(op)
        try:
            raw["max" if op == "<=" else "min"] = float(bound)
        except ValueError:
            raise ValueError(f"limit {text!r}: the bound {bound!r} is no number; give {form}") from None
    metric, _, level = body.partition("@")
    raw["metric"] = metric
    if level:
        kind, _, value = level.partition("=")
        try:
            if kind == "c":
                raw["concurrency"] = int(value)
            elif kind == "rate":
                raw["rate"] = float(value)
            else:
                raise ValueError(kind)
        except ValueError:
            raise ValueError(f"{text!r}: the level {level!r} is c=N or rate=R; give {form}") from None
    return raw
