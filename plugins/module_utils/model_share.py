"""The share of one round of the sglang_model role's fan-out: a holder's checkpoint folder served over HTTP to the
round's receiver, and only to a request that carries the round's token (``Authorization: Bearer TOKEN``).

roles/sglang_model/tasks/fanout_round.yml copies this file to the host and starts it as a transient unit of its own
system account (sglang_model_share_user) with the checkpoint's group (files 0440, folders 0550), its standard input a
root-only file that holds the token: the token is never in argv or the environment. The unit stops when the round
ends or fails, and at RuntimeMaxSec. Serves GET of a regular file of the folder (no hidden part, no link at its end),
nothing else, to MAX_CLIENTS connections at once: one more is closed as it comes, and one idle for Share.timeout is
dropped, so idle clients hold a bounded number of threads.

    python3 model_share.py --bind ADDRESS --port PORT --directory FOLDER < TOKEN_FILE

Stdlib only, one file: it runs with the host's python3, which has no sglang_deploy package.
"""

# A program the roles run on hosts: print and exit are its interface.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import argparse
import hmac
import http.server
import os
import shutil
import socket
import stat
import sys
import threading
import urllib.parse

MIN_TOKEN = 32
MAX_CLIENTS = 8  # connections served at once (the round's receiver fetches one file at a time)


class Share(http.server.BaseHTTPRequestHandler):
    token = b""
    folder = ""
    timeout = 60  # a client that sends nothing for a minute is dropped, so it holds no thread for long

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        sent = self.headers.get("Authorization", "").encode("utf-8", "replace")
        if not hmac.compare_digest(sent, b"Bearer " + self.token):
            self.send_error(403, "this round's token is missing or wrong")
            return
        rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).removeprefix("/")
        if any(not part or part.startswith(".") for part in rel.split("/")) or "\x00" in rel:
            self.send_error(404)
            return
        try:
            handle = open(os.open(os.path.join(self.folder, rel), os.O_RDONLY | os.O_NOFOLLOW), "rb")  # noqa: SIM115
        except OSError:
            self.send_error(404)
            return
        with handle:
            size = os.fstat(handle.fileno())
            if not stat.S_ISREG(size.st_mode):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size.st_size))
            self.end_headers()
            shutil.copyfileobj(handle, self.wfile, 1 << 20)


class BoundedServer(http.server.ThreadingHTTPServer):
    """A thread per connection, at most ``slots`` (a semaphore) at once; a connection past them is closed at once."""

    slots: threading.BoundedSemaphore

    def process_request(self, request, client_address) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def bounded(bind: str, port: int, handler, clients: int) -> BoundedServer:
    """A BoundedServer of ``handler`` on bind:port (an IPv4 or IPv6 address, or a name), ``clients`` at once."""
    family = socket.getaddrinfo(bind, port, type=socket.SOCK_STREAM)[0][0]
    fields = {"address_family": family, "slots": threading.BoundedSemaphore(clients)}
    return type("Server", (BoundedServer,), fields)((bind, port), handler)


def server(bind: str, port: int, folder: str, token: bytes) -> BoundedServer:
    """The share of folder on bind:port, for requests that carry token."""
    if len(token) < MIN_TOKEN:
        raise ValueError(f"the token is {len(token)} bytes: {MIN_TOKEN} or more (the role draws 43)")
    return bounded(bind, port, type("RoundShare", (Share,), {"token": token, "folder": folder}), MAX_CLIENTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--directory", required=True)
    args = parser.parse_args(argv)
    try:
        share = server(args.bind, args.port, args.directory, sys.stdin.buffer.read(1024).strip())
    except (OSError, ValueError) as exc:
        print(f"model_share: {exc}", file=sys.stderr)
        return 2
    with share:
        share.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
