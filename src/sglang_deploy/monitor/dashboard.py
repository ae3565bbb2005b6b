"""A Grafana dashboard (JSON model) for the SGLang release a host runs: every query names the release's own metric
names (metrics.metric_set), checked like the rules' (rules.known_series) before the dashboard is returned. The
server panels select ``$instance`` among the ``sglang`` job's targets; router and GPU panels show every target of
their jobs (GPU panels read host/gpu_exporter.py's names or dcgm-exporter's, converted to the same units)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sglang_deploy.monitor.metrics import GPU_METRICS, JOBS, MonitorError, expr_metrics, metric_set, router_metric_set
from sglang_deploy.monitor.rules import Scope, Settings, known_series, settings_from

RATE = "$__rate_interval"
SERVER = f'job="{JOBS["server"]}", instance=~"$instance"'


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    targets: tuple[tuple[str, Callable[[Scope], str]], ...]  # (legend, query)
    group: str = "sglang"  # "sglang", "router" or "gpu"
    optional: bool = False  # left out where the release lacks one of its metrics


def _s(s: Scope, base: str, suffix: str = "") -> str:
    return f"{s.metrics.sample(base, suffix)}{{{SERVER}}}"


def _rate(s: Scope, base: str) -> str:
    return f"sum by (instance) (rate({_s(s, base, '_total')}[{RATE}]))"


def _p(q: float, base: str) -> Callable[[Scope], str]:
    return lambda s: f"histogram_quantile({q}, sum by (instance, le) (rate({_s(s, base, '_bucket')}[{RATE}])))"


def _gpu(key: str, dcgm_scale: str = "") -> Callable[[Scope], str]:
    gpu = GPU_METRICS[key]
    sel = f'{{job="{JOBS["gpu"]}"}}'
    return lambda s: f"{gpu.name}{sel} or {gpu.dcgm}{sel}{dcgm_scale}"


LEGEND = "{{instance}}"
GPU_LEGEND = "{{instance}} gpu {{gpu}}"
PANELS = (
    Panel(
        "Up and ready",
        "none",
        (
            ("up {{instance}}", lambda s: f"up{{{SERVER}}}"),
            ("ready {{instance}}", lambda s: f'probe_success{{job="{JOBS["health"]}", instance=~"$instance"}}'),
        ),
    ),
    Panel(
        "Requests running and queued",
        "short",
        (
            ("running {{instance}}", lambda s: f"sum by (instance) ({_s(s, 'num_running_reqs')})"),
            ("queued {{instance}}", lambda s: f"sum by (instance) ({_s(s, 'num_queue_reqs')})"),
        ),
    ),
    Panel(
        "Tokens per second",
        "short",
        (
            ("generated {{instance}}", lambda s: _rate(s, "generation_tokens")),
            ("prompt {{instance}}", lambda s: _rate(s, "prompt_tokens")),
            ("processed {{instance}}", lambda s: _rate(s, "realtime_tokens")),
        ),
    ),
    Panel(
        "Time to first token",
        "s",
        (
            ("p50 " + LEGEND, _p(0.5, "time_to_first_token_seconds")),
            ("p99 " + LEGEND, _p(0.99, "time_to_first_token_seconds")),
        ),
    ),
    Panel(
        "Inter-token latency",
        "s",
        (
            ("p50 " + LEGEND, _p(0.5, "inter_token_latency_seconds")),
            ("p99 " + LEGEND, _p(0.99, "inter_token_latency_seconds")),
        ),
    ),
    Panel("End-to-end latency", "s", (("p99 " + LEGEND, _p(0.99, "e2e_request_latency_seconds")),)),
    Panel("Queue time", "s", (("p99 " + LEGEND, _p(0.99, "queue_time_seconds")),), optional=True),
    Panel(
        "KV cache usage and prefix cache hits",
        "percentunit",
        (
            ("KV used " + LEGEND, lambda s: f"max by (instance) ({_s(s, 'token_usage')})"),
            ("cache hit " + LEGEND, lambda s: f"max by (instance) ({_s(s, 'cache_hit_rate')})"),
        ),
    ),
    Panel(
        "Requests per second",
        "reqps",
        (
            ("finished " + LEGEND, lambda s: _rate(s, "num_requests")),
            ("aborted " + LEGEND, lambda s: _rate(s, "num_aborted_requests")),
        ),
    ),
    Panel(
        "Retracted requests",
        "short",
        ((LEGEND, lambda s: f"sum by (instance) ({_s(s, 'num_retracted_reqs')})"),),
        optional=True,
    ),
    Panel(
        "Speculative accept length",
        "short",
        ((LEGEND, lambda s: f"max by (instance) ({_s(s, 'spec_accept_length')})"),),
        optional=True,
    ),
    Panel(
        "Router: worker health",
        "none",
        (("{{worker}}", lambda s: f'{s.metrics.sample("smg_worker_health")}{{job="{JOBS["router"]}"}}'),),
        group="router",
    ),
    Panel(
        "Router: active requests per worker",
        "short",
        (("{{worker}}", lambda s: f'{s.metrics.sample("smg_worker_requests_active")}{{job="{JOBS["router"]}"}}'),),
        group="router",
    ),
    Panel("GPU utilisation", "percentunit", ((GPU_LEGEND, _gpu("utilization", " / 100")),), group="gpu"),
    Panel("GPU memory used", "bytes", ((GPU_LEGEND, _gpu("memory_used", " * 1048576")),), group="gpu"),
    Panel("GPU temperature", "celsius", ((GPU_LEGEND, _gpu("temperature")),), group="gpu"),
    Panel("GPU power", "watt", ((GPU_LEGEND, _gpu("power")),), group="gpu"),
    Panel("GPU SM clock", "hertz", ((GPU_LEGEND, _gpu("clock_sm", " * 1000000")),), group="gpu"),
    Panel(
        "GPU Xid errors", "short", ((GPU_LEGEND, lambda s: f"increase({GPU_METRICS['xid'].name}[1h])"),), group="gpu"
    ),
)


def _targets(panel: Panel, scope: Scope) -> list[dict]:
    targets = []
    for ref, (legend, query) in zip("ABCDEFGH", panel.targets):
        expr = query(scope)
        unknown = sorted(expr_metrics(expr) - known_series(scope))
        if unknown:
            raise MonitorError(f"dashboard panel {panel.title!r} names {', '.join(unknown)}: fix monitor/dashboard.py")
        targets.append({"refId": ref, "expr": expr, "legendFormat": legend, "datasource": _DATASOURCE})
    return targets


_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _panel(panel: Panel, scope: Scope) -> dict | None:
    try:
        targets = _targets(panel, scope)
    except MonitorError:
        if panel.optional:
            return None
        raise
    return {
        "type": "timeseries",
        "title": panel.title,
        "datasource": _DATASOURCE,
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": targets,
    }


def dashboard(version: str, settings: Settings | None = None) -> dict:
    """The dashboard model for servers running SGLang ``version`` (router panels when settings name the router)."""
    settings = settings or Settings()
    server = Scope(metric_set(version), settings)
    scopes = {"sglang": server, "gpu": server}
    if settings.router_version:
        scopes["router"] = Scope(router_metric_set(settings.router_version), settings)
    built = [p for p in (_panel(p, scopes[p.group]) for p in PANELS if p.group in scopes) if p]
    grid = [
        {"id": i + 1, "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}} for i in range(len(built))
    ]
    panels = [{**place, **panel} for place, panel in zip(grid, built)]
    release = scopes["sglang"].metrics.release
    return {
        "uid": f"sglang-{version}".replace(".", "-")[:40],
        "title": f"SGLang {version}",
        "description": f"SGLang {version} (metric names of the recorded release {release}), smg router and GPUs",
        "tags": ["sglang", "sglang-deploy"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
                {
                    "name": "instance",
                    "type": "query",
                    "datasource": _DATASOURCE,
                    "query": {"query": f'label_values(up{{job="{JOBS["server"]}"}}, instance)', "refId": "instance"},
                    "includeAll": True,
                    "multi": True,
                    "current": {"text": "All", "value": "$__all"},
                    "refresh": 2,
                },
            ]
        },
        "panels": panels,
    }


def exprs(model: dict) -> list[str]:
    """Every query of a dashboard model."""
    return [t["expr"] for p in model["panels"] for t in p["targets"]]


def render_dashboard(version: str, settings: Mapping | None = None) -> str:
    """The dashboard as Grafana's JSON, settings from the inventory's mapping (only router_version matters)."""
    return json.dumps(dashboard(version, settings_from(settings)), indent=2) + "\n"
