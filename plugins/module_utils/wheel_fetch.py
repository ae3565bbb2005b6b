"""The wheelhouse of a locked stack bundle: download a wheel within limits, fetch what a lock lists, check a folder
of wheels against the lock's hashes. The `sglang_wheelhouse` module runs it (on the controller's wheelhouse and on
the host's copy); `sglang-deploy stack fetch` on the controller. Stdlib only, Python 3.10+.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from .stack import entry_problems


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheelhouse_problems(wheel_dir: str, entries: list[dict]) -> list[str]:
    """Each lock entry whose wheel is missing from wheel_dir or whose sha256 differs, naming the file."""
    problems = []
    for entry in entries:
        path = os.path.join(wheel_dir, entry["file"])
        if not os.path.isfile(path):
            problems.append(f"{entry['file']}: missing from {wheel_dir}")
            continue
        digest = sha256_file(path)
        if digest != entry["sha256"]:
            problems.append(f"{entry['file']}: sha256 {digest}, the lock says {entry['sha256']} (altered or truncated)")
    return problems


# What a download of a lock's URL raises: OSError (URLError, HTTPError, a timeout), ValueError (an unknown URL type)
# and HTTPException (InvalidURL: urllib passes user:password@host on as a host with a port).
DOWNLOAD_ERRORS = (OSError, ValueError, http.client.HTTPException)


def without_credentials(url: str, error: str) -> str:
    """'HOST failed: ERROR' for a failed download of url, with its user name and password left out of both (the
    download parses the URL with urllib, so urllib says what the credentials are)."""
    parts = urllib.parse.urlsplit(url)
    host = f"{parts.scheme}://{parts.hostname or ''}"
    for secret in (parts.password, parts.username):
        if secret:
            error = error.replace(secret, "***")
    return f"{host} failed: {error}"


# Bounds of every download of a wheel: the default bundle's 207 wheels are 4.36 GB together, so a body past
# MAX_WHEEL_BYTES is not a wheel; a fetch's downloads together end at its deadline.
MAX_WHEEL_BYTES = 8 * 10**9
FETCH_TIMEOUT = 3600
READ_TIMEOUT = 60


class DownloadStopped(OSError):
    """A download stopped at the size cap, the deadline, or because its fetch was interrupted."""


class _SameOriginAuth(urllib.request.HTTPRedirectHandler):
    """A redirect keeps an Authorization header only to the same scheme, host and port (a token is never sent to a
    CDN, nor downgraded to http); a redirect to another scheme than http or https is refused (urllib follows one to
    ftp://, whose sockets the deadline does not know: a dripping FTP server held the download for ever)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise urllib.error.HTTPError(
                req.full_url, code, f"a redirect to {scheme or 'no'}:// is refused (http and https only)", headers, fp
            )
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            before, after = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(new.full_url)
            if (before.scheme, before.netloc) != (after.scheme, after.netloc):
                new.headers = {k: v for k, v in new.headers.items() if k.lower() != "authorization"}
        return new


def _opener(sockets: list, late: threading.Event) -> urllib.request.OpenerDirector:
    """urllib's opener, keeping a second handle (dup) of each socket it connects (redirects included) in sockets, so
    that the deadline can end a read under way: a server that drips its headers, or its TLS handshake, a byte at a
    time never returns from the opener's open() otherwise. The handle is taken as the TCP connection opens, before the handshake
    (which hands the socket to the TLS layer); download closes them. A connect that ends past the deadline is refused
    there: _cut has shut down only the sockets known when it ran."""

    def watching(handler: type) -> type:
        class Watching(handler):
            def do_open(self, http_class, req, **kwargs):
                class Connection(http_class):
                    def connect(self) -> None:
                        if late.is_set():
                            raise DownloadStopped("the deadline of the fetch passed")
                        create = self._create_connection

                        def created(*args, **kwargs):
                            sock = create(*args, **kwargs)
                            sockets.append(sock.dup())
                            if late.is_set():  # a connect that outlasted the deadline: _cut ran before the append
                                sock.close()
                                raise DownloadStopped("the deadline of the fetch passed")
                            return sock

                        self._create_connection = created
                        super().connect()

                return super().do_open(Connection, req, **kwargs)

        return Watching

    return urllib.request.build_opener(
        watching(urllib.request.HTTPHandler), watching(urllib.request.HTTPSHandler), _SameOriginAuth
    )


def _cut(sockets: list, late: threading.Event) -> None:
    late.set()
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def download(
    url: str,
    dest: str,
    *,
    max_bytes: int = MAX_WHEEL_BYTES,
    deadline: float | None = None,
    stop=None,
    headers: dict | None = None,
    cap: str = "",
) -> int:
    """Download url to dest; returns the size. The body goes to a private temporary file, renamed to dest only when
    complete and removed on any failure. DownloadStopped past max_bytes (cap names it in the error), at deadline
    (time.monotonic(), default FETCH_TIMEOUT from now: its sockets are shut down then, however slowly the server
    sends), when the server sends nothing for READ_TIMEOUT s, or when stop (a threading.Event) is set; OSError for a
    body cut short. headers go with the request (an Authorization header never to another origin on a redirect)."""
    cap = cap or f"the cap of {max_bytes / 1e9:.2f} GB per wheel"
    deadline = time.monotonic() + FETCH_TIMEOUT if deadline is None else deadline
    path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    if url.startswith("file:") and not os.path.isfile(path):  # a FIFO or a device would block or never end
        raise OSError(f"{path} is not a regular file")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".", suffix=".part")
    sockets, late, got = [], threading.Event(), [0]  # got: the bytes received so far
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (sockets, late))
    timer.daemon = True
    timer.start()
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with os.fdopen(fd, "wb") as handle, _opener(sockets, late).open(request, timeout=READ_TIMEOUT) as response:
            announced = response.headers.get("Content-Length") or ""
            if announced.isdigit() and int(announced) > max_bytes:
                raise DownloadStopped(f"announces {int(announced) / 1e9:.2f} GB, over {cap}")
            _read_body(response, handle, max_bytes, cap, stop, got)
            if late.is_set():  # the shut-down socket read as the end of the body
                raise DownloadStopped("the deadline of the fetch passed")
            if announced.isdigit() and got[0] != int(announced):
                raise OSError(f"cut short: {got[0]} of the {announced} bytes it announced")
        os.replace(tmp, dest)
    except BaseException as exc:
        os.unlink(tmp)
        if late.is_set():
            raise DownloadStopped(f"stopped at the deadline of the fetch after {got[0] / 1e6:.1f} MB") from exc
        if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
            raise DownloadStopped(
                f"the server sent nothing for {READ_TIMEOUT} s (after {got[0] / 1e6:.1f} MB)"
            ) from exc
        raise
    finally:
        timer.cancel()
        for sock in sockets:
            sock.close()
    return got[0]


def _read_body(response, handle, max_bytes: int, cap: str, stop, got: list) -> None:
    """Copy the body to handle as it arrives (a slow drip meets the checks too), counting its bytes in got[0]:
    DownloadStopped past max_bytes or when stop is set."""
    while block := response.read1(1 << 20):
        got[0] += len(block)
        if got[0] > max_bytes:
            raise DownloadStopped(f"sent more than {cap}")
        if stop is not None and stop.is_set():
            raise DownloadStopped("interrupted")
        handle.write(block)


def fetch_wheels(
    wheel_dir: str,
    entries: list[dict],
    jobs: int = 4,
    *,
    max_bytes: int = MAX_WHEEL_BYTES,
    timeout: float = FETCH_TIMEOUT,
) -> dict:
    """Download each lock entry missing from wheel_dir or altered there, and check it against the lock. Every
    download stops past max_bytes, and all of them at timeout seconds from now.

    Returns downloaded (count), bytes, problems: each wheel that could not be downloaded (a wheel built at lock time
    has no URL) or whose download does not match the lock (deleted), naming the file, and stopped: how many downloads
    the size cap or the deadline stopped.
    """
    refused = entry_problems(entries)
    if refused:
        return {"downloaded": 0, "bytes": 0, "problems": refused, "stopped": 0}
    todo = [entry for entry in entries if wheelhouse_problems(wheel_dir, [entry])]
    problems = [
        f"{entry['file']}: built when the bundle was locked and not in {wheel_dir}; copy it from the wheelhouse "
        "it was locked into, or lock the bundle again"
        for entry in todo
        if not entry.get("url")
    ]
    todo = [entry for entry in todo if entry.get("url")]
    deadline, stop, stopped = time.monotonic() + timeout, threading.Event(), []

    def get(entry: dict) -> int:
        try:
            path = os.path.join(wheel_dir, entry["file"])
            return download(entry["url"], path, max_bytes=max_bytes, deadline=deadline, stop=stop)
        except DOWNLOAD_ERRORS as exc:
            problems.append(f"{entry['file']}: download from {without_credentials(entry['url'], str(exc))}")
            stopped.append(isinstance(exc, DownloadStopped))
            return 0

    with ThreadPoolExecutor(jobs) as pool:
        try:
            sizes = list(pool.map(get, todo))
        except BaseException:  # Ctrl-C: the other downloads stop too, and remove their temporary files
            stop.set()
            raise
    for problem in wheelhouse_problems(wheel_dir, [entry for entry, size in zip(todo, sizes) if size]):
        os.unlink(os.path.join(wheel_dir, problem.split(": ", 1)[0]))
        problems.append(problem + "; deleted")
    return {
        "downloaded": sum(1 for size in sizes if size),
        "bytes": sum(sizes),
        "problems": problems,
        "stopped": sum(stopped),
    }
