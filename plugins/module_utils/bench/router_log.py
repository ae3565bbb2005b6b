"""The smg router's view of a capture's window (module sglang_router_traffic): the client requests it answered, read
from its journal. smg 1.13.0 logs one line per client request at INFO, its default, whatever the format (text, as
the role runs it, or --log-json): the span `http_request{method, path, request_id, status_code, latency}` of target
`smg::response` (a second one where the client closed a finished stream early: not counted). No token counts, no
body; a retry to another worker is not a line of its own (the request's line is its last answer). Its timestamps
are whole seconds, so the arrivals come from the replicas; the router gives how many client requests there were and
how they were answered. Kept: counts by status class and path; never the request ids. smg has no runtime log switch
(no /configure_logging, no log-level route), so nothing is turned on."""

from __future__ import annotations

import json
import re

from . import capture, trace, unit_capture

# The requests a replica logs as request.finished: the generation routes smg forwards.
GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses")
TARGET = "smg::response"
# A streamed request whose client closed the connection after the stream's end (after [DONE]) has a second
# smg::response line, of this message: the request was counted on its own line, not again.
_CLOSED = "client closed the connection before the response stream ended"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # smg colours its text lines even off a terminal (NO_COLOR too)
# The span as smg 1.13.0 writes it, its fields in this fixed order (tests/fixtures/smg-1.13.0-request-log.txt). The
# path and the request id are the client's: a path has no space (HTTP/1.1's request line) but may hold '"', '=', '}';
# the id is quoted with its quotes escaped. The whole span is matched, so a client cannot spell a field of its own.
_SPAN = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +[A-Z]+ http_request\{method=([A-Z]+) path=(\S+)"
    r'(?: version=\S+)?(?: module="smg")? request_id="(?:[^"\\]|\\.)*" status_code=(\d{3}) latency=(\d+)\}: '
    r"smg::response: (?!(?:\S+: )?" + _CLOSED + "$)"  # with or without the source's file:line
)


def parse_line(line: str) -> tuple | None:
    """(method, path, status) of one response line of smg's log (text or JSON), or None for any other line."""
    if TARGET not in line:
        return None
    line = _ANSI.sub("", line)
    if line.startswith("{"):
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            return None
        ours = isinstance(item, dict) and item.get("target") == TARGET and item.get("message") != _CLOSED
        span = item.get("span") if ours else None
        if not isinstance(span, dict) or span.get("name") != "http_request":
            return None
        method, path, status = span.get("method"), span.get("path"), span.get("status_code")
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            return None
    else:
        found = _SPAN.match(line)
        if found is None:
            return None
        method, path, status = found.group(1), found.group(2), int(found.group(3))
    if not isinstance(method, str) or not isinstance(path, str):
        return None
    return method, path.split("?", 1)[0], status


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
    """collect() of the unit's journal in the window every replica captured (trace.common_window, the window the
    merged trace keeps) of their capture windows ([start, end] in seconds since the epoch), with the window read."""
    if not windows:
        raise ValueError("no replica's capture window: the router's view needs the replicas' capture first")
    since, until = trace.common_window(windows)
    lines = unit_capture.journal_lines(service, since, until, limits or capture.Limits())
    return collect(lines) | {"window": [since, until]}
