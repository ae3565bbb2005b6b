"""A fleet of SGLang replicas behind the Shepherd Model Gateway (smg): the router's worker manifest, the
states the router reports, a replica's running requests, and what each host serves after a rolling deploy.

Stdlib only: shipped to hosts as module_utils/sglang_fleet.py (a symlink to this file) for the
`sglang_router_wait` and `sglang_drain` modules, and used on the controller by the filter plugin.

smg facts this relies on (smg 1.13.0, checked against its --help and a running gateway):
- `--discovery-provider file --discovery-file F` re-reads F when it changes; F is
  {"version": 1, "workers": [{"id": ..., "url": ...}]}. A worker dropped from F goes `draining` at once (no
  new requests) and leaves the registry after a fixed settle time, without waiting for in-flight requests.
- `GET /workers` lists {"url", "status" (pending, ready, not_ready, failed, draining), "is_healthy",
  "labels": {"smg.ai/discovery-id": id}}; with control-plane keys it needs `Authorization: Bearer <admin key>`.
- SGLang's `/metrics` (with --enable-metrics) has the gauges `sglang:num_running_reqs` and `sglang:num_queue_reqs`
  per TP/PP rank (python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector).
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

MANIFEST_VERSION = 1
DISCOVERY_ID_LABEL = "smg.ai/discovery-id"
IN_FLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
PROBE_TIMEOUT_S = 5.0


class FleetError(RuntimeError):
    """A fleet step that did not reach its state; `detail` holds what was last seen."""

    def __init__(self, message: str, detail: dict | None = None):
        super().__init__(message)
        self.detail = detail or {}


class Unreachable(FleetError):
    """Nothing answered at the URL (connection refused, timeout, DNS)."""


def manifest(workers: list[dict], out: list[str] | tuple = ()) -> dict:
    """smg's file-discovery manifest of ``workers`` ([{"id", "url"}]) without the ids in ``out``."""
    seen: dict[str, str] = {}
    for worker in workers:
        wid, url = str(worker.get("id", "")), str(worker.get("url", ""))
        parts = urlsplit(url)
        if not wid or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"router worker {worker!r}: needs an id and an http(s)://host:port url")
        if wid in seen or url in seen.values():
            raise ValueError(f"router worker {wid} ({url}) is listed twice")
        seen[wid] = url
    return {
        "version": MANIFEST_VERSION,
        "workers": [{"id": wid, "url": url} for wid, url in seen.items() if wid not in set(out)],
    }


def router_argv(args: dict) -> list[str]:
    """smg launch flags from {name without dashes: value}: true is a bare switch, false or null leaves the flag out,
    a list gives several values."""
    argv: list[str] = []
    for name, value in args.items():
        if value is False or value is None:
            continue
        argv.append(f"--{name}")
        if value is not True:
            argv += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return argv


def worker_states(listing: dict) -> dict[str, dict]:
    """GET /workers as {discovery id (else url): {"url", "status", "healthy"}}."""
    states = {}
    for worker in listing.get("workers", []):
        key = (worker.get("labels") or {}).get(DISCOVERY_ID_LABEL) or worker.get("url")
        states[key] = {
            "url": worker.get("url"),
            "status": worker.get("status"),
            "healthy": bool(worker.get("is_healthy")),
        }
    return states


def in_flight(metrics_text: str) -> float | None:
    """Running plus queued requests (IN_FLIGHT_GAUGES summed over their samples, one per rank); None when the
    running gauge is absent."""
    total, found = 0.0, False
    for line in metrics_text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in IN_FLIGHT_GAUGES:
            total += float(line.rsplit(None, 1)[-1])
            found = found or name == IN_FLIGHT_GAUGES[0]
    return total if found else None


def _get(url: str, api_key: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> tuple[int, str]:
    parts = urlsplit(url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"{url}: {exc}") from exc
    finally:
        conn.close()


def router_workers(router_url: str, api_key: str | None = None) -> dict[str, dict]:
    """The router's workers (see worker_states); Unreachable when it does not answer, FleetError on 401/403."""
    status, body = _get(router_url.rstrip("/") + "/workers", api_key)
    if status in (401, 403):
        raise FleetError(
            f"the router at {router_url} refused the control-plane key (HTTP {status}): set "
            "sglang_router_admin_api_key to one of its --control-plane-api-keys"
        )
    if status != 200:
        raise FleetError(f"the router at {router_url} answered GET /workers with HTTP {status}: {body[:200]}")
    return worker_states(json.loads(body))


def wait_router(
    router_url: str,
    api_key: str | None = None,
    ready: list | tuple = (),
    out: list | tuple = (),
    timeout: float = 120,
    sleep: float = 1.0,
) -> dict:
    """Wait until every id in ``ready`` is listed ready and healthy, and every id in ``out`` is gone or
    draining (the router sends it nothing new). Returns {"states", "elapsed"}."""
    start = time.monotonic()
    states: dict[str, dict] = {}
    while True:
        states = router_workers(router_url, api_key)
        pending = [w for w in ready if not (states.get(w, {}).get("status") == "ready" and states[w]["healthy"])]
        pending += [w for w in out if states.get(w, {}).get("status") not in (None, "draining")]
        if not pending:
            return {"states": states, "elapsed": round(time.monotonic() - start, 3)}
        if time.monotonic() - start >= timeout:
            raise FleetError(
                f"the router at {router_url} did not reach the expected state within {timeout:.0f} s: "
                + ", ".join(f"{w} is {states.get(w, {}).get('status', 'not listed')}" for w in pending),
                {"states": states, "pending": pending},
            )
        time.sleep(sleep)


def wait_drained(server_url: str, timeout: float = 600, sleep: float = 1.0) -> dict:
    """Wait until the server's running (and queued) requests reach 0. A server that does not answer has nothing to drain;
    one without metrics (404 or no gauge) returns metrics=False at once: SGLang's own drain on SIGTERM
    (tokenizer_manager.py, sigterm_watchdog) then covers the in-flight requests."""
    start = time.monotonic()
    while True:
        try:
            status, body = _get(server_url.rstrip("/") + "/metrics")
        except Unreachable as exc:
            return {"running": 0, "metrics": False, "elapsed": 0.0, "reason": f"server not answering ({exc})"}
        running = in_flight(body) if status == 200 else None
        if running is None:
            return {
                "running": None,
                "metrics": False,
                "elapsed": 0.0,
                "reason": f"no {IN_FLIGHT_GAUGES[0]} at {server_url}/metrics (HTTP {status}): the profile runs "
                "without --enable-metrics (set sglang_enable_metrics: true)",
            }
        elapsed = round(time.monotonic() - start, 3)
        if running == 0:
            return {"running": 0, "metrics": True, "elapsed": elapsed}
        if elapsed >= timeout:
            raise FleetError(
                f"{server_url} still has {running:g} running requests after {timeout:.0f} s out of "
                "the router: raise sglang_fleet_drain_timeout, or find the stuck requests",
                {"running": running, "elapsed": elapsed},
            )
        time.sleep(sleep)


def summary(hosts: list[str], previous: dict, deployed: dict, failed: dict, profile: str) -> list[dict]:
    """What each host serves after a (possibly stopped) roll. ``previous``: host -> profile before the roll;
    ``deployed``: host -> profile that passed in this run; ``failed``: host -> profile it rolled back to
    (None when it did not)."""
    rows = []
    for host in hosts:
        if host in deployed:
            rows.append({"host": host, "serves": deployed[host], "state": "updated"})
        elif host in failed:
            rows.append(
                {
                    "host": host,
                    "serves": failed[host],
                    "state": f"{profile} failed here, roll stopped" + ("" if failed[host] else "; not serving"),
                }
            )
        else:
            rows.append({"host": host, "serves": previous.get(host), "state": "untouched"})
    return rows
