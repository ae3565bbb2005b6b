"""The stall watchdog's steps at the smg router (host/watchdog.py): take the host out before it restarts, put it back
once it answers. Stdlib only; never raises: the restart goes ahead whatever the router says (a stalled server serves
nobody), and each step returns the line the watchdog logs.

smg's control plane (the same calls docs/fleet.md names): GET /workers lists the workers (fleet_probes.worker_states:
the file-discovery id, smg's own id, status), DELETE /workers/{smg id} takes one out, POST /workers {"url"} adds one;
each with the admin key. The roll's file discovery may list the host again by itself: rejoin adds it only where the
router does not list it, and the watchdog asks again each run until the router lists it (smg adds a worker
asynchronously: a POST answered 202 may still fail).
"""

from __future__ import annotations

from urllib.parse import quote

from .fleet_probes import FleetError, router_workers, wait_router
from .server_http import Endpoint, request

TIMEOUT_S = 10.0  # one control-plane request


def _call(settings, method: str, path: str, body=None) -> int:
    resp = request(Endpoint.parse(settings.router_url), method, path, body, settings.router_key or None, TIMEOUT_S)
    return resp.status


def leave(settings) -> str:
    """Take ``settings.worker_id`` out of the router and wait (drain_timeout_s at most) until it sends it nothing new."""
    try:
        states = router_workers(settings.router_url, settings.router_key or None)
        worker = states.get(settings.worker_id)
        if worker is None:
            return f"the router at {settings.router_url} does not list {settings.worker_id}: nothing to take out"
        status = _call(settings, "DELETE", f"/workers/{quote(str(worker.get('worker_id')), safe='')}")
        if status not in (200, 202, 204):
            return f"the router answered DELETE /workers with HTTP {status}: restarting {settings.worker_id} in it"
        wait_router(
            settings.router_url, settings.router_key or None, out=[settings.worker_id], timeout=settings.drain_timeout_s
        )
    except (FleetError, OSError, ValueError) as exc:
        return f"could not take {settings.worker_id} out of the router ({str(exc)[:300]}): restarting anyway"
    return f"took {settings.worker_id} out of the router at {settings.router_url}"


def rejoin(settings, api_key: str = "") -> tuple[bool, str]:
    """Put the host back into the router where it does not list it (by its id or its URL), with the server's API key
    (smg registers a worker it cannot query with a key never: a POST without one stays pending and blocks the next).
    (done, the line to log): done once the router lists it, or where the watchdog cannot put it back (no worker_url);
    a POST the router took is not done until a later run finds the host listed."""
    try:
        states = router_workers(settings.router_url, settings.router_key or None)
        if settings.worker_id in states or any(w.get("url") == settings.worker_url for w in states.values()):
            return True, f"{settings.worker_id} is in the router's list again"
        if not settings.worker_url:
            return (
                True,
                f"{settings.worker_id} is not in the router's list and no worker_url is set: run playbooks/router.yml",
            )
        body = {"url": settings.worker_url, **({"api_key": api_key} if api_key else {})}
        status = _call(settings, "POST", "/workers", body)
    except (FleetError, OSError, ValueError) as exc:
        return False, f"could not put {settings.worker_id} back into the router ({str(exc)[:300]}): trying again"
    if status in (200, 201, 202):
        return False, f"asked the router at {settings.router_url} to put {settings.worker_id} back"
    if status == 409:
        return False, f"the router is still adding {settings.worker_id}"
    return False, f"the router answered POST /workers with HTTP {status}: trying again (or run playbooks/router.yml)"
