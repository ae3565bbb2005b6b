"""One trace from the captures of several SGLang servers (a fleet's replicas behind the smg router, or one server):
each host's finished requests, merged by arrival, bounded as one capture (seconds of arrivals, requests, bytes),
hash ids numbered across hosts (each host sends its blocks' digests, so a prefix two replicas served is one id).
Each request a replica finished is one line: the router sends a client request on to one replica and retries
only after an error answer or a refused connection (smg 1.13.0), which SGLang does not log as a finished request;
the exception is a request SGLang aborts with an error status after it started (it logs it as finished, cut short),
which smg may send again, so it is in the trace twice. The router's view, where a fleet has one, says how many client
requests it answered in the window: what the arrivals at the replicas are checked against."""

from __future__ import annotations

import json
from typing import NamedTuple

from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace


class Part(NamedTuple):
    """One host's capture: records in ms from its first arrival, hash ids its blocks' digests."""

    host: str
    start: float  # its first arrival, seconds since the epoch (the host's clock)
    records: list
    window: tuple  # (start, end) of its capture, seconds since the epoch
    texts: list | None = None  # the prompts' text in its records' order, where asked


class Merged(NamedTuple):
    records: list  # the trace: ms from the first arrival, hash ids numbered
    texts: list | None
    stop: str | None  # why the merged trace was cut
    hosts: dict  # requests kept per host
    outside: int  # requests left out: they arrived outside the window every host captured


def merge(parts: list, seconds: float, max_requests: int, max_bytes: int = trace.MAX_TRACE_BYTES) -> Merged:
    """The hosts' requests that arrived in the window every host captured (from the latest start to the earliest end:
    a host that started late, or stopped early at its request bound, saw only that) as one trace in order of arrival,
    cut at ``seconds`` after the first arrival, at ``max_requests`` and at ``max_bytes`` of trace text."""
    rows = sorted((p.start * 1000 + r.timestamp, i, j) for i, p in enumerate(parts) for j, r in enumerate(p.records))
    lo, hi = (t * 1000 for t in trace.common_window(p.window for p in parts))
    kept, stop, size, outside, ids = [], None, 0, 0, {}
    for at, i, j in rows:
        r = parts[i].records[j]
        if not lo <= at <= hi:
            outside += 1
            continue
        if kept and at - kept[0][0] > seconds * 1000:
            stop = f"{seconds:g} s of arrivals were captured"
            break
        if len(kept) >= max_requests:
            stop = f"{max_requests} requests were captured"
            break
        # numbered in the order first seen (as trace.numbered), counted into ids only once the record is kept
        fresh: dict = {}
        numbered = tuple(ids[d] if d in ids else fresh.setdefault(d, len(ids) + len(fresh)) for d in r.hash_ids)
        size += len(json.dumps([at - (kept[0][0] if kept else at), *r[1:3], numbered])) + 60  # field names
        if size > max_bytes:
            stop = f"the trace's {max_bytes >> 20} MiB were captured"
            break
        kept.append((at, i, j, numbered))
        ids |= fresh
    t0 = kept[0][0] if kept else 0.0
    records = [parts[i].records[j]._replace(timestamp=round(at - t0, 3), hash_ids=h) for at, i, j, h in kept]
    texts = [parts[i].texts[j] for _at, i, j, _h in kept] if all(p.texts is not None for p in parts) else None
    hosts = {p.host: 0 for p in parts}
    for _at, i, _j, _h in kept:
        hosts[parts[i].host] += 1
    return Merged(records, texts, stop, hosts, outside)


def origin(hosts: dict, router: dict | None) -> dict:
    """Where a capture was made, for its summary: the servers (requests each), the router's view (None: no router
    captured) and a note where the two disagree."""
    out = {"captured_at": "fleet" if router is not None or len(hosts) > 1 else "server", "hosts": hosts}
    if router is None:
        return out | {"router": None}
    answered = router["status"].get("2xx", 0)
    total = sum(hosts.values())
    note = None
    if answered != total:
        note = (
            f"the router answered {answered} generation requests with 2xx in the window and the replicas finished "
            f"{total}: a request sent to a replica directly, a bound that cut the trace, a request that failed at "
            "a replica after it finished there, or the router's log level above info (its response lines are INFO)"
        )
    return out | {"router": router, "router_note": note}
