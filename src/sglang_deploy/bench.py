"""Benchmark engine for an SGLang OpenAI-compatible server (stdlib only, Python 3.10+).

Shared by the `sglang_bench` Ansible module (shipped as module_utils/sglang_bench.py, a symlink to this
file) and the `sglang-deploy bench` command. Parts:

* a minimal asyncio HTTP/1.1 client: one keep-alive connection per concurrent worker, chunked
  transfer-encoding and SSE parsing, a perf_counter timestamp taken as each SSE event is parsed;
* `run_benchmark()`: warm-up (not counted), then one level per concurrency with a fixed number of
  requests, fixed output length (ignore_eos + max_tokens + min_tokens) verified against
  `usage.completion_tokens`, speculative accept length per level from /metrics counter deltas;
* `level_metrics()`: the pure function turning recorded per-request timelines into the level figures;
* `format_table()`: the compact text table.

Every figure's formula is in DEFINITIONS, which is also written into each result.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import urlsplit

BENCH_VERSION = "1.0.0"

DEFINITIONS = {
    "t_send": "perf_counter when the request bytes are written to the connection (waiting for a "
    "concurrency slot or a connection is not counted)",
    "token_chunk": "an SSE chunk whose choices[].delta has non-empty `content` or `reasoning_content` "
    "(the role-only first chunk and the usage chunk are not token chunks)",
    "completion_tokens": "server-reported usage.completion_tokens (stream_options.include_usage=true; a "
    "request without usage counts as failed); includes reasoning tokens",
    "ttft_ms": "t_first_token_chunk - t_send",
    "ttfo_ms": "t_first_chunk_with_content - t_send (first non-reasoning output)",
    "e2e_ms": "t_stream_end - t_send, stream end = `data: [DONE]` (or end of body)",
    "tpot_ms": "(e2e - ttft) / (completion_tokens - 1), per request (requests with completion_tokens > 1)",
    "decode_tok_s_per_request": "(completion_tokens - 1) / (t_last_token_chunk - t_first_token_chunk), "
    "per request; the single-stream decode speed",
    "itl_ms": "gaps between consecutive token chunks of one request, pooled over the level's requests "
    "(a chunk-level step latency: with speculative decoding one chunk carries several tokens)",
    "tokens_per_chunk": "mean over requests of completion_tokens / token_chunks; `aggregate` = "
    "sum(completion_tokens) / sum(token_chunks)",
    "output_throughput_tok_s": "sum(completion_tokens of completed requests) / wall_s",
    "request_throughput_req_s": "completed / wall_s",
    "wall_s": "last request's stream end - first request's t_send, for the level",
    "achieved_concurrency": "sum(e2e) / wall_s (average requests in flight)",
    "stats": "{mean, p50, p90, p99}; percentiles by linear interpolation between closest ranks "
    "(numpy's default), over completed requests",
    "output_len_mismatch": "completed requests whose completion_tokens != the requested output_len: a "
    "count and the first examples, never averaged away",
    "reasoning": "reasoning_content chunks/chars vs content chunks/chars; `reasoning_tokens` = "
    "sum(usage.reasoning_tokens) when the server reports it",
    "spec_accept_length": "source `metrics_delta`: (delta sglang:generation_tokens_total) / (delta "
    "sglang:spec_verify_calls_total) between /metrics scrapes right before and after the level (this "
    "level alone; the prefill token counts, as in SGLang's per-request completion_tokens / spec_verify_ct); "
    "source `server_info_cumulative` (no usable /metrics): /server_info internal_states[0].avg_spec_accept_length "
    "read after the level (`value`) and before it (`before`): averages since server start, including earlier "
    "levels and warm-up",
    "prompt_tokens_mean": "mean usage.prompt_tokens (chat template included)",
}

_DEFAULT_PORTS = {"http": 80, "https": 443}
_json_decode = json.JSONDecoder().decode  # skips json.loads' per-call encoding detection
_PCTS = (50, 90, 99)


# --------------------------------------------------------------------------------------------------
# Metrics (pure)


@dataclass
class Timeline:
    """What one request recorded. Times are perf_counter seconds."""

    t_send: float = 0.0
    t_end: float = 0.0
    token_times: list = field(default_factory=list)  # time of each token chunk
    t_first_content: float | None = None
    content_chunks: int = 0
    content_chars: int = 0
    reasoning_chunks: int = 0
    reasoning_chars: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def percentile(sorted_values: list, pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) on an already sorted list."""
    if not sorted_values:
        return math.nan
    k = (len(sorted_values) - 1) * pct / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summarize(values: list) -> dict | None:
    """{mean, p50, p90, p99} of the values, None when there are none."""
    if not values:
        return None
    s = sorted(values)
    out = {"mean": sum(s) / len(s)}
    for p in _PCTS:
        out[f"p{p}"] = percentile(s, p)
    return out


def level_metrics(timelines: list, concurrency: int, output_len: int | None = None,
                  mismatch_examples: int = 3) -> dict:
    """Per-level figures from recorded timelines (see DEFINITIONS). Pure: no I/O, no clock."""
    done = [t for t in timelines if t.ok]
    failed = [t for t in timelines if not t.ok]
    errors: dict = {}
    for t in failed:
        errors[t.error] = errors.get(t.error, 0) + 1
    out: dict = {
        "concurrency": concurrency,
        "requests": len(timelines),
        "completed": len(done),
        "failed": len(failed),
        "errors": errors,
    }
    if timelines:
        wall = max(t.t_end for t in timelines) - min(t.t_send for t in timelines)
    else:
        wall = 0.0
    tokens = sum(t.completion_tokens for t in done)
    out["wall_s"] = wall
    out["output_tokens"] = tokens
    out["output_throughput_tok_s"] = tokens / wall if wall > 0 else None
    out["request_throughput_req_s"] = len(done) / wall if wall > 0 else None
    out["achieved_concurrency"] = sum(t.t_end - t.t_send for t in done) / wall if wall > 0 else None

    ttft, ttfo, e2e, tpot, decode, itl, tpc = [], [], [], [], [], [], []
    chunks_total = 0
    for t in done:
        e2e.append((t.t_end - t.t_send) * 1000.0)
        n = t.completion_tokens
        if t.token_times:
            first, last = t.token_times[0], t.token_times[-1]
            ttft.append((first - t.t_send) * 1000.0)
            chunks_total += len(t.token_times)
            tpc.append(n / len(t.token_times))
            prev = first
            for x in t.token_times[1:]:
                itl.append((x - prev) * 1000.0)
                prev = x
            if n > 1:
                tpot.append((t.t_end - first) * 1000.0 / (n - 1))
                if last > first:
                    decode.append((n - 1) / (last - first))
        if t.t_first_content is not None:
            ttfo.append((t.t_first_content - t.t_send) * 1000.0)
    out["decode_tok_s_per_request"] = summarize(decode)
    out["ttft_ms"] = summarize(ttft)
    out["ttfo_ms"] = summarize(ttfo)
    out["tpot_ms"] = summarize(tpot)
    out["itl_ms"] = summarize(itl)
    out["e2e_ms"] = summarize(e2e)
    out["tokens_per_chunk"] = {
        "mean": sum(tpc) / len(tpc) if tpc else None,
        "aggregate": tokens / chunks_total if chunks_total else None,
    }
    prompts = [t.prompt_tokens for t in done if t.prompt_tokens is not None]
    out["prompt_tokens_mean"] = sum(prompts) / len(prompts) if prompts else None

    bad = [(i, t) for i, t in enumerate(timelines)
           if t.ok and output_len is not None and t.completion_tokens != output_len]
    out["output_len_mismatch"] = {
        "count": len(bad),
        "expected": output_len,
        "examples": [{"request": i, "completion_tokens": t.completion_tokens} for i, t in bad[:mismatch_examples]],
    }
    reasoning_tokens = [t.reasoning_tokens for t in done if t.reasoning_tokens is not None]
    out["reasoning"] = {
        "reasoning_chunks": sum(t.reasoning_chunks for t in done),
        "reasoning_chars": sum(t.reasoning_chars for t in done),
        "content_chunks": sum(t.content_chunks for t in done),
        "content_chars": sum(t.content_chars for t in done),
        "reasoning_tokens": sum(reasoning_tokens) if reasoning_tokens else None,
    }
    return out


def parse_prometheus(text: str) -> dict:
    """Sum of every sample per metric name (labels folded) from Prometheus text exposition."""
    out: dict = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name_end = len(line)
        for i, ch in enumerate(line):
            if ch in "{ ":
                name_end = i
                break
        name = line[:name_end]
        rest = line[name_end:]
        if rest.startswith("{"):
            close = rest.rfind("}")
            rest = rest[close + 1:]
        parts = rest.split()
        if not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        out[name] = out.get(name, 0.0) + value
    return out


SPEC_TOKENS_COUNTER = "sglang:generation_tokens_total"
SPEC_VERIFY_COUNTER = "sglang:spec_verify_calls_total"


def spec_accept_from_counters(before: dict | None, after: dict | None) -> float | None:
    """Accept length of the interval between two /metrics scrapes, None when not measurable."""
    if not before or not after:
        return None
    try:
        d_tok = after[SPEC_TOKENS_COUNTER] - before[SPEC_TOKENS_COUNTER]
        d_ver = after[SPEC_VERIFY_COUNTER] - before[SPEC_VERIFY_COUNTER]
    except KeyError:
        return None
    if d_ver <= 0 or d_tok < 0:
        return None
    return d_tok / d_ver


def server_info_accept_length(info: dict | None) -> float | None:
    """internal_states[0].avg_spec_accept_length (PD-disaggregated layout: decode[0]...)."""
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        if isinstance(value, (int, float)):
            return float(value)
    return None


# --------------------------------------------------------------------------------------------------
# HTTP/1.1 client


class HttpError(Exception):
    """Transport or protocol failure."""


@dataclass
class Target:
    scheme: str
    host: str
    port: int
    base_path: str
    api_key: str | None = None

    @classmethod
    def from_url(cls, url: str, api_key: str | None = None) -> "Target":
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in _DEFAULT_PORTS:
            raise ValueError(f"unsupported URL scheme in {url!r}")
        if not parts.hostname:
            raise ValueError(f"no host in URL {url!r}")
        return cls(parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme],
                   parts.path.rstrip("/"), api_key or None)

    def head(self, method: str, path: str, body_len: int | None, accept: str = "application/json") -> bytes:
        host = self.host if self.port == _DEFAULT_PORTS[self.scheme] else f"{self.host}:{self.port}"
        lines = [f"{method} {self.base_path}{path} HTTP/1.1", f"Host: {host}", f"Accept: {accept}",
                 "Connection: keep-alive", "User-Agent: sglang-deploy-bench/" + BENCH_VERSION]
        if body_len is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {body_len}"]
        if self.api_key:
            lines.append(f"Authorization: Bearer {self.api_key}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ChunkedDecoder:
    """Incremental chunked transfer-encoding decoder: feed() whatever the socket gave; sink(bytes) gets
    each chunk's data; `done` after the last chunk. One socket read may hold many chunks (fewer awaits
    than readline/readexactly per chunk)."""

    __slots__ = ("sink", "buf", "done")

    def __init__(self, sink):
        self.sink = sink
        self.buf = b""
        self.done = False

    def feed(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, n, sink = 0, len(buf), self.sink
        while pos < n:
            crlf = buf.find(b"\r\n", pos)
            if crlf < 0:
                break
            size = int(buf[pos:crlf].split(b";", 1)[0], 16)
            if size == 0:
                end = buf.find(b"\r\n\r\n", crlf) if buf[crlf + 2:crlf + 4] != b"\r\n" else crlf
                if end < 0:
                    break  # trailers not complete yet
                self.done = True
                pos = end + 4
                break
            start, end = crlf + 2, crlf + 2 + size
            if n < end + 2:
                break
            sink(buf[start:end])
            pos = end + 2
        self.buf = buf[pos:]


class Connection:
    """One keep-alive HTTP/1.1 connection, reopened when the server closes it."""

    def __init__(self, target: Target):
        self.target = target
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.opened = 0  # connections opened, for the reuse figure

    async def open(self) -> None:
        if self.writer is not None and not self.writer.is_closing() and not self.reader.at_eof():
            return
        await self.close()
        ctx = ssl.create_default_context() if self.target.scheme == "https" else None
        self.reader, self.writer = await asyncio.open_connection(
            self.target.host, self.target.port, ssl=ctx, limit=1 << 20)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened += 1

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass
        self.reader = self.writer = None

    async def send(self, method: str, path: str, body: bytes | None = None,
                   accept: str = "application/json") -> float:
        """Write a request; returns perf_counter at the moment it was written."""
        await self.open()
        head = self.target.head(method, path, None if body is None else len(body), accept)
        self.writer.write(head + body if body else head)
        t = time.perf_counter()
        await self.writer.drain()
        return t

    async def read_head(self) -> tuple:
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise HttpError("connection closed before response") from exc
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError) as exc:
            raise HttpError(f"bad status line {lines[0]!r}") from exc
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        return status, headers

    async def read_body(self, headers: dict, sink) -> None:
        """Feed the body to sink(bytes) as it arrives; closes the connection if the server asked."""
        reader = self.reader
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                decoder = ChunkedDecoder(sink)
                while not decoder.done:
                    data = await reader.read(1 << 16)
                    if not data:
                        raise HttpError("connection closed inside chunked body")
                    decoder.feed(data)
            elif "content-length" in headers:
                remaining = int(headers["content-length"])
                while remaining > 0:
                    data = await reader.read(min(remaining, 1 << 16))
                    if not data:
                        raise HttpError("connection closed inside body")
                    remaining -= len(data)
                    sink(data)
            else:
                while True:
                    data = await reader.read(1 << 16)
                    if not data:
                        break
                    sink(data)
                await self.close()
        except (asyncio.IncompleteReadError, ValueError) as exc:
            await self.close()
            raise HttpError(f"bad response body: {exc}") from exc
        if headers.get("connection", "").lower() == "close":
            await self.close()

    async def get(self, path: str) -> tuple:
        """(status, headers, body bytes) of a GET."""
        await self.send("GET", path)
        status, headers = await self.read_head()
        parts: list = []
        await self.read_body(headers, parts.append)
        return status, headers, b"".join(parts)


async def http_get(target: Target, path: str, timeout: float = 10.0) -> tuple:
    """One GET on a fresh connection: (status, headers, body) or raises HttpError/OSError/TimeoutError."""
    conn = Connection(target)
    try:
        return await asyncio.wait_for(conn.get(path), timeout)
    finally:
        await conn.close()


async def http_get_json(target: Target, path: str, timeout: float = 10.0):
    """Parsed JSON of a 200 GET, None on any failure."""
    try:
        status, _, body = await http_get(target, path, timeout)
        return json.loads(body) if status == 200 else None
    except (OSError, HttpError, asyncio.TimeoutError, ValueError):
        return None


async def http_get_text(target: Target, path: str, timeout: float = 10.0) -> str | None:
    try:
        status, _, body = await http_get(target, path, timeout)
        return body.decode("utf-8", "replace") if status == 200 else None
    except (OSError, HttpError, asyncio.TimeoutError):
        return None


# --------------------------------------------------------------------------------------------------
# One streamed chat completion


class _SSERecorder:
    """Parses SSE lines as body bytes arrive and records the request's timeline."""

    __slots__ = ("tl", "buf", "done")

    def __init__(self, tl: Timeline):
        self.tl = tl
        self.buf = b""
        self.done = False

    def feed(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.startswith(b"data:"):
                self.event(line[5:].strip(), time.perf_counter())
        self.buf = buf[start:]

    def event(self, payload: bytes, t: float) -> None:
        tl = self.tl
        if payload == b"[DONE]":
            self.done = True
            tl.t_end = t
            return
        try:
            obj = _json_decode(payload.decode("utf-8"))
        except ValueError:
            tl.error = "unparseable SSE data"
            return
        if not isinstance(obj, dict):
            return
        if obj.get("error"):
            err = obj["error"]
            tl.error = "server error in stream: " + str(err.get("message", err) if isinstance(err, dict) else err)[:200]
            return
        usage = obj.get("usage")
        if usage:
            tl.completion_tokens = usage.get("completion_tokens")
            tl.prompt_tokens = usage.get("prompt_tokens")
            rt = usage.get("reasoning_tokens")
            if rt is None and isinstance(usage.get("completion_tokens_details"), dict):
                rt = usage["completion_tokens_details"].get("reasoning_tokens")
            tl.reasoning_tokens = rt
        for choice in obj.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            reasoning = delta.get("reasoning_content")
            if reasoning:
                tl.reasoning_chunks += 1
                tl.reasoning_chars += len(reasoning)
            if content:
                tl.content_chunks += 1
                tl.content_chars += len(content)
                if tl.t_first_content is None:
                    tl.t_first_content = t
            if content or reasoning:
                tl.token_times.append(t)


def chat_body(model: str | None, prompt: str, output_len: int, stream: bool = True) -> dict:
    """Request body forcing exactly output_len tokens at temperature 0."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": output_len,
        "min_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    if model:
        body["model"] = model
    return body


async def stream_chat(conn: Connection, body: bytes, timeout: float) -> tuple:
    """Send one streamed chat completion on conn; returns (Timeline, emulated header seen)."""
    tl = Timeline()
    rec = _SSERecorder(tl)
    emulated = False

    async def _go():
        nonlocal emulated
        tl.t_send = await conn.send("POST", "/v1/chat/completions", body, accept="text/event-stream")
        status, headers = await conn.read_head()
        emulated = headers.get("x-sglang-emulated", "").lower() == "true"
        if status != 200:
            parts: list = []
            await conn.read_body(headers, parts.append)
            text = b"".join(parts).decode("utf-8", "replace").strip().replace("\n", " ")
            tl.error = f"HTTP {status}: {text[:160]}"
            return
        await conn.read_body(headers, rec.feed)

    try:
        await asyncio.wait_for(_go(), timeout)
    except asyncio.TimeoutError:
        tl.error = f"timeout after {timeout:g} s"
        await conn.close()
    except (OSError, HttpError) as exc:
        tl.error = f"{type(exc).__name__}: {exc}"[:200]
        await conn.close()
    now = time.perf_counter()
    if not tl.t_end:
        tl.t_end = now
        if tl.error is None and not rec.done:
            tl.error = "stream ended without [DONE]"
    if tl.error is None and tl.completion_tokens is None:
        tl.error = "no usage chunk (stream_options.include_usage ignored)"
    if tl.error is None and not tl.token_times:
        tl.error = "no token chunks"
    return tl, emulated


# --------------------------------------------------------------------------------------------------
# Workload


_WORDS = ("time year people way day man thing woman life child world school state family student group "
          "country problem hand part place case week company system program question work government "
          "number night point home water room mother area money story fact month lot right study book "
          "eye job word business issue side kind head house service friend father power hour game line "
          "end member law car city name team minute idea kid body back parent face others level office "
          "door health person art war history party result change morning reason research girl guy moment "
          "air teacher force education").split()


def build_prompt(index: int, input_len: int) -> str:
    """A deterministic prompt of about input_len tokens (one common word ~ one token), unique per index
    at its start so the server's prefix cache cannot serve it from an earlier request."""
    words = [f"Request {index}: write a long essay using these words:"]
    n = max(0, input_len - 10)
    state = (index * 2654435761 + 12345) & 0xFFFFFFFF
    for _ in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        words.append(_WORDS[state % len(_WORDS)])
    return " ".join(words)


def default_requests(concurrency: int) -> int:
    return max(8, 2 * concurrency)


# --------------------------------------------------------------------------------------------------
# Runner


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


_SERVER_INFO_KEYS = ("version", "model_path", "served_model_name", "tp_size", "dp_size", "speculative_algorithm",
                     "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                     "attention_backend", "moe_runner_backend", "max_running_requests", "emulated")


async def run_benchmark_async(url: str, *, api_key: str | None = None, model: str | None = None,
                              concurrency=(1, 8, 32), requests: int | None = None, input_len: int = 256,
                              output_len: int = 256, warmup: int = 2, timeout: float = 600.0,
                              context: dict | None = None, progress=None) -> dict:
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
            m["spec_accept_length"] = ({"value": cum, "before": cum_before, "source": "server_info_cumulative"}
                                       if cum is not None else None)
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


# --------------------------------------------------------------------------------------------------
# Table


def _f(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _stat(level: dict, key: str, which: str = "p50"):
    s = level.get(key)
    return s.get(which) if s else None


def format_level_line(m: dict) -> str:
    return (f"c={m['concurrency']}: {m['completed']}/{m['requests']} ok, "
            f"{_f(m['output_throughput_tok_s'])} tok/s aggregate, "
            f"{_f(_stat(m, 'decode_tok_s_per_request', 'mean'))} tok/s per request")


TABLE_COLUMNS = ("conc", "ok/req", "out tok/s", "dec tok/s", "dec p50", "ttft p50", "ttft p99", "tpot p50",
                 "itl p50", "e2e p50", "tok/chk", "accept", "len!=")


def format_table(result: dict) -> str:
    """Compact text table of a result (CLI output, the module's `table`, the playbook summary)."""
    lines = []
    if result.get("server_emulated"):
        lines.append("EMULATED server: figures are synthetic")
    w = result.get("workload", {})
    lines.append(f"{result.get('model') or '?'} @ {result.get('url')}  in={w.get('input_len')} "
                 f"out={w.get('output_len')} tokens  (dec tok/s = per request decode, mean; times in ms)")
    rows = [TABLE_COLUMNS]
    sources = set()
    for m in result.get("levels", []):
        spec = m.get("spec_accept_length")
        if spec:
            sources.add(spec["source"])
        rows.append((
            str(m["concurrency"]),
            f"{m['completed']}/{m['requests']}",
            _f(m.get("output_throughput_tok_s")),
            _f(_stat(m, "decode_tok_s_per_request", "mean")),
            _f(_stat(m, "decode_tok_s_per_request", "p50")),
            _f(_stat(m, "ttft_ms")),
            _f(_stat(m, "ttft_ms", "p99")),
            _f(_stat(m, "tpot_ms"), 2),
            _f(_stat(m, "itl_ms"), 2),
            _f(_stat(m, "e2e_ms"), 0),
            _f((m.get("tokens_per_chunk") or {}).get("aggregate"), 2),
            _f(spec["value"], 2) if spec else "-",
            str(m["output_len_mismatch"]["count"]),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_COLUMNS))]
    for r in rows:
        lines.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(r)))
    for m in result.get("levels", []):
        if m["failed"]:
            first = next(iter(m["errors"]))
            lines.append(f"c={m['concurrency']}: {m['failed']} failed, e.g. {first}")
        mm = m["output_len_mismatch"]
        if mm["count"]:
            ex = mm["examples"][0]
            lines.append(f"c={m['concurrency']}: {mm['count']} responses not {mm['expected']} tokens, "
                         f"e.g. request {ex['request']} had {ex['completion_tokens']}")
    if sources:
        lines.append("accept length source: " + ", ".join(sorted(sources)))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Concurrency levels (sglang-deploy bench --concurrency)


def parse_concurrency(text: str) -> list:
    """'1,8,32' -> [1, 8, 32]; ValueError on anything else."""
    levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    if not levels or min(levels) < 1:
        raise ValueError(f"bad concurrency list {text!r}")
    return levels
