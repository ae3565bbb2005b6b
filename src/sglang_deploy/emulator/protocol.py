"""HTTP/1.1 as uvicorn speaks it to SGLang's clients: requests in, JSON or SSE responses out, keep-alive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from .config import log

EMULATED_HEADER = "x-sglang-emulated"
# SGLang runs uvicorn with timeout_keep_alive=5 (sglang/srt/entrypoints/http_server.py, launch_server): an idle
# connection closes after 5 s. The emulator gives a request's head the same 5 s, its body BODY_TIMEOUT_S.
HEAD_TIMEOUT_S = 5.0
BODY_TIMEOUT_S = 60.0
WRITE_TIMEOUT_S = 60.0  # after a response, for the client to take it
MAX_BODY_BYTES = 64 * 1024 * 1024
READ_PIECE_BYTES = 64 * 1024  # a body is read (and counted against BODIES) in pieces of at most this
HTTP_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HttpError(Exception):
    def __init__(self, status: int, body):
        super().__init__(status)
        self.status = status
        self.body = body


def openai_error(status: int, message: str, kind: str) -> HttpError:
    return HttpError(status, {"object": "error", "message": message, "type": kind, "param": None, "code": status})


class Request:
    def __init__(self, method: str, path: str, version: str, headers: dict, keep_alive: bool):
        self.method, self.path, self.version, self.headers = method, path, version, headers
        self.keep_alive = keep_alive
        self.body = b""  # read after routing, so a refused request's body is never read
        self.held = 0  # bytes of the body counted in BODIES

    def json(self) -> dict:
        try:
            data = json.loads(self.body or b"null")
        except (ValueError, RecursionError) as exc:
            raise openai_error(400, f"Invalid JSON body: {exc}", "BadRequestError") from None
        if not isinstance(data, dict):
            raise openai_error(400, "Request body must be a JSON object", "BadRequestError")
        return data


class BodyBudget:
    """The request body bytes that all connections of the process hold at once (being read, or in a handler that
    runs): without it 16 clients sending 57 MB bodies held 912 MB. A body that would pass the limit is answered 503
    while it is read, as a server out of room would answer."""

    def __init__(self, limit: int):
        self.limit, self.held = limit, 0

    def take(self, req: Request, size: int) -> None:
        if self.held + size > self.limit:
            raise HttpError(503, {"detail": f"request bodies of over {self.limit} bytes are in progress: retry later"})
        self.held += size
        req.held += size

    def give_back(self, req: Request) -> None:
        self.held -= req.held
        req.held = 0


BODIES = BodyBudget(4 * MAX_BODY_BYTES)


class Responder:
    """Writes one response: JSON with Content-Length, or SSE (chunked on HTTP/1.1, else close-delimited)."""

    def __init__(self, writer: asyncio.StreamWriter, version: str, keep_alive: bool):
        self.writer = writer
        self.version = version
        self.keep_alive = keep_alive
        self.chunked = False
        self.status = 0
        self._pending: list[bytes] = []

    def _head(self, status: int, headers: list) -> bytes:
        self.status = status
        lines = [
            f"HTTP/1.1 {status} {HTTP_REASONS.get(status, '')}",
            "server: uvicorn",
            f"{EMULATED_HEADER}: true",
            "connection: " + ("keep-alive" if self.keep_alive else "close"),
        ]
        lines += [f"{k}: {v}" for k, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status: int, body: bytes, content_type: str) -> None:
        head = self._head(status, [("content-type", content_type), ("content-length", str(len(body)))])
        self._write(head + body)

    async def send_json(self, status: int, obj) -> None:
        await self.send(status, json.dumps(obj, separators=(",", ":")).encode(), "application/json")

    def start_sse(self) -> None:
        self.chunked = self.version == "HTTP/1.1"
        if not self.chunked:
            self.keep_alive = False
        headers = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
        if self.chunked:
            headers.append(("transfer-encoding", "chunked"))
        self._pending.append(self._head(200, headers))  # goes out with the first token: one write, not two

    def add(self, obj) -> None:
        """Queue one SSE event; events queued together go out in one write at the next flush()."""
        data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        payload = f"data: {data}\n\n".encode()
        if self.chunked:
            payload = b"%x\r\n%s\r\n" % (len(payload), payload)
        self._pending.append(payload)

    async def flush(self) -> None:
        self._write(b"".join(self._pending))
        self._pending.clear()

    def _write(self, data: bytes) -> None:
        """Queue bytes without waiting for the client to take them: SGLang's scheduler does not wait for a slow
        reader either, its output waits in memory. serve_connection bounds that wait after the response."""
        if self.writer.transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        self.writer.write(data)

    async def event(self, obj) -> None:
        self.add(obj)
        await self.flush()

    async def end_sse(self) -> None:
        self.add("[DONE]")
        if self.chunked:
            self._pending.append(b"0\r\n\r\n")
        await self.flush()


Handler = Callable[["Request", Responder], Awaitable[None]]
# Picks the handler from the request line and headers, before the body is read; raises HttpError (401, 404, 405).
Router = Callable[["Request"], Handler]


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Router) -> None:
    """Answer the requests of one connection in turn; one access-log line each."""
    peer = writer.get_extra_info("peername") or ("?", 0)
    try:
        while True:
            try:
                async with asyncio.timeout(HEAD_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                break
            except asyncio.LimitOverrunError:
                await Responder(writer, "HTTP/1.1", False).send_json(431, {"detail": "headers too large"})
                break
            req = parse_head(head)
            out = Responder(writer, req.version if req else "HTTP/1.1", req.keep_alive if req else False)
            if req is None:
                await out.send_json(400, {"detail": "Invalid HTTP request received."})
            else:
                await _answer(req, out, reader, route)
            try:
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    await writer.drain()
            except TimeoutError:
                writer.transport.abort()  # the client stopped reading: drop what it did not take
                break
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            print(
                f'INFO:     {peer[0]}:{peer[1]} - "{_printable(line)}" {out.status} {HTTP_REASONS.get(out.status, "")}',
                flush=True,
            )
            if not out.keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


# The headers that say where a body ends: each at most once, and not both (RFC 9112 6.3: a request smuggling risk).
FRAMING = frozenset({"content-length", "transfer-encoding"})


def parse_head(head: bytes) -> Request | None:
    """The request line and headers; None when they break HTTP/1.1's syntax (control characters included)."""
    lines = head[:-4].decode("latin-1").split("\r\n")
    if any(c < " " and c != "\t" or c == "\x7f" for line in lines for c in line):
        return None
    parts = lines[0].split(" ")
    if len(parts) != 3 or "\t" in lines[0]:
        return None
    method, target, version = parts
    if not method.isalpha() or not target or version not in ("HTTP/1.0", "HTTP/1.1"):
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or " " in name or "\t" in name:
            return None
        if name.lower() in headers and name.lower() in FRAMING:
            return None  # two body lengths: the last one read would decide, another reader may take the first
        headers[name.lower()] = value.strip(" \t")
    if FRAMING <= headers.keys():
        return None
    conn = headers.get("connection", "").lower()
    keep_alive = (version == "HTTP/1.1" and conn != "close") or conn == "keep-alive"
    return Request(method, target.split("?", 1)[0], version, headers, keep_alive)


def _printable(text: str) -> str:
    """Text for one log line: backslash and double quote escaped, control characters as \\xNN."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif " " <= c < "\x7f":
            out.append(c)
        else:
            out.append(f"\\x{ord(c):02x}")
    return "".join(out)


async def _answer(req: Request, out: Responder, reader: asyncio.StreamReader, route: Router) -> None:
    """Route, read the body, run the handler; every failure becomes an error response (or a closed stream)."""
    try:
        try:
            handler = route(req)
        except HttpError:
            out.keep_alive = out.keep_alive and not _has_body(req.headers)  # the body stays unread
            raise
        if req.headers.get("expect", "").lower() == "100-continue":
            out.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                req.body = await read_body(reader, req)
        except (HttpError, TimeoutError):
            out.keep_alive = False  # the framing is lost
            raise
        await handler(req, out)
    except TimeoutError:
        await out.send_json(408, {"detail": "Request body not received in time"})
    except HttpError as exc:
        if out.status:  # headers already sent (streaming): the connection cannot be reused
            out.keep_alive = False
        else:
            await out.send_json(exc.status, exc.body)
    except (ConnectionError, asyncio.IncompleteReadError):
        raise
    except Exception as exc:  # a bug in the emulator: answer like a server would, keep serving
        log(f"ERROR: Exception in ASGI application: {exc!r}", err=True)
        out.keep_alive = False
        if not out.status:
            await out.send_json(500, {"detail": "Internal Server Error"})
    finally:
        BODIES.give_back(req)


def _has_body(headers: dict) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() not in ("", "0")


async def read_body(reader: asyncio.StreamReader, req: Request) -> bytes:
    """The body by Content-Length or chunked transfer coding, counted in BODIES as it arrives; HttpError 400/413 for
    broken or oversized framing, 503 when the process holds too much already."""
    headers = req.headers
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts, total = [], 0
        while True:
            try:
                line = await reader.readuntil(b"\r\n")
            except asyncio.LimitOverrunError:
                raise HttpError(400, {"detail": "chunk size line too long"}) from None
            size = _size(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers expected
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError(413, {"detail": f"request body over {MAX_BODY_BYTES} bytes"})
            parts += await _read(reader, req, size)
            await reader.readexactly(2)
    length = _size(headers.get("content-length", "0").encode() or b"0", 10)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, {"detail": f"request body over {MAX_BODY_BYTES} bytes"})
    return b"".join(await _read(reader, req, length))


async def _read(reader: asyncio.StreamReader, req: Request, size: int) -> list[bytes]:
    """``size`` bytes in pieces, each counted in BODIES before it is read."""
    parts = []
    while size:
        piece = min(size, READ_PIECE_BYTES)
        BODIES.take(req, piece)
        parts.append(await reader.readexactly(piece))
        size -= piece
    return parts


def _size(text: bytes, base: int) -> int:
    digits = b"0123456789abcdefABCDEF"[: 10 if base == 10 else 22]
    if not text or text.strip(digits):
        raise HttpError(400, {"detail": "invalid body length"})
    if len(text) > 16:
        raise HttpError(413, {"detail": f"request body over {MAX_BODY_BYTES} bytes"})
    return int(text, base)
