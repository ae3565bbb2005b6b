"""`traffic capture`: the traffic of one SGLang server, or of a fleet's replicas and its smg router, captured as one
trace (playbooks/traffic.yml, modules sglang_traffic and sglang_router_traffic; the merge is
sglang_deploy.traffic.merge). What each host returns is checked as compare checks a result (a host is not trusted:
bounded, every line parsed, the summary computed here) before the controller writes it, mode 0600, through
host/files.py's checked writer."""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture as host_capture
from ansible_collections.sglang.deploy.plugins.module_utils.bench import router_log, trace
from ansible_collections.sglang.deploy.plugins.module_utils.files import check_dest, write_file
from ansible_collections.sglang.deploy.plugins.module_utils.text import escaped
from ..paths import read_bounded
from ..traffic import merge
from . import runner
from .results import RunResult
from .runner import EventHandler

MAX_STOP_CHARS = 300
MAX_HOSTS = 1024
MAX_COUNT = 10**9  # a count a host returns


@dataclass
class CaptureResult:
    run: RunResult
    host: str | None = None  # the host, or the hosts joined, the trace came from
    path: str | None = None  # the trace written
    text_path: str | None = None  # the prompts' text, where asked
    summary: dict | None = None  # trace.summary of what was written, with merge.origin: where it was captured
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
    """Capture ``duration`` seconds (or ``max_requests`` requests) of the traffic of the inventory's servers (``limit``:
    one of them) into the trace ``out`` (0600): one server's, or a fleet's replicas merged by arrival with the smg
    router's count of the window; with ``keep_text`` the prompts' text too, into ``out`` + '.text.jsonl' (0600).
    ValueError before anything runs for a destination that cannot be written or bounds out of range."""
    if not 0 < duration <= 86_400 or not 1 <= max_requests <= trace.MAX_TRACE_RECORDS:
        raise ValueError(f"give --duration 1-86400 s and --max-requests 1-{trace.MAX_TRACE_RECORDS}")
    dest = check_dest(out)
    text_dest = check_dest(dest + ".text.jsonl") if keep_text else None
    fetched = Path(tempfile.mkdtemp(prefix="sglang-traffic-"))  # 0700
    try:
        extravars = {"sglang_traffic_duration": duration, "sglang_traffic_max_requests": max_requests}
        extravars |= {"sglang_traffic_keep_text": keep_text, "sglang_traffic_text_dir": str(fetched)}
        extravars["sglang_traffic_max_text_bytes"] = host_capture.MAX_TEXT_BYTES  # checked on the host first
        # The hosts key their blocks' digests with a secret of this capture (raw digests would let whoever reads a
        # module result confirm a guessed prompt); the runner passes it as a secret variable and redacts it from the
        # events; it is written nowhere else and dropped with this call: the trace holds only the numbered ids.
        extravars["sglang_traffic_hash_secret"] = secrets.token_hex(32)
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
            found, router = run.data.get("sglang_traffic"), run.data.get("sglang_traffic_router")
            _keep(res, found, router, (duration, max_requests), dest, text_dest, fetched)
        except ValueError as exc:
            res.error = str(exc)
        return res
    finally:
        shutil.rmtree(fetched, ignore_errors=True)


def _keep(res: CaptureResult, found, router, bounds: tuple, dest: str, text_dest: str | None, fetched: Path) -> None:
    """Check the hosts' answers (and the router's), merge them and write the trace (and text); ValueError naming what
    is wrong. bounds: (seconds, requests) of the capture."""
    if not isinstance(found, dict) or not found:
        raise ValueError(
            "no SGLang server answered: the inventory, or the limit (-l), names no server (only the smg router, or "
            "nothing); a capture takes a server, or a fleet's replicas"
        )
    if len(found) > MAX_HOSTS:
        raise ValueError(f"{len(found)} hosts answered: a capture takes 1 to {MAX_HOSTS} servers")
    _within_budget(found, text_dest is not None, fetched)
    parts, stops, unparsed, probes = [], [], [], []
    text_left = [host_capture.MAX_TEXT_BYTES]  # what the hosts' text files may still hold, all together
    for host, item in sorted(found.items()):
        part, stop = _part(host, item, bounds[1], text_left if text_dest is not None else None, fetched)
        parts.append(part)
        stops += [f"{part.host}: {stop}" if len(found) > 1 else stop] if stop else []
        unparsed.append(_count(item.get("unparsed")))
        probes.append(_count(item.get("probes")))
    res.host = ", ".join(escaped(h) for h in sorted(found))
    merged = merge.merge(parts, *bounds)
    if not merged.records:
        raise ValueError(f"{res.host} served no request in the capture's window: nothing written")
    stops += [f"merged: {merged.stop}"] if merged.stop else []
    res.stop = escaped("; ".join(stops))[:MAX_STOP_CHARS] if stops else None
    res.unparsed = None if None in unparsed else sum(unparsed)
    res.probes = None if None in probes else sum(probes)
    text = None
    if merged.texts is not None and text_dest:
        text = "".join(json.dumps({"text": t}) + "\n" for t in merged.texts)
        if len(text) > host_capture.MAX_TEXT_BYTES:
            raise ValueError(f"the hosts' text is over {host_capture.MAX_TEXT_BYTES >> 20} MiB: capture fewer requests")
    window = trace.common_window(p.window for p in parts)
    where = merge.origin(merged.hosts, _router(router, window)) | {"outside_window": merged.outside}
    res.path = trace.write(merged.records, dest)
    res.summary = {"path": res.path, **trace.summary(merged.records), **where}
    if text is not None:
        res.text_path = write_file(text, text_dest, 0o600)


def _within_budget(found: dict, keep_text: bool, fetched: Path) -> None:
    """ValueError, before anything is parsed, where the hosts' traces (or the prompts' text files fetched) are over
    one capture's bounds all together: 256 MiB of trace text, 256 MiB of text, whatever the number of hosts."""
    size = sum(
        len(i["trace"].encode()) for i in found.values() if isinstance(i, dict) and isinstance(i.get("trace"), str)
    )
    if size > trace.MAX_TRACE_BYTES:
        raise ValueError(
            f"the hosts' traces are over {trace.MAX_TRACE_BYTES >> 20} MiB together: not written; capture fewer "
            "requests (--max-requests, --duration)"
        )
    if keep_text:
        files = [fetched / f"{host}.jsonl" for host in found]
        size = sum(f.stat().st_size for f in files if f.is_file())
        if size > host_capture.MAX_TEXT_BYTES:
            raise ValueError(
                f"the hosts' text is over {host_capture.MAX_TEXT_BYTES >> 20} MiB together: not written; capture "
                "fewer requests (--max-requests, --duration)"
            )


def _part(host: str, item, max_requests: int, text_left: list | None, fetched: Path) -> tuple:
    """(merge.Part, why the host stopped early or None) of one host's answer, checked; ``text_left``: [bytes the
    hosts' text may still hold], where the prompts' text was asked."""
    keep_text = text_left is not None
    name = escaped(host)
    if not isinstance(item, dict) or not isinstance(item.get("trace"), str):
        raise ValueError(f"{name} returned no trace text: not written")
    if len(item["trace"].encode()) > trace.MAX_TRACE_BYTES:
        raise ValueError(f"{name}'s trace is over {trace.MAX_TRACE_BYTES >> 20} MiB: not written")
    window = item.get("window")
    if not (
        isinstance(window, list) and len(window) == 2 and all(_epoch(t) for t in window) and window[0] <= window[1]
    ):
        raise ValueError(f"{name} returned no capture window ([start, end], seconds since the epoch): not written")
    if not item["trace"].strip():
        return merge.Part(name, 0.0, [], tuple(window), [] if keep_text else None), None
    records = trace.parse(item["trace"], f"{name}'s trace", max_records=max_requests)
    if not _epoch(item.get("start")):
        raise ValueError(f"{name} returned no first arrival (start, seconds since the epoch): not written")
    texts = _text(fetched / f"{host}.jsonl", len(records), name, text_left) if keep_text else None
    stop = item.get("stop")
    return merge.Part(name, float(item["start"]), records, tuple(window), texts), stop if isinstance(
        stop, str
    ) else None


def _epoch(value) -> bool:
    """Whether a host's value is a time in seconds since the epoch."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e11


def _router(found, window: tuple) -> dict | None:
    """The router's view (module sglang_router_traffic) checked, or None where no router was captured; ``window``:
    the one the merged trace keeps, which the router must have read."""
    if not found:
        return None
    if not isinstance(found, dict) or len(found) != 1:
        raise ValueError("more than one router answered: capture the replicas of one router")
    ((host, item),) = found.items()
    counts = {k: _count(item.get(k)) if isinstance(item, dict) else None for k in ("requests", "other")}
    status = item.get("status") if isinstance(item, dict) else None
    paths = item.get("paths") if isinstance(item, dict) else None
    ok = None not in counts.values() and isinstance(status, dict) and isinstance(paths, dict)
    ok = ok and all(k in {f"{n}xx" for n in range(1, 6)} and _count(v) is not None for k, v in status.items())
    ok = ok and all(k in router_log.GENERATION_PATHS and _count(v) is not None for k, v in paths.items())
    if not ok or sum(status.values()) != counts["requests"]:
        raise ValueError(f"the router {escaped(host)} returned no request counts by status and path: not written")
    read = item.get("window")
    if not (isinstance(read, list) and len(read) == 2 and all(_epoch(t) for t in read)) or any(
        abs(a - b) > 1e-3 for a, b in zip(read, window)
    ):
        raise ValueError(f"the router {escaped(host)} did not read the replicas' common window: not written")
    return {"host": escaped(host), **counts, "status": status, "paths": paths}


def _count(value) -> int | None:
    """A count the host returned, or None where it is no count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else None


def _text(path: Path, n: int, host: str, left: list) -> list:
    """The prompts' text of the fetched file, checked: n lines of {"text": str or null}; read bounded by left[0], the
    bytes the hosts' text may still hold all together (taken from it)."""
    try:
        raw = read_bounded(path, left[0], "the prompts' text (JSONL)")
    except OSError as exc:
        raise ValueError(f"no text came back from {host}: {exc.strerror or exc}") from exc
    left[0] -= len(raw)
    lines = raw.decode("utf-8", "replace").splitlines()
    texts = []
    for line in lines if len(lines) == n else ():
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            item = None
        if not (isinstance(item, dict) and set(item) == {"text"} and isinstance(item["text"], (str, type(None)))):
            break
        texts.append(item["text"])
    if len(texts) != n or len(lines) != n:
        raise ValueError(f'the text {host} returned is not {n} lines of {{"text": ...}}: not written')
    return texts
