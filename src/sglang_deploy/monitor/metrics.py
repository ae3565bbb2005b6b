"""The metrics a scrape of each watched program holds: an SGLang release's ``/metrics`` (recorded from its code by
tools/record_metrics.py into ``data/metrics-<version>.json``), the smg router's (``data/metrics-smg-<version>.json``),
the GPU exporters' (``GPU_METRICS``, the names host/gpu_exporter.py writes, and dcgm-exporter's) and the blackbox
probe of ``/health``. The scrape jobs the rules expect are ``JOBS``.

A release without its own file uses the nearest lower recorded release (launch.flags.nearest_release: the metrics
are recorded for every release with a flag list). SGLang's prefix changed between releases (``sglang:`` and
``sglang_``, sgl-project/sglang#12618, #15758, #36428): rules name a metric by its base name (``num_running_reqs``)
and ``MetricSet.sample`` gives the name the release exposes.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from sglang_deploy.launch.flags import DATA, FlagError, nearest_release


class MonitorError(ValueError):
    """No recorded metric set can serve a release, or a rule names a metric it does not expose."""


# The scrape jobs the monitoring role configures (job name -> what it scrapes); the rules select on them. The probe
# job relabels its instance to the server's host:port, the instance of its ``sglang`` target.
JOBS = {
    "server": "sglang",  # each SGLang server's /metrics (--enable-metrics)
    "health": "sglang-health",  # blackbox exporter, module http_2xx, against each server's /health
    "router": "smg",  # the smg router's Prometheus port
    "gpu": "sglang-gpu",  # host/gpu_exporter.py or dcgm-exporter on each GPU host
    "node": "node",  # prometheus-node-exporter
}

PREFIXES = ("sglang:", "sglang_")


@dataclass(frozen=True)
class Metric:
    """One metric family: its type, the label names it carries (besides job and instance) and its sample names."""

    name: str
    type: str
    labels: tuple[str, ...]
    series: tuple[str, ...]


@dataclass(frozen=True)
class MetricSet:
    """The families one program exposes; ``release`` is the recorded release serving the one asked for."""

    program: str
    asked: str  # the version asked for
    release: str  # the recorded release serving it
    source: str
    prefix: str
    families: dict[str, Metric]

    def family(self, base: str) -> Metric:
        """The family named ``base`` after any of the known prefixes, the release's own prefix first."""
        prefixes = (self.prefix, *[p for p in PREFIXES if p != self.prefix]) if self.program == "sglang" else ("",)
        for prefix in prefixes:
            if prefix + base in self.families:
                return self.families[prefix + base]
        raise MonitorError(
            f"{self.program} {self.release} exposes no metric {self.prefix}{base} ({self.source}): drop the rule "
            "that needs it for this release, or re-record with tools/record_metrics.py if the release has it"
        )

    def sample(self, base: str, suffix: str = "") -> str:
        """The sample name the release exposes for ``base`` (``suffix``: "_bucket", "_total", ...)."""
        metric = self.family(base)
        name = metric.name + suffix
        if name not in metric.series:
            raise MonitorError(f"{metric.name} is a {metric.type}: its samples are {', '.join(metric.series)}")
        return name

    def series(self) -> set[str]:
        return {s for m in self.families.values() for s in m.series}


def _metric(name: str, spec: dict[str, Any]) -> Metric:
    return Metric(name, spec["type"], tuple(spec["labels"]), tuple(spec["series"]))


@functools.lru_cache(maxsize=None)
def _load(filename: str, program: str, asked: str, release: str) -> MetricSet:
    path = DATA / filename
    if not path.is_file():
        raise MonitorError(
            f"no recorded metrics for {program} {asked} ({path} is missing): run "
            f"tools/record_metrics.py{' --router' if program == 'smg' else ' --version ' + release}"
        )
    doc = json.loads(path.read_text())
    return MetricSet(
        program=program,
        asked=asked,
        release=doc.get("sglang_version") or doc["smg_version"],
        source=doc["source"],
        prefix=doc["prefix"],
        families={n: _metric(n, spec) for n, spec in doc["metrics"].items()},
    )


def metric_set(version: str) -> MetricSet:
    """The metrics SGLang ``version`` exposes: its own record, or the nearest lower recorded release's."""
    try:
        release = nearest_release(version)
    except FlagError as exc:
        raise MonitorError(f"{exc}: record the release with tools/record_flags.py and tools/record_metrics.py") from exc
    return _load(f"metrics-{release}.json", "sglang", version, release)


def recorded_routers() -> list[str]:
    return sorted(p.name[len("metrics-smg-") : -len(".json")] for p in DATA.glob("metrics-smg-*.json"))


def router_metric_set(version: str) -> MetricSet:
    """The smg router's metrics for ``version`` (recorded for the release roles/sglang_router pins)."""
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version or ""):
        raise MonitorError(f"not an smg version: {version!r}")
    return _load(f"metrics-smg-{version}.json", "smg", version, version)


@dataclass(frozen=True)
class GpuMetric:
    """One GPU reading under the name host/gpu_exporter.py writes and under dcgm-exporter's."""

    name: str
    type: str
    dcgm: str
    help: str


# The GPU exporters' names: host/gpu_exporter.py writes each with the label gpu="<index>"; dcgm-exporter's fields
# carry gpu and UUID, in its own units (temperature C, clocks MHz, memory MiB, utilisation %).
GPU_METRICS = {
    "utilization": GpuMetric("sglang_gpu_utilization_ratio", "gauge", "DCGM_FI_DEV_GPU_UTIL", "busy share, 0-1"),
    "memory_used": GpuMetric("sglang_gpu_memory_used_bytes", "gauge", "DCGM_FI_DEV_FB_USED", "memory in use"),
    "memory_total": GpuMetric("sglang_gpu_memory_total_bytes", "gauge", "DCGM_FI_DEV_FB_TOTAL", "memory in all"),
    "temperature": GpuMetric("sglang_gpu_temperature_celsius", "gauge", "DCGM_FI_DEV_GPU_TEMP", "core temperature"),
    "power": GpuMetric("sglang_gpu_power_watts", "gauge", "DCGM_FI_DEV_POWER_USAGE", "power draw"),
    "clock_sm": GpuMetric("sglang_gpu_clock_sm_hz", "gauge", "DCGM_FI_DEV_SM_CLOCK", "SM clock"),
    "throttle": GpuMetric(
        "sglang_gpu_throttle_reasons", "gauge", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "NVML's clocks-event mask"
    ),
    "xid": GpuMetric("sglang_gpu_xid_errors_total", "counter", "DCGM_FI_DEV_XID_ERRORS", "Xid events (dcgm: the last)"),
    "ecc": GpuMetric(
        "sglang_gpu_ecc_errors_total", "counter", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "uncorrected ECC errors (volatile)"
    ),
}
# The bits of NVML's clocks-event mask (nvmlClocksEventReason*) that mean heat or a hardware slowdown, not load,
# the power cap or an idle GPU.
GPU_THROTTLE_BITS = {
    "hw_slowdown": 8,
    "sw_thermal_slowdown": 32,
    "hw_thermal_slowdown": 64,
    "hw_power_brake_slowdown": 128,
}

# The blackbox exporter's probe and Prometheus's own per-target series.
PROBE_SERIES = {"probe_success", "probe_http_status_code", "probe_duration_seconds"}
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def gpu_series() -> set[str]:
    """Every sample name a GPU exporter writes (host/gpu_exporter.py's and dcgm-exporter's)."""
    return {m.name for m in GPU_METRICS.values()} | {m.dcgm for m in GPU_METRICS.values()}


# PromQL: the words that are not metric names, and the parts of an expression that hold no metric name.
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
_NOT_NAMES = re.compile(
    r'"(?:[^"\\]|\\.)*"'  # strings
    r"|\{[^}]*\}"  # label matchers
    r"|\[[^\]]*\]"  # ranges
    r"|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"  # label lists
)
_NAME = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")


def expr_metrics(expr: str) -> set[str]:
    """The metric names (and recorded rule names) a PromQL expression reads."""
    text = _NOT_NAMES.sub(" ", expr)
    return {n for n in _NAME.findall(text) if n not in _KEYWORDS and not re.fullmatch(r"[eE][\d.]*|Inf|NaN", n)}
