"""The smg router's view of a capture's window (module sglang_router_traffic): the client requests it answered, read
from its journal. smg 1.13.0 logs one line per client request at INFO, its default, whatever the format (text, as
the role runs it, or --log-json): the span `http_request{method, path, request_id, status_code, latency}` of target
`smg::response`. No token counts, no body; a retry to another worker is not a line of its own (the request's line
is its last answer). Its timestamps are whole seconds, so the arrivals come from the replicas; the router gives
how many client requests there were and how they were answered. Kept: counts by status class and path; never the
request ids. smg has no runtime log switch (no /configure_logging, no log-level route), so nothing is turned on."""

from __future__ import annotations

import json
import re

from . import capture, unit_capture

# The requests a replica logs as request.finished: the generation routes smg forwards.
GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses")
TARGET = "smg::response"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # smg colours its text lines even off a terminal (NO_COLOR too)
_FIELD = re.compile(r'\b(method|path|status_code)=("?)([^\s"}]+)\2')
_REQUEST_ID = re.compile(r'request_id="(?:[^"\\]|\\.)*"')  # a client's id, which may spell a field: cut first


def parse_line(line: str) -> tuple | None:
    """(method, path, status) of one response line of smg's log (text or JSON), or None for any other line."""
    if TARGET not in line:
        return None
    line = _ANSI.sub("", line)
    if line.startswith("{"):
        try:
            span = json.loads(line).get("span") or {}
        except (ValueError, RecursionError, AttributeError):
            return None
        fields = {k: span.get(k) for k in ("method", "path", "status_code")} if isinstance(span, dict) else {}
    else:
        line = _REQUEST_ID.sub("", line)
        start = line.find("{")
        fields = {}
        for k, _q, v in _FIELD.findall(line[start : line.find("}", start)] if start >= 0 else ""):
            fields.setdefault(k, v)
    status = fields.get("status_code")
    try:
        status = int(status)
    except (TypeError, ValueError):
        return None
    if not isinstance(fields.get("method"), str) or not isinstance(fields.get("path"), str):
        return None
    return fields["method"], fields["path"].split("?", 1)[0], status


def collect(lines) -> dict:
    """{requests: client generation requests (POST on GENERATION_PATHS), status: {2xx, 4xx, 5xx, ...: n}, paths:
    {path: n}, other: the router's other requests (health, readiness, models, admin)} of smg's log lines."""
    status, paths, other = {}, {}, 0
    for line in lines:
        got = parse_line(line)
        if got is None:
            continue
        method, path, code = got
        if method != "POST" or path not in GENERATION_PATHS:
            other += 1
            continue
        key = f"{code // 100}xx"
        status[key] = status.get(key, 0) + 1
        paths[path] = paths.get(path, 0) + 1
    return {"requests": sum(status.values()), "status": status, "paths": paths, "other": other}


def run(service: str, windows: list, limits: capture.Limits | None = None) -> dict:
    """collect() of the unit's journal from the earliest start to the latest end of the replicas' capture windows
    ([start, end] in seconds since the epoch), with the window read."""
    if not windows:
        raise ValueError("no replica's capture window: the router's view needs the replicas' capture first")
    since, until = min(w[0] for w in windows), max(w[1] for w in windows)
    lines = unit_capture.journal_lines(service, since, until, limits or capture.Limits())
    return collect(lines) | {"window": [since, until]}
