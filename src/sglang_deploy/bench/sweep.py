"""The concurrency sweep: warm-up (not counted), then one level per concurrency with a fixed number of
requests and a forced output length, speculative accept length per level from /metrics counter deltas."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import sys
from datetime import datetime, timezone

from .client import BENCH_VERSION, Connection, HttpError, Target, http_get_json, http_get_text, stream_chat
from .metrics import DEFINITIONS, level_metrics, parse_prometheus, server_info_accept_length, spec_accept_from_counters
from .table import format_level_line
from .workload import build_prompt, chat_body, default_requests


class _Run:
    def __init__(self, target: Target, model: str | None, input_len: int, output_len: int, timeout: float):
        self.target = target
        self.model = model
        self.input_len = input_len
        self.output_len = output_len
        self.timeout = timeout
        self.emulated_header = False
        self.next_index = 0
        self.connections_opened = 0

    def bodies(self, n: int) -> list:
        out = []
        for _ in range(n):
            body = chat_body(self.model, build_prompt(self.next_index, self.input_len), self.output_len)
            out.append(json.dumps(body).encode())
            self.next_index += 1
        return out

    async def level(self, concurrency: int, n_requests: int) -> list:
        """Run n_requests with `concurrency` workers, one connection each, opened before timing."""
        bodies = self.bodies(n_requests)
        timelines: list = [None] * n_requests
        conns = [Connection(self.target) for _ in range(min(concurrency, n_requests))]
        results = await asyncio.gather(*(c.open() for c in conns), return_exceptions=True)
        failed_open = [r for r in results if isinstance(r, BaseException)]
        if failed_open and len(failed_open) == len(conns):
            raise HttpError(f"cannot connect to {self.target.host}:{self.target.port}: {failed_open[0]}")
        counter = iter(range(n_requests))

        async def worker(conn: Connection):
            for i in counter:
                tl, emulated = await stream_chat(conn, bodies[i], self.timeout)
                self.emulated_header |= emulated
                timelines[i] = tl

        try:
            await asyncio.gather(*(worker(c) for c in conns))
        finally:
            for c in conns:
                self.connections_opened += c.opened
                await c.close()
        return timelines


async def _scrape_metrics(target: Target) -> dict | None:
    text = await http_get_text(target, "/metrics")
    return parse_prometheus(text) if text else None


async def detect_model(target: Target) -> str | None:
    data = await http_get_json(target, "/v1/models")
    try:
        return data["data"][0]["id"]
    except (TypeError, KeyError, IndexError):
        return None


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
    "emulated",
)


async def run_benchmark_async(
    url: str,
    *,
    api_key: str | None = None,
    model: str | None = None,
    concurrency=(1, 8, 32),
    requests: int | None = None,
    input_len: int = 256,
    output_len: int = 256,
    warmup: int = 2,
    timeout: float = 600.0,
    context: dict | None = None,
    progress=None,
) -> dict:
    """The sweep. `requests` None -> default_requests(c) per level. progress(str) gets a line per level."""
    target = Target.from_url(url, api_key)
    if output_len < 2:
        raise ValueError("output_len must be at least 2 (decode speed needs two tokens)")
    levels_c = [int(c) for c in concurrency]
    if not levels_c or min(levels_c) < 1:
        raise ValueError("concurrency levels must be positive integers")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    started = datetime.now(timezone.utc)
    info = await http_get_json(target, "/server_info") or await http_get_json(target, "/get_server_info")
    if not model:
        model = (info or {}).get("served_model_name") or await detect_model(target)
    run = _Run(target, model, input_len, output_len, timeout)

    warm = []
    if warmup > 0:
        warm = await run.level(min(warmup, max(levels_c)), warmup)
    warm_failed = [t.error for t in warm if not t.ok]
    if warm and len(warm_failed) == len(warm):
        raise HttpError(f"all {len(warm)} warm-up requests failed; first: {warm_failed[0]}")

    levels = []
    for c in levels_c:
        n = requests if requests else default_requests(c)
        before = await _scrape_metrics(target)
        cum_before = None if before else server_info_accept_length(await http_get_json(target, "/server_info"))
        timelines = await run.level(c, n)
        after = await _scrape_metrics(target)
        m = level_metrics(timelines, c, output_len)
        spec = spec_accept_from_counters(before, after)
        if spec is not None:
            m["spec_accept_length"] = {"value": spec, "source": "metrics_delta"}
        else:
            cum = server_info_accept_length(await http_get_json(target, "/server_info"))
            m["spec_accept_length"] = (
                {"value": cum, "before": cum_before, "source": "server_info_cumulative"} if cum is not None else None
            )
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
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "url": url,
        "model": model,
        "server_emulated": emulated,
        "server_info": {k: info[k] for k in _SERVER_INFO_KEYS if isinstance(info, dict) and k in info},
        "workload": {
            "endpoint": "/v1/chat/completions (stream, stream_options.include_usage)",
            "input_len": input_len,
            "output_len": output_len,
            "forced_length": {"ignore_eos": True, "max_tokens": output_len, "min_tokens": output_len},
            "temperature": 0.0,
            "prompt": "deterministic common-word text of about input_len tokens, unique prefix per request",
            "warmup_requests": warmup,
            "warmup_failed": len(warm_failed),
            "requests_per_level": {str(c): (requests or default_requests(c)) for c in levels_c},
        },
        "client": {
            "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "connections_opened": run.connections_opened,
            "python": sys.version.split()[0],
        },
        "levels": levels,
        "definitions": DEFINITIONS,
        "context": context or {},
    }


def run_benchmark(url: str, **kwargs) -> dict:
    """Synchronous wrapper of run_benchmark_async (same keyword arguments)."""
    return asyncio.run(run_benchmark_async(url, **kwargs))


def write_result(result: dict, dest: str) -> str:
    """Write the result as JSON (parent directories created); returns the absolute path."""
    path = os.path.abspath(os.path.expanduser(dest))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, sort_keys=False, default=str)
        fh.write("\n")
    os.replace(tmp, path)
    return path
