#!/usr/bin/env python3
"""Does the benchmark client's memory stay flat in the output length? (issue 48 R3)

    python benchmarks/client_memory.py [--output-lens 2048,8192,32768] [--requests 16]

A stand-in server on 127.0.0.1 (stdlib, a thread of this process) answers each chat request with an answer just
under the client's cap for its max_tokens (client.answer_bounds): 2 x max_tokens SSE events of about 4 KB of text
each, usage = max_tokens. Per output length a fresh child process runs one level of --requests requests, all in
flight, and reports its peak RSS (ru_maxrss); the table gives it with the bytes the server sent. The client once kept
every answer whole (1.12 GB at 2048 x 64 requests, linear in the output length); it keeps the first
OUTPUT_CHECK_CHARS characters of each, so what grows is the token times (8 bytes a chunk) and, at the level's end,
the pooled ITLs its statistics sort.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "collections")]  # the package; the collection (its link)

from ansible_collections.sglang.deploy.plugins.module_utils.bench import client  # noqa: E402

MODEL = "stand-in"
TEXT = ("alpha beta gamma delta epsilon zeta eta theta iota kappa " * 80)[: client.EVENT_BYTES - 200]


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


TOKEN_EVENT = _event({"model": MODEL, "choices": [{"index": 0, "delta": {"content": TEXT}}]})


class StandIn:
    """Answers every request on its own connection, then closes it: the probes' JSON, and chat answers near the cap."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sent = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            conn, _unused = self.sock.accept()
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            path = head.split(b" ", 2)[1].decode()
            length = next((int(v) for k, v in _headers(head) if k == b"content-length"), 0)
            while len(body) < length:
                body += conn.recv(65536)
            if path == "/v1/chat/completions":
                self.stream(conn, json.loads(body)["max_tokens"])
                return
            answer = {"/health": b"", "/metrics": b"# none\n"}.get(path)
            if answer is None:
                answer = json.dumps({"served_model_name": MODEL, "context_length": 1 << 22}).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(answer) + answer)

    def stream(self, conn: socket.socket, max_tokens: int) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        events = 2 * max_tokens
        batch = TOKEN_EVENT * 64
        for _unused in range(events // 64):
            conn.sendall(batch)
        conn.sendall(TOKEN_EVENT * (events % 64))
        usage = {"model": MODEL, "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": max_tokens}}
        conn.sendall(_event(usage) + b"data: [DONE]\n\n")
        self.sent += events * len(TOKEN_EVENT)


def _headers(head: bytes):
    for line in head.split(b"\r\n")[1:]:
        key, _sep, value = line.partition(b":")
        yield key.strip().lower(), value.strip()


def child(url: str, output_len: int, requests: int) -> None:
    """(In the child.) One level of `requests` requests at once; a JSON line: peak RSS, completed, errors."""
    from ansible_collections.sglang.deploy.plugins.module_utils import bench

    result = bench.run_benchmark(
        url,
        dataset_name="random",
        input_len=8,
        output_len=output_len,
        random_range_ratio=1.0,
        concurrency=[requests],
        requests=requests,
        warmup=0,
        timeout=600,
    )
    level = result["levels"][0]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": peak_mb, "completed": level["completed"], "errors": level["errors"]}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--output-lens", default="2048,8192,32768")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    server = StandIn()
    print(f"{'output_len':>10} {'requests':>8} {'sent MB':>9} {'peak RSS MB':>11}  completed")
    for output_len in (int(x) for x in args.output_lens.split(",")):
        sent0 = server.sent
        cmd = [sys.executable, __file__, "--child", server.url, str(output_len), str(args.requests)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        line = json.loads(out.strip().splitlines()[-1])
        sent = (server.sent - sent0) / 1e6
        done = f"{line['completed']}/{args.requests}" + (f" {line['errors']}" if line["errors"] else "")
        print(f"{output_len:>10} {args.requests:>8} {sent:>9.0f} {line['peak_rss_mb']:>11.0f}  {done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
