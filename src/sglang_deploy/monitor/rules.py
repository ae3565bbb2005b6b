"""Prometheus recording and alert rules for the SGLang releases the hosts run, rendered from the metrics each
release exposes (metrics.metric_set), so a rule never names a metric the release lacks: ``render_rules`` checks
every expression's names against the release's recorded set before it returns.

Groups: one per SGLang release (``sglang-<version>``; with several releases each group selects its targets by the
target label ``sglang_release``, which the monitoring role sets on each server's scrape target), ``smg-<version>``
for the router and ``gpu`` for the GPU exporters. ``ALERTS`` is the table of alerts (docs/monitoring.md explains
each one to the operator).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

import yaml

from sglang_deploy.monitor.metrics import (
    GPU_METRICS,
    GPU_THROTTLE_BITS,
    JOBS,
    PROBE_SERIES,
    SCRAPE_SERIES,
    MetricSet,
    MonitorError,
    expr_metrics,
    gpu_series,
    metric_set,
    router_metric_set,
)

RELEASE_LABEL = "sglang_release"
_DURATION = re.compile(r"[1-9][0-9]*[smhd]")


@dataclass(frozen=True)
class Settings:
    """What the rules measure against; the inventory's ``sglang_monitoring_rules`` mapping overrides these."""

    ttft_p99_ms: float = 5000.0  # time to first token, p99 over latency_window
    tpot_p99_ms: float = 200.0  # time per output token (SGLang's inter-token latency), p99
    latency_window: str = "5m"
    latency_for: str = "10m"
    stall_seconds: int = 180  # work pending and no token processed for this long
    stall_for: str = "1m"
    down_for: str = "1m"
    not_ready_for: str = "10m"  # covers a start: /metrics answers before the model is warm
    kv_usage_ratio: float = 0.95
    kv_for: str = "10m"
    gpu_temperature_c: float = 85.0
    gpu_for: str = "5m"
    router_version: str | None = None  # the smg release (roles/sglang_router's sglang_router_version); None: no router


def settings_from(values: Mapping | None) -> Settings:
    """Settings from a mapping (the inventory's), each value checked; an unknown key names the known ones."""
    values = dict(values or {})
    known = {f.name: f for f in fields(Settings)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise MonitorError(f"unknown monitoring setting(s) {', '.join(unknown)}: known are {', '.join(known)}")
    for key, value in values.items():
        default = getattr(Settings, key)
        if key == "router_version":
            ok = value is None or isinstance(value, str)
        elif isinstance(default, str):
            ok = isinstance(value, str) and _DURATION.fullmatch(value) is not None
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
            ok = ok and (key != "kv_usage_ratio" or value <= 1) and (key != "stall_seconds" or value >= 60)
        if not ok:
            raise MonitorError(f"monitoring setting {key}={value!r}: give {_expected(key, default)}")
    return Settings(**values)


def _expected(key: str, default) -> str:
    if key == "router_version":
        return "the smg version as a string, or null"
    if isinstance(default, str):
        return f"a Prometheus duration such as {default!r}"
    if key == "kv_usage_ratio":
        return "a ratio above 0 and at most 1"
    return "a number of at least 60" if key == "stall_seconds" else "a positive number"


@dataclass(frozen=True)
class Scope:
    """What one group's expressions are built from: the release's metrics and the label matchers of its targets."""

    metrics: MetricSet
    settings: Settings
    release_label: bool = False  # select the targets by sglang_release (several releases watched at once)

    @property
    def match(self) -> str:
        """The matchers after job's: the release's target label when several releases are watched."""
        return f', {RELEASE_LABEL}="{self.metrics.asked}"' if self.release_label else ""

    @property
    def by(self) -> str:
        """The labels a recorded series keeps: one series per server (and its release label)."""
        return f"job, instance, {RELEASE_LABEL}" if self.release_label else "job, instance"

    def sel(self, base: str, suffix: str = "", job: str = "server") -> str:
        """A selector of the release's sample for ``base`` on the server job."""
        return f'{self.metrics.sample(base, suffix)}{{job="{JOBS[job]}"{self.match}}}'

    def up(self, job: str = "server") -> str:
        return f'up{{job="{JOBS[job]}"{self.match}}}'


@dataclass(frozen=True)
class Record:
    name: str
    expr: Callable[[Scope], str]


@dataclass(frozen=True)
class Alert:
    name: str
    group: str  # "sglang", "router" or "gpu"
    severity: str
    for_: Callable[[Settings], str]
    expr: Callable[[Scope], str]
    summary: str
    description: str


BY = "job, instance"


def _quantile(s: Scope, base: str) -> str:
    rate = f"rate({s.sel(base, '_bucket')}[{s.settings.latency_window}])"
    return f"histogram_quantile(0.99, sum by ({s.by}, le) ({rate}))"


RECORDS = {
    "sglang": (
        Record(
            "instance:sglang_requests_pending:sum",
            lambda s: f"sum by ({s.by}) ({s.sel('num_running_reqs')}) + sum by ({s.by}) ({s.sel('num_queue_reqs')})",
        ),
        Record(
            "instance:sglang_tokens_processed:increase_stall",
            lambda s: f"sum by ({s.by}) (increase({s.sel('realtime_tokens', '_total')}[{s.settings.stall_seconds}s]))",
        ),
        Record("instance:sglang_ttft_seconds:p99", lambda s: _quantile(s, "time_to_first_token_seconds")),
        Record("instance:sglang_itl_seconds:p99", lambda s: _quantile(s, "inter_token_latency_seconds")),
        Record("instance:sglang_kv_cache_usage:ratio", lambda s: f"max by ({s.by}) ({s.sel('token_usage')})"),
    ),
}


def _recorded(name: str, s: Scope) -> str:
    return f"{name}{{{s.match.lstrip(', ')}}}" if s.match else name


def _gpu(key: str) -> str:
    return GPU_METRICS[key].name


def _dcgm(key: str) -> str:
    return GPU_METRICS[key].dcgm


def _throttled(name: str) -> str:
    """GPUs whose clocks-event mask ``name`` holds one of GPU_THROTTLE_BITS (PromQL has no bitwise and)."""
    bits = " or ".join(f"floor({name} / {bit}) % 2 == 1" for bit in GPU_THROTTLE_BITS.values())
    return f"max by ({BY}, gpu) ({bits})"


ALERTS = (
    Alert(
        "SGLangServerDown",
        "sglang",
        "critical",
        lambda c: c.down_for,
        lambda s: f"{s.up()} == 0",
        "SGLang server {{ $labels.instance }} does not answer its /metrics scrape",
        "The process is gone, the port is closed or the host is down. Check `systemctl status` of the unit and its "
        "journal on the host; `sglang-deploy status` shows the host record. A crash loop is stopped by the unit's "
        "restart limit: read the journal before restarting by hand.",
    ),
    Alert(
        "SGLangNotReady",
        "sglang",
        "critical",
        lambda c: c.not_ready_for,
        lambda s: f'probe_success{{job="{JOBS["health"]}"}} == 0 and on (instance) {s.up()} == 1',
        "SGLang server {{ $labels.instance }} answers /metrics but its /health fails",
        "The HTTP front end runs but the scheduler does not answer (loading for longer than the alert's for:, a "
        "dead scheduler or a hung TP rank). Look at the journal for a traceback or NCCL timeout; if the start is "
        "not just slow, restart the unit (the watchdog does after its failures in a row).",
    ),
    Alert(
        "SGLangStalled",
        "sglang",
        "critical",
        lambda c: c.stall_for,
        lambda s: (
            f"{_recorded('instance:sglang_requests_pending:sum', s)} > 0 unless on ({BY}) "
            f"{_recorded('instance:sglang_tokens_processed:increase_stall', s)} > 0"
        ),
        "SGLang server {{ $labels.instance }} holds {{ $value }} requests but processed no token",
        "Requests are running or queued and no prompt or output token was processed for the stall window "
        "(stall_seconds): the scheduler or a GPU hangs while /health may still answer 200. Drain the host from "
        "the router, save the journal and `py-spy dump` of the scheduler, then restart the unit; an Xid in the "
        "kernel log (dmesg) with the stall needs a GPU reset or a reboot, not a restart.",
    ),
    Alert(
        "SGLangTTFTHigh",
        "sglang",
        "warning",
        lambda c: c.latency_for,
        lambda s: f"{_recorded('instance:sglang_ttft_seconds:p99', s)} > {s.settings.ttft_p99_ms / 1000:g}",
        "SGLang server {{ $labels.instance }}: time to first token p99 {{ $value }}s over the SLA",
        "Prefill waits: the queue grows (more load than the server takes), long prompts or a prefix cache that no "
        "longer hits. Check the queue and cache-hit panels; add replicas, lower the load or compare profiles "
        "(`sglang-deploy compare`) with chunked prefill or a larger batch.",
    ),
    Alert(
        "SGLangTPOTHigh",
        "sglang",
        "warning",
        lambda c: c.latency_for,
        lambda s: f"{_recorded('instance:sglang_itl_seconds:p99', s)} > {s.settings.tpot_p99_ms / 1000:g}",
        "SGLang server {{ $labels.instance }}: inter-token latency p99 {{ $value }}s over the SLA",
        "Decode is slow: too many running requests for the GPUs, prefill interrupting decode, throttled GPUs "
        "(see the GPU alerts) or speculative decoding that stopped accepting. Lower max-running-requests or the "
        "load, or compare profiles.",
    ),
    Alert(
        "SGLangKVCacheNearFull",
        "sglang",
        "warning",
        lambda c: c.kv_for,
        lambda s: f"{_recorded('instance:sglang_kv_cache_usage:ratio', s)} > {s.settings.kv_usage_ratio:g}",
        "SGLang server {{ $labels.instance }}: KV cache {{ $value | humanizePercentage }} used",
        "Running requests hold nearly every KV token: new requests queue and running ones may be retracted "
        "(recomputed). Raise mem-fraction-static if the GPU has room, lower the context or the concurrency, or "
        "add replicas.",
    ),
    Alert(
        "SGLangRouterDown",
        "router",
        "critical",
        lambda c: c.down_for,
        lambda s: f'up{{job="{JOBS["router"]}"}} == 0',
        "smg router {{ $labels.instance }} does not answer its metrics scrape",
        "No request reaches any replica through the router. Check the smg unit and its journal on the router host; "
        "the replicas may still serve directly.",
    ),
    Alert(
        "SGLangRouterWorkerUnhealthy",
        "router",
        "warning",
        lambda c: c.down_for,
        lambda s: f'{s.metrics.sample("smg_worker_health")}{{job="{JOBS["router"]}"}} == 0',
        "smg router marks worker {{ $labels.worker }} unhealthy",
        "The router's health checks fail for this replica and it gets no traffic. See that server's own alerts "
        "(down, not ready, stalled); a deploy or roll in progress drains replicas on purpose.",
    ),
    Alert(
        "GPUXidError",
        "gpu",
        "critical",
        lambda c: "0s",
        lambda s: (
            f"sum by ({BY}, gpu) (increase({_gpu('xid')}[10m])) > 0 or max by ({BY}, gpu) "
            f"(max_over_time({_dcgm('xid')}[10m])) > 0"
        ),
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} reported an Xid error",
        "The driver logged an Xid (dmesg shows its number). Xid 79 (fallen off the bus), 48/94/95 (ECC) and a hang "
        "such as Xid 8 need the GPU reset or the host rebooted; drain the host first. Others (13, 31, 43) usually "
        "point at the application: read the server's journal.",
    ),
    Alert(
        "GPUEccUncorrected",
        "gpu",
        "critical",
        lambda c: "0s",
        lambda s: (
            f"sum by ({BY}, gpu) (increase({_gpu('ecc')}[10m])) > 0 or "
            f"sum by ({BY}, gpu) (increase({_dcgm('ecc')}[10m])) > 0"
        ),
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} had an uncorrected ECC error",
        "Memory on the GPU returned wrong data: the running process was likely killed. Drain the host; after a "
        "reset the page is retired or remapped; repeated errors mean the GPU needs replacing.",
    ),
    Alert(
        "GPUThrottled",
        "gpu",
        "warning",
        lambda c: c.gpu_for,
        lambda s: f"{_throttled(_gpu('throttle'))} or {_throttled(_dcgm('throttle'))}",
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} is slowed by heat or a hardware slowdown",
        "Clocks are cut by a thermal limit, a power brake or a hardware slowdown signal (not the normal power cap): "
        "throughput drops and latency rises. Check cooling, fans and power supply; compare with the other GPUs.",
    ),
    Alert(
        "GPUTemperatureHigh",
        "gpu",
        "warning",
        lambda c: c.gpu_for,
        lambda s: (
            f"max by ({BY}, gpu) ({_gpu('temperature')}) > {s.settings.gpu_temperature_c:g} or "
            f"max by ({BY}, gpu) ({_dcgm('temperature')}) > {s.settings.gpu_temperature_c:g}"
        ),
        "GPU {{ $labels.gpu }} on {{ $labels.instance }} at {{ $value }} C",
        "The GPU runs hot and will throttle. Check the room's and the chassis' cooling and the fans.",
    ),
    Alert(
        "GPUExporterDown",
        "gpu",
        "warning",
        lambda c: c.down_for,
        lambda s: f'up{{job="{JOBS["gpu"]}"}} == 0',
        "GPU exporter on {{ $labels.instance }} does not answer",
        "Without it no GPU alert can fire for this host. Check the exporter's unit (sglang-gpu-exporter or "
        "dcgm-exporter) and its journal.",
    ),
)


def alert_names() -> list[str]:
    return [a.name for a in ALERTS]


def known_series(scope: Scope) -> set[str]:
    """Every name an expression of this scope may read: the program's samples, the recording rules, the GPU
    exporters', the probe's and Prometheus's own."""
    records = {r.name for group in RECORDS.values() for r in group}
    return scope.metrics.series() | records | gpu_series() | PROBE_SERIES | SCRAPE_SERIES


def _rule(entry: Record | Alert, scope: Scope) -> dict:
    expr = entry.expr(scope)
    unknown = sorted(expr_metrics(expr) - known_series(scope))
    if unknown:
        raise MonitorError(
            f"{entry.name} names {', '.join(unknown)}, which {scope.metrics.program} {scope.metrics.release} does "
            f"not expose ({scope.metrics.source}): fix the rule in monitor/rules.py"
        )
    release = {RELEASE_LABEL: scope.metrics.asked} if scope.release_label else {}
    if isinstance(entry, Record):
        return {"record": entry.name, "expr": expr, **({"labels": release} if release else {})}
    return {
        "alert": entry.name,
        "expr": expr,
        "for": entry.for_(scope.settings),
        "labels": {"severity": entry.severity, "component": entry.group, **release},
        "annotations": {"summary": entry.summary, "description": entry.description},
    }


def _group(name: str, kind: str, scope: Scope, alerts: Sequence[Alert]) -> dict:
    rules = [_rule(r, scope) for r in RECORDS.get(kind, ())]
    rules += [_rule(a, scope) for a in alerts if a.group == kind]
    return {"name": name, "rules": rules}


def rule_groups(releases: Sequence[str], settings: Settings | None = None, alerts: Sequence[Alert] = ALERTS) -> list:
    """The rule groups for hosts running ``releases`` (the SGLang versions, each once)."""
    settings = settings or Settings()
    if not releases:
        raise MonitorError("no SGLang release given: pass the version each host runs")
    versions = list(dict.fromkeys(releases))
    groups = []
    for version in versions:
        scope = Scope(metric_set(version), settings, release_label=len(versions) > 1)
        groups.append(_group(f"sglang-{version}", "sglang", scope, alerts))
    if settings.router_version:
        router = Scope(router_metric_set(settings.router_version), settings)
        groups.append(_group(f"smg-{settings.router_version}", "router", router, alerts))
    groups.append(_group("gpu", "gpu", Scope(metric_set(versions[0]), settings), alerts))
    return groups


def render_rules(releases: Sequence[str], settings: Mapping | None = None) -> str:
    """The Prometheus rule file (YAML) for hosts running ``releases``, settings from the inventory's mapping."""
    groups = rule_groups(releases, settings_from(settings))
    return yaml.safe_dump({"groups": groups}, sort_keys=False, width=120)
