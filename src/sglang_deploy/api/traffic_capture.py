"""`traffic capture`: one host's traffic captured as a trace (playbooks/traffic.yml, module sglang_traffic). What the
host returns is checked as compare checks a result (a host is not trusted: bounded, every line parsed, the summary
computed here) before the controller writes it, mode 0600, through host/files.py's checked writer."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture as host_capture
from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace
from ansible_collections.sglang.deploy.plugins.module_utils.files import check_dest, write_file
from ansible_collections.sglang.deploy.plugins.module_utils.text import escaped
from ..paths import read_bounded
from . import runner
from .results import RunResult
from .runner import EventHandler

MAX_STOP_CHARS = 300


@dataclass
class CaptureResult:
    run: RunResult
    host: str | None = None
    path: str | None = None  # the trace written
    text_path: str | None = None  # the prompts' text, where asked
    summary: dict | None = None  # trace.summary of what was written
    stop: str | None = None  # why the host stopped early
    unparsed: int | None = None  # request.finished lines the host could not read
    probes: int | None = None  # health checks and probes the host left out (capture.NOT_TRAFFIC_RIDS)
    error: str | None = None
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.run.ok and self.error is None


def capture(
    out: str,
    duration: float = 60.0,
    max_requests: int = 10_000,
    keep_text: bool = False,
    inventory=None,
    limit: str | None = None,
    on_event: EventHandler | None = None,
) -> CaptureResult:
    """Capture ``duration`` seconds (or ``max_requests`` requests) of one host's traffic into the trace ``out``
    (0600); with ``keep_text`` the prompts' text too, into ``out`` + '.text.jsonl' (0600). ValueError before
    anything runs for a destination that cannot be written or bounds out of range."""
    if not 0 < duration <= 86_400 or not 1 <= max_requests <= trace.MAX_TRACE_RECORDS:
        raise ValueError(f"give --duration 1-86400 s and --max-requests 1-{trace.MAX_TRACE_RECORDS}")
    dest = check_dest(out)
    text_dest = check_dest(dest + ".text.jsonl") if keep_text else None
    fetched = Path(tempfile.mkdtemp(prefix="sglang-traffic-"))  # 0700
    try:
        extravars = {"sglang_traffic_duration": duration, "sglang_traffic_max_requests": max_requests}
        extravars |= {"sglang_traffic_keep_text": keep_text, "sglang_traffic_text_dir": str(fetched)}
        extravars["sglang_traffic_max_text_bytes"] = host_capture.MAX_TEXT_BYTES  # checked on the host first
        run = runner.run_playbook(
            "playbooks/traffic.yml",
            inventory=inventory,
            limit=limit,
            extravars=extravars,
            on_event=on_event,
            kind="traffic",
        )
        res = CaptureResult(run)
        if not run.ok:
            res.error = run.error or "the capture failed"
            return res
        try:
            _keep(res, run.data.get("sglang_traffic"), max_requests, dest, text_dest, fetched)
        except ValueError as exc:
            res.error = str(exc)
        return res
    finally:
        shutil.rmtree(fetched, ignore_errors=True)


def _keep(res: CaptureResult, found, max_requests: int, dest: str, text_dest: str | None, fetched: Path) -> None:
    """Check the host's answer and write the trace (and text); ValueError naming what is wrong."""
    if not isinstance(found, dict) or len(found) != 1:
        n = len(found) if isinstance(found, dict) else 0
        raise ValueError(f"{n} hosts answered: capture one host at a time (-l HOST)")
    ((host, item),) = found.items()
    res.host = escaped(host)
    if not isinstance(item, dict) or not isinstance(item.get("trace"), str):
        raise ValueError(f"{res.host} returned no trace text: not written")
    if len(item["trace"].encode()) > trace.MAX_TRACE_BYTES:
        raise ValueError(f"{res.host}'s trace is over {trace.MAX_TRACE_BYTES >> 20} MiB: not written")
    if not item["trace"].strip():
        raise ValueError(f"{res.host} served no request in the capture's window: nothing written")
    records = trace.parse(item["trace"], f"{res.host}'s trace", max_records=max_requests)
    stop = item.get("stop")
    res.stop = escaped(stop)[:MAX_STOP_CHARS] if isinstance(stop, str) else None
    res.unparsed, res.probes = (_count(item.get(k)) for k in ("unparsed", "probes"))
    if keep := text_dest is not None:
        text = _text(fetched / f"{host}.jsonl", len(records), res.host)
    res.path = trace.write(records, dest)
    res.summary = {"path": res.path, **trace.summary(records)}
    if keep:
        res.text_path = write_file(text, text_dest, 0o600)


def _count(value) -> int | None:
    """A count the host returned, or None where it is no count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(path: Path, n: int, host: str) -> str:
    """The fetched text file, checked: n lines of {"text": str}."""
    try:
        raw = read_bounded(path, host_capture.MAX_TEXT_BYTES, "the prompts' text (JSONL)")
    except OSError as exc:
        raise ValueError(f"no text came back from {host}: {exc.strerror or exc}") from exc
    lines = raw.decode("utf-8", "replace").splitlines()
    ok = len(lines) == n
    for line in lines if ok else ():
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            item = None
        ok = ok and isinstance(item, dict) and set(item) == {"text"} and isinstance(item["text"], (str, type(None)))
    if not ok:
        raise ValueError(f'the text {host} returned is not {n} lines of {{"text": ...}}: not written')
    return raw.decode("utf-8", "replace")
