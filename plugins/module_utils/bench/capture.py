"""A trace captured from a running SGLang server without a restart: POST /configure_logging turns its request
logging on (JSON lines, level 3: a request's token ids; 0.5.9 to 0.5.23 take the same three fields), each
`request.finished` line of its log becomes a trace record, and logging is turned back off. Kept per request: its
arrival (the line's time less the request's e2e_latency), its prompt and output token counts and its prefix blocks
as hashes of their token ids (trace.block_digests); no text, unless asked, then into a 0600 file of its own. Never
kept: the log's other fields (sampling parameters, headers, ids), the API key (sent as a header, never logged)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import NamedTuple

from .. import server_http
from ..files import write_file
from . import trace

EVENT = "request.finished"
LOG_LEVEL = 3  # the level whose lines hold every token id (2 cuts lists past 2048 items, 0 and 1 drop them)
MAX_LINE_BYTES = 64 << 20  # a line of a 1M-token prompt's ids and text
MAX_TEXT_BYTES = 256 << 20
# Requests that are no one's traffic, by their request id: SGLang's own /health_generate (and /health where it
# generates: HEALTH_CHECK_<hex>, input_ids [0]) and this project's probes (the stall watchdog's). Counted apart.
NOT_TRAFFIC_RIDS = ("HEALTH_CHECK_", server_http.PROBE_RID)
NOT_TRAFFIC = "not traffic"  # parse_line's answer for such a line


class Limits(NamedTuple):
    """A capture's bounds: seconds of arrivals after the first, requests, bytes of log lines read."""

    seconds: float = 600.0
    requests: int = 10_000
    log_bytes: int = 1 << 30


class Captured(NamedTuple):
    arrival: float  # seconds since the epoch
    input_length: int
    output_length: int
    digests: tuple  # trace.block_digests of its token ids; () when the line holds none or not all of them
    text: str | None  # only when asked


def switch(url: str, api_key: str | None, on: bool, timeout: float = 30.0) -> None:
    """Turn the server's request logging on (JSON, LOG_LEVEL) or off; ValueError naming the answer."""
    body = {"log_requests": on} | ({"log_requests_level": LOG_LEVEL, "log_requests_format": "json"} if on else {})
    resp = server_http.request(server_http.Endpoint.parse(url), "POST", "/configure_logging", body, api_key, timeout)
    if resp.status != 200:
        raise ValueError(
            f"POST /configure_logging at {url} answered {resp.status}: give the admin API key where the server has "
            "one (--admin-api-key), else its API key"
        )


def not_traffic(line: str) -> bool:
    """Whether a log line's request id is a health check's or probe's, by its text as SGLang's JSON writes it (a quick
    look without parsing; parse_line decides)."""
    return any(f'"rid":{space}"{rid}' in line for rid in NOT_TRAFFIC_RIDS for space in ("", " "))


def parse_line(line: str, keep_text: bool = False) -> Captured | str | None:
    """The record of one log line (a journal's or SGLang's prefix before the JSON allowed); NOT_TRAFFIC for a health
    check's or probe's request; None for any other line."""
    start = line.find('{"timestamp"')
    if start < 0 or len(line) > MAX_LINE_BYTES:
        return None
    try:
        item, _end = json.JSONDecoder().raw_decode(line, start)
    except (ValueError, RecursionError):
        return None
    if not isinstance(item, dict) or item.get("event") != EVENT:
        return None
    if isinstance(item.get("rid"), str) and item["rid"].startswith(NOT_TRAFFIC_RIDS):
        return NOT_TRAFFIC
    obj = item.get("obj") if isinstance(item.get("obj"), dict) else {}
    meta = (item.get("out") or {}).get("meta_info") if isinstance(item.get("out"), dict) else None
    try:
        finished = datetime.fromisoformat(item["timestamp"]).timestamp()  # the server's local time, as it logs it
        n_in, n_out, e2e = int(meta["prompt_tokens"]), int(meta["completion_tokens"]), float(meta["e2e_latency"])
    except (KeyError, TypeError, ValueError):
        return None
    if n_in < 1 or n_out < 0:
        return None
    ids = obj.get("input_ids")
    whole = isinstance(ids, list) and len(ids) == n_in and all(isinstance(t, int) for t in ids)
    text = obj.get("text") if keep_text and isinstance(obj.get("text"), str) else None
    return Captured(finished - e2e, n_in, n_out, tuple(trace.block_digests(ids)) if whole else (), text)


def collect(lines, limits: Limits | None = None, keep_text: bool = False) -> tuple:
    """(the records of the lines, sorted by arrival, within the limits (default: Limits()); why it stopped early or
    None; how many health checks and probes were left out)."""
    limits = limits or Limits()
    out, read, stop, skipped = [], 0, None, 0
    for line in lines:
        read += len(line)
        if read > limits.log_bytes:
            stop = f"the log's {limits.log_bytes} bytes were read"
            break
        rec = parse_line(line, keep_text)
        if rec is None or rec is NOT_TRAFFIC:
            skipped += rec is NOT_TRAFFIC
            continue
        if out and rec.arrival - out[0].arrival > limits.seconds:
            stop = f"{limits.seconds:g} s of arrivals were captured"
            break
        out.append(rec)
        if len(out) >= limits.requests:
            stop = f"{limits.requests} requests were captured"
            break
    return sorted(out, key=lambda r: r.arrival), stop, skipped


def keyed(digest: bytes, key: bytes) -> int:
    """A block digest keyed with a capture's secret: the first 8 bytes of HMAC-SHA256(key, digest), as an integer. The
    same on every host given the same key, and no use to anyone without it for confirming a guessed prompt (a raw
    digest is an unsalted hash of the token ids)."""
    return int.from_bytes(hmac.new(key, digest, hashlib.sha256).digest()[:8], "big")


def to_trace(captured: list, key: bytes | None = None) -> list:
    """The records as a trace: timestamps in ms from the first arrival, hash ids numbered (trace.numbered), or with
    ``key`` (a capture's secret, the controller's) the digests keyed with it (keyed(): the same on every host given
    that key, what the controller merges hosts' traces on and numbers)."""
    digests = [c.digests for c in captured]
    ids = trace.numbered(digests) if key is None else [tuple(keyed(d, key) for d in ds) for ds in digests]
    t0 = captured[0].arrival if captured else 0.0
    return [
        trace.Record(round((c.arrival - t0) * 1000, 3), c.input_length, max(1, c.output_length), h)
        for c, h in zip(captured, ids)
    ]


def text_jsonl(captured: list) -> str:
    """The prompts' text as JSONL {"text"} in the trace's order; ValueError past MAX_TEXT_BYTES."""
    text = "".join(json.dumps({"text": c.text}) + "\n" for c in captured)
    if len(text) > MAX_TEXT_BYTES:
        raise ValueError(f"the captured text is over {MAX_TEXT_BYTES >> 20} MiB: capture fewer requests")
    return text


def write(captured: list, dest: str, text_dest: str | None = None) -> dict:
    """The trace at dest (0600) and, where asked, the prompts' text at text_dest (0600, JSONL {"text"} in the
    trace's order); {trace, text, requests, hashed: requests whose prefix blocks are hashed}."""
    path = trace.write(to_trace(captured), dest)
    text_path = write_file(text_jsonl(captured), text_dest, 0o600) if text_dest else None
    return {
        "trace": path,
        "text": text_path,
        "requests": len(captured),
        "hashed": sum(1 for c in captured if c.digests),
    }
