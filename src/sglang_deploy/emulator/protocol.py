"""HTTP/1.1 as uvicorn speaks it to SGLang's clients: requests in, JSON or SSE responses out, keep-alive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

EMULATED_HEADER = "x-sglang-emulated"
HTTP_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
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
    def __init__(self, method: str, path: str, version: str, headers: dict, body: bytes):
        self.method, self.path, self.version, self.headers, self.body = method, path, version, headers, body

    def json(self) -> dict:
        try:
            data = json.loads(self.body or b"null")
        except ValueError as exc:
            raise openai_error(400, f"Invalid JSON body: {exc}", "BadRequestError") from None
        if not isinstance(data, dict):
            raise openai_error(400, "Request body must be a JSON object", "BadRequestError")
        return data


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
        self.writer.write(head + body)
        await self.writer.drain()

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
        self.writer.write(b"".join(self._pending))
        self._pending.clear()
        await self.writer.drain()

    async def event(self, obj) -> None:
        self.add(obj)
        await self.flush()

    async def end_sse(self) -> None:
        self.add("[DONE]")
        if self.chunked:
            self._pending.append(b"0\r\n\r\n")
        await self.flush()


Dispatch = Callable[["Request", Responder], Awaitable[None]]


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, dispatch: Dispatch) -> None:
    """Answer the requests of one connection in turn, each through dispatch; one access-log line each."""
    peer = writer.get_extra_info("peername") or ("?", 0)
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            except asyncio.LimitOverrunError:
                await Responder(writer, "HTTP/1.1", False).send_json(431, {"detail": "headers too large"})
                break
            lines = head.decode("latin-1").split("\r\n")
            try:
                method, target, version = lines[0].split(" ", 2)
            except ValueError:
                break
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            conn = headers.get("connection", "").lower()
            keep_alive = (version == "HTTP/1.1" and conn != "close") or conn == "keep-alive"
            out = Responder(writer, version, keep_alive)
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            try:
                body = await read_body(reader, headers)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            except ValueError:
                await out.send_json(400, {"detail": "bad request body framing"})
                break
            req = Request(method, target.split("?", 1)[0], version, headers, body)
            await dispatch(req, out)
            print(
                f'INFO:     {peer[0]}:{peer[1]} - "{method} {req.path} {version}" '
                f"{out.status} {HTTP_REASONS.get(out.status, '')}",
                flush=True,
            )
            if not out.keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def read_body(reader: asyncio.StreamReader, headers: dict) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readuntil(b"\r\n")  # no trailers expected
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or 0)
    return await reader.readexactly(length) if length > 0 else b""
