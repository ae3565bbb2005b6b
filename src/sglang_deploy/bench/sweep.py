"""The concurrency sweep: /health first, warm-up (not counted), then one level per concurrency with a fixed
number of requests and a forced output length, speculative accept length per level from /metrics counter
deltas. A timeout stops the level at once and the sweep with it; a server that stops answering ends the
sweep; either way the levels measured so far are kept and the rest are marked failed (`stopped`)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime

from .. import server_http
from ..readiness import check_output, dummy_weights
from .client import BENCH_VERSION, Connection, Target, stream_chat
from .metrics import (
    DEFINITIONS,
    OUTPUT_CHECK_CHARS,
    Timeline,
    level_metrics,
    parse_prometheus,
    server_info_accept_length,
    spec_accept_from_counters,
)
from .table import format_level_line
from .workload import (
    DEFAULT_CONCURRENCY,
    DEFAULT_INPUT_LEN,
    DEFAULT_OUTPUT_LEN,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WARMUP,
    build_prompt,
    chat_body,
    check_settings,
    default_requests,
)

EXAMPLES = 3


class ServerUnusable(Exception):
    """The server cannot be benchmarked now: not listening, not ready, hung, or not speaking HTTP."""


class _Probe:
    """The plain requests around the measured streams (server_http, in a thread), bounded by the timeout."""

    def __init__(self, target: Target, timeout: float):
        self.target = target
        self.timeout = timeout

    async def get(self, path: str) -> server_http.Response:
        """The response; ServerUnusable when there is none within the timeout."""
        ep = self.target.endpoint
        try:
            return await asyncio.to_thread(
                server_http.request, ep, "GET", path, api_key=self.target.api_key, timeout=self.timeout
            )
        except ConnectionRefusedError as exc:
            raise ServerUnusable(f"nothing listens at {ep.url} (connection refused)") from exc
        except TimeoutError as exc:
            detail = str(exc) if str(exc) not in ("", "timed out") else f"no answer within {self.timeout:g} s"
            raise ServerUnusable(f"GET {path} at {ep.url}: {detail} (is the server hung?)") from exc
        except OSError as exc:
            raise ServerUnusable(f"GET {path} at {ep.url}: {type(exc).__name__}: {exc}") from exc

    async def json(self, path: str):
        return (await self.get(path)).json()

    async def metrics(self) -> dict | None:
        """Counters of /metrics, None when the server does not export them (--enable-metrics off)."""
        resp = await self.get("/metrics")
        return parse_prometheus(resp.body.decode("utf-8", "replace")) if resp.status == 200 else None

    async def check_health(self) -> None:
        """ServerUnusable unless GET /health answers 200 (SGLang: 503 while starting or unhealthy)."""
        resp = await self.get("/health")
        if resp.status != 200:
            text = resp.body.decode("utf-8", "replace").strip().replace("\n", " ")[:120]
            raise ServerUnusable(
                f"{self.target.endpoint.url} is not ready: GET /health answered {resp.status}"
                f"{': ' + text if text else ''}; wait until it answers 200 or read the server's log"
            )


class _Run:
    def __init__(
        self,
        target: Target,
        model: str | None,
        input_len: int,
        output_len: int,
        timeout: float,
        min_tokens: bool,
        dummy: bool,
    ):
        self.target = target
        self.dummy = dummy  # the server loads random weights: its text is judged by check_output's dummy rule
        self.model = model
        self.input_len = input_len
        self.output_len = output_len
        self.timeout = timeout
        self.min_tokens = min_tokens
        self.emulated_header = False
        self.next_index = 0
        self.connections_opened = 0

    def bodies(self, n: int) -> list:
        out = []
        for _ in range(n):
            prompt = build_prompt(self.next_index, self.input_len)
            body = chat_body(self.model, prompt, self.output_len, min_tokens=self.min_tokens)
            out.append(json.dumps(body).encode())
            self.next_index += 1
        return out

    async def level(self, concurrency: int, n_requests: int) -> tuple:
        """Run n_requests with `concurrency` workers, one connection each, opened before timing.
        (timelines, stop reason or None): the first request without an answer within the timeout stops the
        level; requests cut short or never sent then count as failed."""
        bodies = self.bodies(n_requests)
        timelines: list = [None] * n_requests
        conns = [Connection(self.target) for _ in range(min(concurrency, n_requests))]
        opening = (asyncio.wait_for(c.open(), min(self.timeout, server_http.CONNECT_TIMEOUT_S)) for c in conns)
        results = await asyncio.gather(*opening, return_exceptions=True)
        failed_open = [r for r in results if isinstance(r, BaseException)]
        if failed_open and len(failed_open) == len(conns):
            reason = f"cannot connect to {self.target.endpoint.url}: {type(failed_open[0]).__name__} {failed_open[0]}"
            return [Timeline(error=reason) for _ in range(n_requests)], reason
        counter = iter(range(n_requests))
        stop: list = []

        async def worker(conn: Connection):
            for i in counter:
                try:
                    tl, emulated = await stream_chat(conn, bodies[i], self.timeout, self.model)
                except Exception as exc:  # noqa: BLE001 - a request's failure, never a silently ended worker
                    now = time.perf_counter()
                    tl = Timeline(t_send=now, t_end=now, error=f"client error: {type(exc).__name__}: {exc}"[:200])
                    emulated = False
                    conn.abort()
                self.emulated_header |= emulated
                timelines[i] = tl
                if tl.timed_out:
                    stop.append(f"a request got no answer within the timeout ({self.timeout:g} s) at c={concurrency}")
                    for task in tasks:
                        if task is not asyncio.current_task():
                            task.cancel()
                    return

        tasks = [asyncio.create_task(worker(c)) for c in conns]
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for c in conns:
                self.connections_opened += c.opened
                if stop:  # a hung server never acknowledges a polite close
                    c.abort()
                else:
                    await c.close()
        now = time.perf_counter()
        for i, tl in enumerate(timelines):
            if tl is None:
                timelines[i] = Timeline(t_send=now, t_end=now, error="cut short: the level stopped at a timeout")
        return timelines, (stop[0] if stop else None)


_SERVER_INFO_KEYS = (
    "version",
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "attention_backend",
    "moe_runner_backend",
    "max_running_requests",
    "load_format",
    "emulated",
)


def output_check(timelines: list, dummy: bool = False) -> dict:
    """Completed responses whose text the server's weights do not explain (readiness.check_output), as a count
    and the first examples. With dummy weights, `tolerated` counts the answers only real weights would fail."""
    bad, tolerated = [], 0
    for i, t in enumerate(timelines):
        if t.ok:
            text = "".join(t.text)[:OUTPUT_CHECK_CHARS]
            problem = check_output(text, dummy)
            if problem:
                bad.append({"request": i, "check": problem[0], "detail": problem[1], "output": text[:80]})
            elif dummy and check_output(text):
                tolerated += 1
    return {"count": len(bad), "examples": bad[:EXAMPLES], "dummy_weights": dummy, "tolerated": tolerated}


def _not_run(concurrency: int, n: int, output_len: int, reason: str) -> dict:
    m = level_metrics([Timeline(error=f"not run: {reason}") for _ in range(n)], concurrency, output_len)
    m.update(output_check=output_check([]), spec_accept_length=None, stopped=reason)
    return m


async def _measure(run: _Run, probe: _Probe, concurrency: int, n: int) -> dict:
    """One level; its `stopped` says why the sweep cannot go on after it (None: it can)."""
    before = await probe.metrics()
    cum_before = None if before else server_info_accept_length(await probe.json("/server_info"))
    timelines, stopped = await run.level(concurrency, n)
    m = level_metrics(timelines, concurrency, run.output_len)
    m["output_check"] = output_check(timelines, run.dummy)
    m["spec_accept_length"] = None
    m["stopped"] = stopped
    if stopped:
        return m
    try:
        after = await probe.metrics()
        spec = spec_accept_from_counters(before, after)
        if spec is not None:
            m["spec_accept_length"] = {"value": spec, "source": "metrics_delta"}
        else:
            cum = server_info_accept_length(await probe.json("/server_info"))
            if cum is not None:
                m["spec_accept_length"] = {"value": cum, "before": cum_before, "source": "server_info_cumulative"}
        if m["failed"]:
            await probe.check_health()
    except ServerUnusable as exc:
        m["stopped"] = str(exc)
    return m


async def run_benchmark_async(
    url: str,
    *,
    api_key: str | None = None,
    model: str | None = None,
    concurrency=DEFAULT_CONCURRENCY,
    requests: int | None = None,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    warmup: int = DEFAULT_WARMUP,
    timeout: float = DEFAULT_TIMEOUT_S,
    min_tokens: bool = False,
    context: dict | None = None,
    progress=None,
) -> dict:
    """The sweep; the result dict (see DEFINITIONS). `requests` None -> default_requests(c) per level;
    min_tokens also sends min_tokens = output_len (for servers that stop early despite ignore_eos; it slows
    SGLang's decoding, so figures are then not comparable with bench_serving's);
    progress(str) gets a line per level. ValueError for unusable settings (nothing is sent), ServerUnusable
    when the server cannot be benchmarked (nothing was measured)."""
    levels_c = check_settings(concurrency, requests, input_len, output_len, warmup, timeout)
    server_http.check_api_key(api_key)
    target = Target(server_http.Endpoint.parse(url), api_key or None)
    probe = _Probe(target, timeout)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    started = datetime.now(UTC)
    await probe.check_health()
    info = await probe.json("/server_info") or await probe.json("/get_server_info")
    if not model:
        model = (info or {}).get("served_model_name") or server_http.first_model(await probe.json("/v1/models"))
    run = _Run(target, model, input_len, output_len, timeout, min_tokens, dummy_weights(info))

    warm, warm_stop = await run.level(min(warmup, max(levels_c)), warmup) if warmup > 0 else ([], None)
    warm_failed = [t.error for t in warm if not t.ok]
    if warm_stop or (warm and len(warm_failed) == len(warm)):
        raise ServerUnusable(f"the warm-up failed: {warm_stop or warm_failed[0]}")

    levels, stopped = [], None
    for c in levels_c:
        n = requests or default_requests(c)
        if stopped:
            levels.append(_not_run(c, n, output_len, stopped))
            continue
        try:
            m = await _measure(run, probe, c, n)
        except ServerUnusable as exc:
            m = _not_run(c, n, output_len, str(exc))
        stopped = m["stopped"]
        levels.append(m)
        if progress:
            progress(format_level_line(m))

    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    emulated = bool((info or {}).get("emulated")) or run.emulated_header
    return {
        "tool": "sglang_deploy.bench",
        "version": BENCH_VERSION,
        "host": socket.gethostname(),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "url": url,
        "model": model,
        "server_emulated": emulated,
        "server_info": {k: info[k] for k in _SERVER_INFO_KEYS if isinstance(info, dict) and k in info},
        "workload": {
            "endpoint": "/v1/chat/completions (stream, stream_options.include_usage)",
            "input_len": input_len,
            "output_len": output_len,
            "forced_length": {
                "ignore_eos": True,
                "max_tokens": output_len,
                "min_tokens": output_len if min_tokens else None,
            },
            "temperature": 0.0,
            "prompt": "deterministic common-word text of about input_len tokens, unique prefix per request",
            "warmup_requests": warmup,
            "warmup_failed": len(warm_failed),
            "requests_per_level": {str(c): (requests or default_requests(c)) for c in levels_c},
            "timeout_s": timeout,
        },
        "client": {
            "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "connections_opened": run.connections_opened,
            "python": sys.version.split()[0],
        },
        "levels": levels,
        "stopped": stopped,
        "definitions": DEFINITIONS,
        "context": context or {},
    }


def run_benchmark(url: str, **kwargs) -> dict:
    """Synchronous wrapper of run_benchmark_async (same keyword arguments)."""
    return asyncio.run(run_benchmark_async(url, **kwargs))


def check_dest(dest: str) -> str:
    """The absolute path write_result would write; ValueError (before anything runs) when it cannot."""
    path = os.path.abspath(os.path.expanduser(dest))
    if os.path.isdir(path):
        raise ValueError(
            f"{dest} is a folder: give a file name for the result, e.g. {os.path.join(dest, 'bench.json')}"
        )
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        raise ValueError(f"{dest} exists and is not a regular file: give a new file name or a regular file to replace")
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write the result to {dest}: {parent} is not a writable folder")
    return path


def write_result(result: dict, dest: str) -> str:
    """Write the result as JSON (parent directories created); returns the absolute path."""
    return write_file(json.dumps(result, indent=2, default=str) + "\n", dest)


def write_file(data: str | bytes, dest: str, mode: int = 0o600, sync: bool = False) -> str:
    """Write ``data`` (text as UTF-8) to ``dest`` with ``mode``, parent directories created; returns the absolute
    path. A private temporary file beside it (not a fixed name a link could stand on), then an atomic rename, which
    replaces a link at ``dest`` instead of writing through it; ``sync``: on disk (file and folder) on return."""
    path = os.path.abspath(os.path.expanduser(dest))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(fh.fileno(), mode)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    if sync:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path
