"""Probes of a fleet of SGLang replicas behind the Shepherd Model Gateway (smg), run on hosts: the states the
router reports for its workers (GET /workers) and a replica's running requests (GET /metrics), and waits on both.
The `sglang_router_wait` and `sglang_drain` modules use them; the controller's fleet.py reads worker_states too.

smg facts this relies on (smg 1.13.0, checked against its --help and a running gateway):
- `GET /workers` lists {"url", "status" (pending, ready, not_ready, failed, draining), "is_healthy",
  "labels": {"smg.ai/discovery-id": id}}; with control-plane keys it needs `Authorization: Bearer <admin key>`.
- SGLang's `/metrics` (with --enable-metrics) has the gauges `sglang:num_running_reqs` and `sglang:num_queue_reqs`
  per TP/PP rank (python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector).
"""

from __future__ import annotations

import json
import math
import time
from urllib.parse import urlsplit

from .server_http import Endpoint, HttpError, SlowAnswer, request

DISCOVERY_ID_LABEL = "smg.ai/discovery-id"
IN_FLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
PROBE_TIMEOUT_S = 5.0  # one read of /workers or /metrics, start to end
# A /metrics page or a /workers listing is a few KB per rank or worker: a larger body is not one of them.
MAX_BODY_BYTES = 16 << 20


class FleetError(RuntimeError):
    """A fleet step that did not reach its state; `detail` holds what was last seen."""

    def __init__(self, message: str, detail: dict | None = None):
        super().__init__(message)
        self.detail = detail or {}


class Unreachable(FleetError):
    """Nothing answered at the URL (connection refused, timeout, DNS)."""


def worker_states(listing: object) -> dict[str, dict]:
    """GET /workers as {discovery id (else url): {"url", "status", "healthy", "load", "model", "worker_id"}}:
    load is the router's count of requests in flight to the worker, worker_id smg's own id (DELETE /workers/{id}).
    ValueError saying what is wrong with a listing of another shape."""
    workers = listing.get("workers") if isinstance(listing, dict) else None
    if not isinstance(workers, list):
        raise ValueError(f"a JSON {type(listing).__name__} without a list of workers")
    states = {}
    for worker in workers:
        labels = (worker.get("labels") or {}) if isinstance(worker, dict) else None
        if not isinstance(labels, dict):
            raise ValueError("a worker that is not an object, or whose labels are not")
        key = labels.get(DISCOVERY_ID_LABEL) or worker.get("url")
        if not isinstance(key, str) or not isinstance(worker.get("url"), (str, type(None))):
            raise ValueError("a worker whose id or url is not a string")
        states[key] = {
            "url": worker.get("url"),
            "status": worker.get("status"),
            "healthy": bool(worker.get("is_healthy")),
            "load": worker.get("load"),
            "model": worker.get("model_id"),
            "worker_id": worker.get("id"),
        }
    return states


def in_flight(metrics_text: str) -> float | None:
    """Running plus queued requests (IN_FLIGHT_GAUGES summed over their samples, one per rank); None when the
    running gauge is absent. ValueError naming the line whose sample is not a count."""
    total, found = 0.0, False
    for number, line in enumerate(metrics_text.splitlines(), 1):
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in IN_FLIGHT_GAUGES:
            # name{labels} value [timestamp]: the labels end at the line's last '}'
            words = line[line.rfind("}") + 1 if "{" in line else len(name) :].split()
            try:
                value = float(words[0])
            except (IndexError, ValueError):
                value = math.nan
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"line {number}: {name} has no count of requests")
            total += value
            found = found or name == IN_FLIGHT_GAUGES[0]
    return total if found else None


def _get(url: str, api_key: str | None = None) -> tuple[int, str]:
    """GET ``url``: (HTTP status, body), the exchange bounded by server_http.request (PROBE_TIMEOUT_S in all,
    MAX_BODY_BYTES of body). Unreachable when nothing answers; FleetError naming the URL when the answer is too
    slow, too large or not HTTP."""
    parts = urlsplit(url)
    try:
        resp = request(
            Endpoint.parse(f"{parts.scheme}://{parts.netloc}"),
            "GET",
            (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            api_key=api_key,
            timeout=PROBE_TIMEOUT_S,
            max_bytes=MAX_BODY_BYTES,
        )
    except SlowAnswer as exc:
        raise FleetError(
            f"{url} answered, but not in full within {PROBE_TIMEOUT_S:g} s (a reply that slow is not SGLang's or smg's)"
        ) from exc
    except HttpError as exc:
        raise FleetError(f"{url} answered, but not as SGLang or smg answer ({str(exc)[:200]})") from exc
    except OSError as exc:
        raise Unreachable(f"{url}: {exc}") from exc
    return resp.status, resp.body.decode("utf-8", "replace")


def router_workers(router_url: str, api_key: str | None = None) -> dict[str, dict]:
    """The router's workers (see worker_states); Unreachable when it does not answer, FleetError on 401/403 and on
    an answer that is not smg's worker list."""
    status, body = _get(router_url.rstrip("/") + "/workers", api_key)
    if status in (401, 403):
        raise FleetError(
            f"the router at {router_url} refused the control-plane key (HTTP {status}): set "
            "sglang_router_admin_api_key to one of its --control-plane-api-keys"
        )
    if status != 200:
        raise FleetError(f"the router at {router_url} answered GET /workers with HTTP {status}: {body[:200]}")
    try:
        return worker_states(json.loads(body))
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's stack
        raise FleetError(
            f"the router at {router_url} did not answer GET /workers with smg's worker list ({str(exc)[:200]}): is"
            " sglang_router_port the port of the smg router on that host?"
        ) from exc


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
        try:
            running = in_flight(body) if status == 200 else None
        except ValueError as exc:
            raise FleetError(
                f"{server_url}/metrics is not SGLang's ({exc}): another program answers at the URL the host's"
                " server record names; stop it, or redeploy the server"
            ) from exc
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
