"""A counted load through the smg router, and a watch on one worker of its list (molecule/fleet's watchdog step).

--streams threads each send one streamed /v1/chat/completions after the other until --stop-file exists (or, with
--requests, until that many were sent, then the watch ends too: the traffic capture's known load); a request
is ok when it answers 200 and its stream ends with [DONE] and --max-tokens tokens (usage), else failed. A thread
polls GET /workers every --poll s and records each change of --worker's state there (absent, or status/healthy).
Prints one JSON object at the end: sent, ok, failed, the slowest request's seconds, the first errors, the worker's
changes, on CLOCK_MONOTONIC (the host's, which systemd's *TimestampMonotonic stamps share: containers have no clock
of their own).

Keys from the environment (ROUTER_LOAD_API_KEY, ROUTER_LOAD_ADMIN_KEY), never argv. Stdlib only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import threading
import time

MAX_ERRORS = 20  # error texts kept (the counts are complete)


def one(args: argparse.Namespace, key: str) -> str | None:
    """One streamed request: None when it succeeded, else why not."""
    body = json.dumps(
        {
            "model": args.model,
            "messages": [{"role": "user", "content": "Tell me about the sea."}],
            "max_tokens": args.max_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    conn = http.client.HTTPConnection(args.host, args.port, timeout=args.timeout)
    try:
        conn.request(
            "POST", "/v1/chat/completions", body, {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        )
        resp = conn.getresponse()
        if resp.status != 200:
            return f"HTTP {resp.status}: {resp.read()[:200]!r}"
        done, tokens = False, None
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            usage = json.loads(data).get("usage")
            if usage:
                tokens = usage.get("completion_tokens")
        return None if done and tokens == args.max_tokens else f"stream ended: done={done} completion_tokens={tokens}"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def worker_state(args: argparse.Namespace, key: str) -> str:
    """--worker's state in the router's list: absent, or its status and health; 'error: ...' when the list fails."""
    conn = http.client.HTTPConnection(args.host, args.port, timeout=5)
    try:
        conn.request("GET", "/workers", headers={"Authorization": f"Bearer {key}"})
        workers = json.loads(conn.getresponse().read()).get("workers", [])
    except (OSError, http.client.HTTPException, ValueError, AttributeError) as exc:
        return f"error: {type(exc).__name__}"
    finally:
        conn.close()
    for w in workers:
        if w.get("url", "").split("//")[-1].split(":")[0] == args.worker:
            return f"{w.get('status')}, {'healthy' if w.get('is_healthy') else 'unhealthy'}"
    return "absent"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", required=True)
    parser.add_argument("--worker", required=True, help="the host name in the worker's URL")
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=300, help="seconds one request may take")
    parser.add_argument("--poll", type=float, default=0.5)
    parser.add_argument(
        "--requests", type=int, default=0, help="send this many requests in all, then stop (0: no limit)"
    )
    args = parser.parse_args()
    key, admin = os.environ["ROUTER_LOAD_API_KEY"], os.environ["ROUTER_LOAD_ADMIN_KEY"]
    lock = threading.Lock()
    counts = {"sent": 0, "ok": 0, "failed": 0, "slowest_s": 0.0}
    errors: list[dict] = []
    changes: list[dict] = []
    streams_done = threading.Event()

    def stream() -> None:
        while not os.path.exists(args.stop_file):
            with lock:
                if args.requests and counts["sent"] >= args.requests:
                    return
                counts["sent"] += 1
            start = time.monotonic()
            error = one(args, key)
            took = time.monotonic() - start
            with lock:
                counts["failed" if error else "ok"] += 1
                counts["slowest_s"] = max(counts["slowest_s"], round(took, 1))
                if error and len(errors) < MAX_ERRORS:
                    errors.append({"start": start, "took": took, "error": error})

    def watch() -> None:
        last = None
        while not (os.path.exists(args.stop_file) or streams_done.is_set()):
            state = worker_state(args, admin)
            if state != last:
                changes.append({"at": time.monotonic(), "state": state})
                last = state
            time.sleep(args.poll)

    started = time.monotonic()
    streams = [threading.Thread(target=stream) for _ in range(args.streams)]
    watcher = threading.Thread(target=watch)
    for t in [*streams, watcher]:
        t.start()
    for t in streams:
        t.join()
    streams_done.set()
    watcher.join()
    print(json.dumps({**counts, "started": started, "ended": time.monotonic(), "errors": errors, "changes": changes}))


if __name__ == "__main__":
    main()
