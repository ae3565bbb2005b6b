"""HTTP to an SGLang server (stdlib only, Python 3.10+): the base URL, the API key, one request, the model.

The one helper for every plain request the tool makes (readiness probes, sanity prompts, the benchmark's
/health, /server_info, /metrics and /v1/models reads); the benchmark's measured streams use the same
Endpoint and key check. Shipped to hosts as plugins/module_utils/server_http.py (plugins/module_utils links to the host package).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
CONNECT_TIMEOUT_S = 10.0  # connect + TLS handshake
MAX_BODY_BYTES = 16 << 20  # of a plain answer (a large server's /metrics is about 1 MB); heads: http.client's caps
# The modules' default server: SGLang's own default host and port (server_args.py: ServerArgs.host, ServerArgs.port).
LOCAL_URL = "http://127.0.0.1:30000"
# The request id of this project's own probes (the stall watchdog's): a traffic capture leaves them out.
PROBE_RID = "sglang-deploy-probe-"


def probe_rid() -> str:
    """A unique request id marked as this project's probe (SGLang refuses a rid already in flight)."""
    return PROBE_RID + uuid.uuid4().hex


class HttpError(OSError):
    """The server's answer was not HTTP (a bad status line, a truncated body, a TLS failure)."""


class SlowAnswer(TimeoutError):
    """The server took the connection but its answer was not complete in time."""


@dataclass(frozen=True)
class Endpoint:
    """A server's base URL, checked: scheme http or https, a host, a port, an optional path prefix."""

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, url: str) -> "Endpoint":
        """'http://h:30000', 'h:30000' (http assumed) or 'https://h/prefix'; ValueError naming the fix."""
        text = str(url).strip()
        if not text or any(ord(c) < 0x21 or c == "\x7f" for c in text):
            raise ValueError(
                f"bad server URL {url!r}: give it like http://10.0.0.5:30000 (no spaces or control characters)"
            )
        parts = urlsplit(text if "://" in text else "http://" + text)
        if parts.scheme not in DEFAULT_PORTS:
            raise ValueError(f"unsupported URL scheme in {url!r}: use http:// or https://")
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError as exc:
            raise ValueError(f"bad port in URL {url!r}: {exc}") from exc
        if not parts.hostname:
            raise ValueError(f"no host in URL {url!r}: give it like http://10.0.0.5:30000")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"URL {url!r} has a query, fragment or user name: give the server's base URL only")
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def authority(self) -> str:
        """The Host header's value."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.base_path}"


def check_api_key(key: str | None) -> None:
    """ValueError when the key cannot travel in an `Authorization: Bearer` header as it is."""
    if not key:
        return
    if any(c in key for c in "\r\n\0"):
        raise ValueError(
            "the API key holds a line break or NUL (it would split the HTTP header): remove it, "
            "e.g. a trailing newline from the file it was read from"
        )
    if key != key.strip():
        raise ValueError("the API key starts or ends with white space (HTTP drops it): remove it")
    bad = [i for i, c in enumerate(key) if not 0x20 <= ord(c) < 0x7F]
    if bad:
        raise ValueError(
            f"the API key holds a character that is not printable ASCII (at position {bad[0] + 1}); HTTP headers "
            "cannot carry it as the server reads it: use an ASCII key"
        )


def auth_headers(api_key: str | None) -> dict:
    check_api_key(api_key)
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def connect(endpoint: Endpoint, timeout: float) -> http.client.HTTPConnection:
    """An open connection whose reads time out after `timeout`; a TLS failure or a handshake that never ends
    (a plain HTTP server reads the TLS hello as a request line and waits) says what to fix."""
    tls = endpoint.scheme == "https"
    cls = http.client.HTTPSConnection if tls else http.client.HTTPConnection
    conn = cls(endpoint.host, endpoint.port, timeout=min(timeout, CONNECT_TIMEOUT_S))
    hint = " Does the server speak https? A plain HTTP server needs an http:// URL." if tls else ""
    try:
        conn.connect()
    except TimeoutError as exc:
        conn.close()
        what = "connection and TLS handshake" if tls else "connection"
        raise TimeoutError(f"no {what} to {endpoint.authority} within {conn.timeout:g} s.{hint}") from exc
    except ssl.SSLError as exc:
        conn.close()
        raise HttpError(f"TLS with {endpoint.authority} failed ({exc.reason or exc}).{hint}") from exc
    conn.sock.settimeout(timeout)
    return conn


@dataclass
class Response:
    status: int
    headers: dict  # lower-cased names
    body: bytes

    def json(self):
        """The parsed body of a 200 answer, None for anything else (a body that is not JSON, or JSON nested past
        Python's recursion limit: a malformed answer, never a traceback)."""
        if self.status != 200:
            return None
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None


def request(
    endpoint: Endpoint,
    method: str,
    path: str,
    body=None,
    api_key: str | None = None,
    timeout: float = 30.0,
    max_bytes: int = MAX_BODY_BYTES,
) -> Response:
    """One request on a fresh connection, bounded in time and size: the whole exchange (connect, head, body)
    ends within `timeout` seconds however slowly the server drips (the connect and TLS handshake get at most
    CONNECT_TIMEOUT_S of it), and a body over `max_bytes` is not read further. Raises OSError:
    ConnectionRefusedError (port closed), TimeoutError (no connection in time), SlowAnswer (a TimeoutError: connected,
    but no complete answer in time), HttpError (the answer is not HTTP, its head or body is over the caps, or TLS
    failed)."""
    headers = {"Accept": "application/json", **auth_headers(api_key)}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    start = time.monotonic()
    conn = connect(endpoint, timeout)
    # The socket itself: the connection lets go of it (conn.sock None) once a response without a length is read.
    sock, expired = conn.sock, threading.Event()

    def expire() -> None:  # wakes a read that is blocked in another thread
        expired.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(max(0.0, timeout - (time.monotonic() - start)), expire)
    timer.daemon = True
    timer.start()
    try:
        conn.request(method, endpoint.base_path + path, body=data, headers=headers)
        resp = conn.getresponse()
        parts, size = [], 0
        while chunk := resp.read1(1 << 16):
            size += len(chunk)
            if size > max_bytes:
                raise HttpError(f"{method} {path}: the answer's body is over {max_bytes} bytes (the most read)")
            parts.append(chunk)
        if expired.is_set():
            raise SlowAnswer(f"no complete answer within {timeout:g} s")
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, b"".join(parts))
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise SlowAnswer(f"no complete answer within {timeout:g} s") from exc
        if isinstance(exc, OSError):  # RemoteDisconnected is both
            raise
        raise HttpError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        timer.cancel()
        conn.close()


def get_json(endpoint: Endpoint, path: str, api_key: str | None = None, timeout: float = 30.0):
    """Parsed JSON of a 200 GET, None for another status or a body that is not JSON; OSError on transport."""
    return request(endpoint, "GET", path, api_key=api_key, timeout=timeout).json()


def first_model(models) -> str | None:
    """The first id of a /v1/models answer (SGLang lists the served model name there), None when none."""
    try:
        return str(models["data"][0]["id"])
    except (TypeError, KeyError, IndexError):
        return None


def first_model_len(models) -> int | None:
    """The context length (max_model_len) of the first /v1/models entry, None when it does not say."""
    try:
        value = models["data"][0]["max_model_len"]
    except (TypeError, KeyError, IndexError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def served_model(endpoint: Endpoint, api_key: str | None = None, timeout: float = 30.0) -> str | None:
    """First id of GET /v1/models; OSError when the server does not answer."""
    return first_model(get_json(endpoint, "/v1/models", api_key, timeout))
