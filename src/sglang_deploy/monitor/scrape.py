"""Prometheus's scrape jobs (``metrics.JOBS``) for the hosts the monitoring role watches: each host's node exporter,
SGLang server (labelled with its release, and probed at /health through the blackbox exporter), GPU exporter and smg
router, as the role's entry point ``target`` describes them (``Target``); ``scrape_configs`` checks each and gives
the ``scrape_configs`` of prometheus.yml.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from sglang_deploy.monitor.metrics import JOBS, MonitorError
from sglang_deploy.monitor.rules import RELEASE_LABEL, render_rules

_ADDRESS = re.compile(r"[A-Za-z0-9_.-]+:[0-9]{1,5}|\[[0-9A-Fa-f:.]+\]:[0-9]{1,5}")
_RELEASE = re.compile(r"[0-9][0-9A-Za-z.+-]*")
# SGLang names its metrics sglang:<name>. prometheus_client (0.26.0 read; prometheus/client_python issue 1177, open)
# answers a Prometheus 2.x scrape, whose Accept header asks for OpenMetrics without an escaping=, with
# escaping=underscores and writes each sample as sglang_<name> (the # HELP/# TYPE lines keep the colon), so every
# sglang: selector of the rules finds nothing (issue 50, read from source). The server job names them back; a
# client that keeps the colon (the text format, a fixed client) is left as it is.
SERVER_RELABEL = (
    {"source_labels": ["__name__"], "regex": "sglang_(.+)", "target_label": "__name__", "replacement": "sglang:$1"},
)


@dataclass(frozen=True)
class Target:
    """What Prometheus scrapes on one host: host:port of each program ('' where the host has none)."""

    host: str
    node: str = ""
    server: str = ""
    release: str = ""  # the SGLang release the server runs
    gpu: str = ""
    router: str = ""
    router_version: str = ""


def target_from(values: Mapping) -> Target:
    """A Target from the role's fact, each address and release checked."""
    known = {f.name for f in fields(Target)}
    unknown = sorted(set(values) - known)
    if unknown or not values.get("host"):
        raise MonitorError(f"a scrape target needs host and knows {', '.join(sorted(known))}; got {dict(values)!r}")
    target = Target(**{k: "" if v is None else str(v) for k, v in values.items()})
    for name in ("node", "server", "gpu", "router"):
        address = getattr(target, name)
        if address and not _ADDRESS.fullmatch(address):
            raise MonitorError(f"{target.host}: {name} address {address!r} is not host:port")
    for name, need in (("release", "server"), ("router_version", "router")):
        value = getattr(target, name)
        if getattr(target, need) and not _RELEASE.fullmatch(value):
            raise MonitorError(f"{target.host}: the {need} needs its {name} (a version such as 0.5.23), got {value!r}")
    return target


def _job(name: str, addresses: Sequence[tuple[str, dict]], **extra) -> dict:
    groups = [{"targets": [address], **({"labels": labels} if labels else {})} for address, labels in addresses]
    return {"job_name": name, **extra, "static_configs": groups}


def scrape_configs(targets: Sequence[Mapping], blackbox: str) -> list[dict]:
    """The scrape jobs for ``targets`` (the role's facts); ``blackbox`` is the blackbox exporter's host:port. A job
    with no target is left out; the probe job's instance is the server's host:port, the instance of its sglang
    target (the rule SGLangNotReady joins them on it)."""
    hosts = [target_from(t) for t in targets]
    servers = [(t.server, {RELEASE_LABEL: t.release}) for t in hosts if t.server]
    seen = [address for address, _labels in servers]
    if len(set(seen)) < len(seen):
        raise MonitorError(f"two servers share an address ({', '.join(seen)}): give each host its own")
    probe = {
        "metrics_path": "/probe",
        "params": {"module": ["http_2xx"]},
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "regex": "https?://([^/]+)/.*", "target_label": "instance"},
            {"target_label": "__address__", "replacement": blackbox},
        ],
    }
    jobs = [
        _job(JOBS["server"], servers, metric_relabel_configs=[dict(r) for r in SERVER_RELABEL]),
        _job(JOBS["health"], [(f"http://{a}/health", labels) for a, labels in servers], **probe),
        _job(JOBS["router"], [(t.router, {}) for t in hosts if t.router]),
        _job(JOBS["gpu"], [(t.gpu, {}) for t in hosts if t.gpu]),
        _job(JOBS["node"], [(t.node, {}) for t in hosts if t.node]),
    ]
    return [job for job in jobs if job["static_configs"]]


def releases(targets: Sequence[Mapping]) -> list[str]:
    """The SGLang releases the servers among ``targets`` run, each once (the rules' groups)."""
    return list(dict.fromkeys(t.release for t in map(target_from, targets) if t.server))


def router_version(targets: Sequence[Mapping]) -> str | None:
    """The smg release of the routers among ``targets``; several routers must run the same one."""
    versions = {t.router_version for t in map(target_from, targets) if t.router}
    if len(versions) > 1:
        raise MonitorError(f"the routers run different smg releases ({', '.join(sorted(versions))}): align them")
    return versions.pop() if versions else None


def target_rules(targets: Sequence[Mapping], settings: Mapping | None = None) -> str:
    """The rule file for the releases and the router among ``targets`` (settings: the inventory's thresholds; its
    router_version, when given, wins over the routers' own)."""
    settings = {"router_version": router_version(targets), **(settings or {})}
    return render_rules(releases(targets), settings)
