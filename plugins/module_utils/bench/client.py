"""The benchmark's HTTP/1.1 client (asyncio, stdlib): one keep-alive connection per concurrent worker,
chunked transfer-encoding, and SSE parsing with a perf_counter timestamp taken as each event is parsed."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from dataclasses import dataclass

from ..server_http import Endpoint, HttpError, auth_headers
from .metrics import Timeline

BENCH_VERSION = "1.2.0"  # 1.2: bench_serving parity (no min_tokens by default, std/p95, input/total throughput)

_json_decode = json.JSONDecoder().decode  # skips json.loads' per-call encoding detection
HEAD_LIMIT = 1 << 20  # bytes of a response head (also the stream reader's buffer limit)
MAX_HEADERS = 100  # header lines (http.client's limit)
MAX_PENDING = 1 << 20  # bytes of an SSE line or a chunk-size line still without its end
MAX_ERROR_BODY = 1 << 16  # bytes kept of a non-200 answer
# An answer of at most max_tokens tokens (the request's cap) has at most EVENTS_PER_TOKEN x max_tokens + EXTRA_EVENTS
# SSE events and EVENT_BYTES a such event (SGLang sends about one event a token, of 300 to 500 bytes, and the role,
# finish and usage chunks): past either, the server does not stop, and the request fails (answer_bounds).
EVENTS_PER_TOKEN = 2
EXTRA_EVENTS = 64
EVENT_BYTES = 4096


def answer_bounds(max_tokens: int) -> tuple:
    """(SSE events, body bytes) an answer to a request of max_tokens stays within."""
    events = EVENTS_PER_TOKEN * max_tokens + EXTRA_EVENTS
    return events, events * EVENT_BYTES


@dataclass(frozen=True)
class Target:
    """Where the streams go: the server's endpoint and the API key (checked by server_http.check_api_key)."""

    endpoint: Endpoint
    api_key: str | None = None

    def head(self, method: str, path: str, body_len: int | None, accept: str = "application/json") -> bytes:
        lines = [
            f"{method} {self.endpoint.base_path}{path} HTTP/1.1",
            f"Host: {self.endpoint.authority}",
            f"Accept: {accept}",
            "Connection: keep-alive",
            "User-Agent: sglang-deploy-bench/" + BENCH_VERSION,
        ]
        if body_len is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {body_len}"]
        lines += [f"{k}: {v}" for k, v in auth_headers(self.api_key).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ChunkedDecoder:
    """Incremental chunked transfer-encoding decoder: feed() whatever the socket gave; sink(bytes) gets
    each chunk's data; `done` after the last chunk. One socket read may hold many chunks (fewer awaits
    than readline/readexactly per chunk)."""

    __slots__ = ("buf", "done", "sink")

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
                if n - pos > MAX_PENDING:
                    raise ValueError(f"a chunk-size line over {MAX_PENDING} bytes")
                break
            field = buf[pos:crlf].split(b";", 1)[0]
            size = int(field, 16)
            if not 0 <= size <= MAX_PENDING:  # a negative size would send pos back for ever
                raise ValueError(
                    f"a chunk size of {field[:20].decode('latin-1')!r} is not one of 0 to {MAX_PENDING} bytes"
                )
            if size == 0:
                end = buf.find(b"\r\n\r\n", crlf) if buf[crlf + 2 : crlf + 4] != b"\r\n" else crlf
                if end < 0:
                    if n - pos > MAX_PENDING:  # trailers that never end would be kept for ever
                        raise ValueError(f"trailers after the last chunk over {MAX_PENDING} bytes")
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
        ep = self.target.endpoint
        ctx = ssl.create_default_context() if ep.scheme == "https" else None
        self.reader, self.writer = await asyncio.open_connection(ep.host, ep.port, ssl=ctx, limit=HEAD_LIMIT)
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.opened += 1

    def abort(self) -> None:
        """Drop the connection at once, without waiting for the server."""
        if self.writer is not None:
            self.writer.transport.abort()
        self.reader = self.writer = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None

    async def send(self, method: str, path: str, body: bytes | None = None, accept: str = "application/json") -> float:
        """Write a request; returns perf_counter right before it was written (bench_serving's `st`)."""
        await self.open()
        head = self.target.head(method, path, None if body is None else len(body), accept)
        t = time.perf_counter()
        self.writer.write(head + body if body else head)
        await self.writer.drain()
        return t

    async def read_head(self) -> tuple:
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise HttpError("connection closed before response") from exc
        except asyncio.LimitOverrunError as exc:
            raise HttpError(f"the response head is over {HEAD_LIMIT} bytes") from exc
        lines = raw.decode("latin-1").split("\r\n")
        if len(lines) > MAX_HEADERS + 3:  # status line, headers, the two empty strings of the final CRLFCRLF
            raise HttpError(f"the response head has more than {MAX_HEADERS} header lines")
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
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                await self._read_chunked(sink)
            elif "content-length" in headers:
                await self._read_length(int(headers["content-length"]), sink)
            else:
                await self._read_to_close(sink)
        except (asyncio.IncompleteReadError, ValueError) as exc:
            await self.close()
            raise HttpError(f"bad response body: {exc}") from exc
        if headers.get("connection", "").lower() == "close":
            await self.close()

    async def _read_chunked(self, sink) -> None:
        decoder = ChunkedDecoder(sink)
        while not decoder.done:
            data = await self.reader.read(1 << 16)
            if not data:
                raise HttpError("connection closed inside chunked body")
            decoder.feed(data)

    async def _read_length(self, remaining: int, sink) -> None:
        while remaining > 0:
            data = await self.reader.read(min(remaining, 1 << 16))
            if not data:
                raise HttpError("connection closed inside body")
            remaining -= len(data)
            sink(data)

    async def _read_to_close(self, sink) -> None:
        while data := await self.reader.read(1 << 16):
            sink(data)
        await self.close()


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class _SSERecorder:
    """Parses SSE lines as body bytes arrive and records the request's timeline. What the server sends is
    checked as it is read: the first problem becomes the request's error (never an exception that would end
    the level); a line over MAX_PENDING bytes, or an answer past answer_bounds(max_tokens), ends the stream
    (HttpError)."""

    __slots__ = ("buf", "bytes_left", "done", "events_left", "max_tokens", "model", "tl")

    def __init__(self, tl: Timeline, max_tokens: int, model: str | None = None):
        self.tl = tl
        self.model = model  # the answers must name it (when the request named one)
        self.max_tokens = max_tokens
        self.events_left, self.bytes_left = answer_bounds(max_tokens)
        self.buf = b""
        self.done = False

    def over(self, what: str) -> HttpError:
        return HttpError(f"the answer {what}, more than {self.max_tokens} tokens (max_tokens) take: it does not stop")

    def feed(self, data: bytes) -> None:
        self.bytes_left -= len(data)
        if self.bytes_left < 0:
            raise self.over(f"is over {answer_bounds(self.max_tokens)[1]} bytes")
        buf = self.buf + data if self.buf else data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.startswith(b"data:"):
                self.events_left -= 1
                if self.events_left < 0:
                    raise self.over(f"holds over {answer_bounds(self.max_tokens)[0]} SSE events")
                self.event(line[5:].strip(), time.perf_counter())
        self.buf = buf[start:]
        if len(self.buf) > MAX_PENDING:
            raise HttpError(f"malformed SSE: a line of over {MAX_PENDING} bytes without a line break")

    def fail(self, message: str) -> None:
        if self.tl.error is None:
            self.tl.error = message

    def event(self, payload: bytes, t: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            self.tl.t_end = t
            return
        try:
            obj = _json_decode(payload.decode("utf-8"))
        except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
            self.fail("unparseable SSE data")
            return
        if not isinstance(obj, dict):
            self.fail(f"malformed SSE event: a JSON {type(obj).__name__}, not an object")
            return
        if obj.get("error"):
            err = obj["error"]
            self.fail("server error in stream: " + str(err.get("message", err) if isinstance(err, dict) else err)[:200])
            return
        named = obj.get("model")
        if self.model and named is not None and named != self.model:
            self.fail(f"the answer names model {str(named)[:80]!r}, not the requested {self.model!r}")
        usage = obj.get("usage")
        if usage is not None and usage != {}:
            self.usage(usage)
        choices = obj.get("choices")
        if choices is not None:
            self.choices(choices, t)

    def choices(self, choices, t: float) -> None:
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            self.fail("malformed SSE event: choices is not a list of objects")
            return
        for choice in choices:
            delta = choice.get("delta") or {}
            content = delta.get("content") if isinstance(delta, dict) else None
            reasoning = (delta.get("reasoning_content") or delta.get("reasoning")) if isinstance(delta, dict) else None
            if (
                not isinstance(delta, dict)
                or not isinstance(content or "", str)
                or not isinstance(reasoning or "", str)
            ):
                self.fail("malformed SSE event: choices[].delta is not an object of strings")
                return
            self.delta(content, reasoning, t)

    def delta(self, content: str | None, reasoning: str | None, t: float) -> None:
        tl = self.tl
        if reasoning:  # vLLM's name is `reasoning`, as bench_serving reads it
            tl.keep_text(reasoning)
            tl.reasoning_chunks += 1
            tl.reasoning_chars += len(reasoning)
        if content:
            tl.keep_text(content)
            tl.content_chunks += 1
            tl.content_chars += len(content)
            if tl.t_first_content is None:
                tl.t_first_content = t
        if content or reasoning:
            tl.token_times.append(t)

    def usage(self, usage) -> None:
        """The usage chunk's counts; a field of the wrong type is the request's error."""
        if not isinstance(usage, dict):
            self.fail(f"malformed usage: a JSON {type(usage).__name__}, not an object")
            return
        details = usage.get("completion_tokens_details")
        counts = {
            "completion_tokens": usage.get("completion_tokens"),
            "prompt_tokens": usage.get("prompt_tokens"),
            "reasoning_tokens": usage.get("reasoning_tokens")
            if usage.get("reasoning_tokens") is not None or not isinstance(details, dict)
            else details.get("reasoning_tokens"),
        }
        bad = [k for k, v in counts.items() if v is not None and not _count(v)]
        if bad or counts["completion_tokens"] is None:
            what = bad[0] if bad else "completion_tokens"
            self.fail(f"malformed usage: {what} is {str(usage.get(what))[:40]!r}, not a token count")
            return
        tl = self.tl
        tl.completion_tokens, tl.prompt_tokens, tl.reasoning_tokens = counts.values()


async def stream_chat(
    conn: Connection, tl: Timeline, body: bytes, max_tokens: int, timeout: float, model: str | None = None
) -> bool:
    """Send one streamed chat completion on conn, recording it in `tl` (the caller's: a cancelled request keeps
    what it recorded); returns whether the emulated header was seen. Answers that name another model than `model`
    fail the request, and so do answers past answer_bounds(max_tokens) (the body's max_tokens)."""
    tl.t_send = time.perf_counter()  # replaced by the write's time; kept when it never happens
    rec = _SSERecorder(tl, max_tokens, model)
    emulated = False

    async def _go():
        nonlocal emulated
        tl.t_send = await conn.send("POST", "/v1/chat/completions", body, accept="text/event-stream")
        status, headers = await conn.read_head()
        emulated = headers.get("x-sglang-emulated", "").lower() == "true"
        if status != 200:
            tl.error = await _error_answer(conn, status, headers)
            return
        await conn.read_body(headers, rec.feed)

    try:
        await asyncio.wait_for(_go(), timeout)
    except TimeoutError:
        tl.error, tl.timed_out = f"no answer within the timeout ({timeout:g} s)", True
        conn.abort()
    except OSError as exc:  # HttpError included
        tl.error = f"{type(exc).__name__}: {exc}"[:200]
        conn.abort()
    if not tl.t_end:
        tl.t_end = time.perf_counter()
        if tl.error is None and not rec.done:
            tl.error = "stream ended without [DONE]"
    if tl.error is None and tl.completion_tokens is None:
        tl.error = "no usage chunk (stream_options.include_usage ignored)"
    if tl.error is None and not tl.token_times:
        tl.error = "no token chunks"
    return emulated


async def _error_answer(conn: Connection, status: int, headers: dict) -> str:
    """The request's error for an answer other than 200: its status and the start of its body (MAX_ERROR_BODY)."""
    kept = bytearray()

    def keep(data: bytes) -> None:
        kept.extend(data[: MAX_ERROR_BODY - len(kept)])
        if len(kept) >= MAX_ERROR_BODY:
            raise HttpError("error body over the cap")

    try:
        await conn.read_body(headers, keep)
    except HttpError:  # the message is in what was kept; the rest is not read
        conn.abort()
    text = kept.decode("utf-8", "replace").strip().replace("\n", " ")
    return f"HTTP {status}: {text[:160]}"
