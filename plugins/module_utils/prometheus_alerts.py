"""The alerts a Prometheus fires, from its HTTP API (stdlib only; module sglang_prometheus_alerts).

GET /api/v1/alerts on the monitoring host's own Prometheus, bounded in time, size and count: each firing alert as
name, instance, severity, since (its activeAt) and summary, text only and clipped. The controller checks the report
again (api.results.parse_alerts): what a host sends is data.
"""

from __future__ import annotations

from .server_http import Endpoint, request

MAX_BODY_BYTES = 4 << 20  # of the answer; a few thousand alerts fit
MAX_ALERTS = 100  # reported; the count of the others is kept
MAX_TEXT = 256  # characters of one field
FIELDS = ("name", "instance", "severity", "since", "summary")
TIMEOUT_S = 10.0


class AlertsError(ValueError):
    """Prometheus answered, but not as its API does."""


def firing(url: str, timeout: float = TIMEOUT_S) -> dict:
    """{"alerts": [up to MAX_ALERTS firing alerts], "firing": how many fire, "pending": how many wait for their
    `for:`}. OSError when nothing answers in time (server_http.request), AlertsError for another answer."""
    resp = request(Endpoint.parse(url), "GET", "/api/v1/alerts", timeout=timeout, max_bytes=MAX_BODY_BYTES)
    body = resp.json()
    if resp.status != 200 or not isinstance(body, dict) or body.get("status") != "success":
        raise AlertsError(f"GET /api/v1/alerts answered HTTP {resp.status} without Prometheus's success JSON")
    found = (body.get("data") or {}).get("alerts") if isinstance(body.get("data"), dict) else None
    if not isinstance(found, list):
        raise AlertsError("GET /api/v1/alerts answered without a list data.alerts")
    alerts = [a for a in found if isinstance(a, dict)]
    fire = [a for a in alerts if a.get("state") == "firing"]
    return {
        "alerts": [brief(a) for a in fire[:MAX_ALERTS]],
        "firing": len(fire),
        "pending": sum(a.get("state") == "pending" for a in alerts),
    }


def brief(alert: dict) -> dict:
    """One alert's FIELDS, each a string of at most MAX_TEXT characters ('' where it has none)."""
    labels = alert.get("labels") if isinstance(alert.get("labels"), dict) else {}
    notes = alert.get("annotations") if isinstance(alert.get("annotations"), dict) else {}
    raw = {
        "name": labels.get("alertname"),
        "instance": labels.get("instance"),
        "severity": labels.get("severity"),
        "since": alert.get("activeAt"),
        "summary": notes.get("summary"),
    }
    return {k: v[:MAX_TEXT] if isinstance(v, str) else "" for k, v in raw.items()}
