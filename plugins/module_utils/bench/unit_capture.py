"""A capture from a deployed host (module sglang_traffic): the server runs as a systemd unit, so its request log is
the unit's journal. Turn request logging on (capture.switch), wait the duration or until N requests finished, read
the journal's lines of that window (bounded: capture.Limits), turn logging back to what /server_info said it was
(no capture where it does not say), and return the trace's text. The API key goes as a header only; the log lines'
text only where asked."""

# journalctl's output is streamed and bounded as it comes (run_command reads it whole).
# pylint: disable=ansible-bad-function
from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import tempfile
import time

from .. import server_http
from ..files import write_file
from ..watchdog import env_value
from . import capture, trace

POLL_S = 2.0  # how often the journal is counted while waiting for N requests
LOGGING_KEYS = ("log_requests", "log_requests_level", "log_requests_format")
OFF = {"log_requests": False, "log_requests_level": 2, "log_requests_format": "text"}  # SGLang's defaults


def keys(env_file: str, api_key: str | None) -> tuple:
    """(API key, key for /configure_logging: the admin key where the server has one) from the option or the
    server's 0600 environment file (SGLANG_API_KEY, SGLANG_ADMIN_API_KEY)."""
    key = api_key or (env_value(env_file, "SGLANG_API_KEY") if env_file and os.path.exists(env_file) else "")
    admin = env_value(env_file, "SGLANG_ADMIN_API_KEY") if env_file and os.path.exists(env_file) else ""
    return key or None, admin or key or None


def found_logging(url: str, api_keys: tuple) -> dict:
    """The server's request-logging settings as GET /server_info gives them (its launch flags; asked with each key
    in turn), SGLang's defaults for the level and format where it does not say: what the capture restores.
    ValueError when it does not say whether logging is on: the capture would not know what to set back."""
    info = None
    for key in dict.fromkeys(api_keys):
        info = server_http.get_json(server_http.Endpoint.parse(url), "/server_info", key)
        if isinstance(info, dict):
            break
    if not isinstance(info, dict) or not isinstance(info.get("log_requests"), bool):
        raise ValueError(
            f"GET /server_info at {url} did not say whether request logging is on, so the capture could not set it "
            "back: not started. Give the keys the server takes (SGLANG_API_KEY and SGLANG_ADMIN_API_KEY in its "
            "environment file, or sglang_api_key)"
        )
    out = dict(OFF)
    out["log_requests"] = info["log_requests"]
    if info.get("log_requests_level") in (0, 1, 2, 3) and not isinstance(info.get("log_requests_level"), bool):
        out["log_requests_level"] = info["log_requests_level"]
    if info.get("log_requests_format") in ("json", "text"):
        out["log_requests_format"] = info["log_requests_format"]
    return out


def restore(url: str, admin_key: str | None, settings: dict) -> None:
    resp = server_http.request(server_http.Endpoint.parse(url), "POST", "/configure_logging", settings, admin_key, 30.0)
    if resp.status != 200:
        raise ValueError(f"POST /configure_logging at {url} answered {resp.status} when restoring {settings}")


def journal_lines(service: str, since: float, until: float | None, limits: capture.Limits):
    """The unit's journal messages from ``since`` (seconds since the epoch) to ``until``, line by line, each at
    most capture.MAX_LINE_BYTES (longer ones cut, so unparsed), stopped past the limits' log bytes."""
    argv = ["journalctl", "-u", service, "--since", f"@{math.floor(since)}", "-o", "cat", "--all", "--no-pager"]
    argv += ["--until", f"@{math.ceil(until)}"] if until else []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        read = 0
        while read <= limits.log_bytes and (raw := proc.stdout.readline(capture.MAX_LINE_BYTES + 1)):
            read += len(raw)
            yield raw.decode("utf-8", "replace").rstrip("\n")
    finally:
        proc.kill()
        proc.wait()


def _stopped(signum, _frame) -> None:
    raise InterruptedError(f"stopped by signal {signum} during the capture; request logging was set back")


def finished_count(service: str, since: float, limits: capture.Limits) -> int:
    return sum(
        capture.EVENT in line and not capture.not_traffic(line) for line in journal_lines(service, since, None, limits)
    )


def run(
    url: str,
    service: str,
    env_file: str = "",
    api_key: str | None = None,
    limits: capture.Limits | None = None,
    keep_text: bool = False,
    clock=time,
    hash_key: bytes | None = None,
) -> dict:
    """Capture the unit's traffic for limits.seconds or until limits.requests finished; {trace: its JSONL text (hash
    ids numbered here, or with ``hash_key``, the controller's secret for this capture, the block digests keyed with it
    (capture.keyed): the controller numbers them, across hosts where a fleet is captured), start: its first
    arrival (seconds since the epoch), window: [start, end] of the capture, summary, requests, hashed, unparsed:
    request.finished lines that were not read (a journal line cut at journald's LineMax), probes: health checks and
    probes left out, stop, restored, text_file: a 0600 file of the prompts' text (keep_text) or None}."""
    limits = limits or capture.Limits()
    key, admin = keys(env_file, api_key)
    before = found_logging(url, (key, admin))
    start = clock.time()
    # A module stopped mid-capture by SIGTERM or SIGHUP restores first, or the server keeps writing every prompt to its
    # journal (level 3). (playbooks/traffic.yml runs it in the background: a stopped play leaves it to finish.)
    previous = {s: signal.signal(s, _stopped) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        capture.switch(url, admin, True)
        try:
            deadline = start + limits.seconds
            while (now := clock.time()) < deadline:
                clock.sleep(min(POLL_S, deadline - now))
                if finished_count(service, start, limits) >= limits.requests:
                    break
        finally:
            restore(url, admin, before)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    with contextlib.suppress(OSError, subprocess.SubprocessError):  # journald writes what it holds
        subprocess.run(["journalctl", "--sync"], capture_output=True, timeout=30, check=False)
    end = clock.time()
    lines = list(journal_lines(service, start, end + 1, limits))
    got, stop, probes = capture.collect(lines, limits, keep_text)
    unparsed = sum(capture.EVENT in line for line in lines) - len(got) - probes
    records = capture.to_trace(got, hash_key)
    text_file = None
    if keep_text:
        text = capture.text_jsonl(got)
        text_file = write_file(text, os.path.join(tempfile.mkdtemp(prefix="sglang-traffic-"), "text.jsonl"), 0o600)
    return {
        "trace": trace.dumps(records),
        "start": got[0].arrival if got else None,
        "window": [start, end],
        "summary": trace.summary(records) if records else None,
        "requests": len(records),
        "hashed": sum(1 for c in got if c.digests),
        "probes": probes,
        "unparsed": max(0, unparsed) if stop is None else None,
        "stop": stop,
        "restored": before,
        "text_file": text_file,
    }
