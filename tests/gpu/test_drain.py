"""What a unit's stop does to requests in flight on a real server: SIGTERM to every process of the group (systemd's
KillMode=control-group) against SIGTERM to the main process only (KillMode=mixed), one server per GPU, each
stopped while a long streamed completion runs. Records /health, a new request and the stream during the stop;
asserts the in-flight request survives the stop the role's unit performs."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import harness
import pytest
from harness import Server
from test_multi_gpu import ARGS

from ansible_collections.sglang.deploy.plugins.module_utils import server_http

STREAM_TOKENS = 6000  # about 7 s of decode for the tiny model at concurrency 1
UNIT_TEMPLATE = harness.REPO / "roles" / "sglang_server" / "templates" / "sglang.service.j2"
VARIANTS = {"control-group": "killpg", "mixed": "kill-main"}


@pytest.fixture(autouse=True)
def two_gpus(gpu_count):
    if gpu_count < 2:
        pytest.skip("needs 2 GPUs (one server per stop variant)")


def unit_kill_mode() -> str:
    return re.search(r"^KillMode=(\S+)$", UNIT_TEMPLATE.read_text(), re.M).group(1)


class Stream(threading.Thread):
    """One long streamed completion; keeps how many chunks came, whether [DONE] came and how it ended."""

    def __init__(self, server: Server):
        super().__init__(daemon=True)
        self.server = server
        self.first_chunk = threading.Event()
        self.result: dict = {"chunks": 0, "done": False}

    def run(self) -> None:
        body = {
            "model": self.server.launch.args["served-model-name"],
            "prompt": "Count the waves:",
            "max_tokens": STREAM_TOKENS,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
        }
        start = time.monotonic()
        try:
            conn = server_http.connect(server_http.Endpoint.parse(self.server.url), 120)
            headers = {"Content-Type": "application/json", **server_http.auth_headers(self.server.api_key)}
            conn.request("POST", "/v1/completions", json.dumps(body), headers)
            resp = conn.getresponse()
            self.result["status"] = resp.status
            for raw in resp:
                line = raw.decode(errors="replace").strip()
                if line == "data: [DONE]":
                    self.result["done"] = True
                elif line.startswith("data: "):
                    self.result["chunks"] += 1
                    self.first_chunk.set()
        except OSError as exc:
            self.result["error"] = f"{type(exc).__name__}: {exc}"
        self.result["elapsed_s"] = round(time.monotonic() - start, 3)
        self.first_chunk.set()


def watch_stop(server: Server, variant: str) -> dict:
    """Stream, then stop as `variant` 2 s into it; /health every 0.2 s and one new request during the stop."""
    stream = Stream(server)
    stream.start()
    assert stream.first_chunk.wait(120), "the stream never started"
    time.sleep(2)
    t0 = time.monotonic()
    if variant == "killpg":
        os.killpg(server.pgid, signal.SIGTERM)
    else:
        os.kill(server.proc.pid, signal.SIGTERM)
    health: list[dict] = []
    new_request: dict = {}
    main_exit = group_exit = None
    while time.monotonic() - t0 < 90:
        now = round(time.monotonic() - t0, 3)
        try:
            status, _, body = server.request("GET", "/health", timeout=2)
            answer = [status, body.decode(errors="replace")[:120]]
        except OSError as exc:
            answer = ["error", type(exc).__name__]
        if not health or health[-1]["answer"] != answer:
            health.append({"t_s": now, "answer": answer})
        if not new_request and now > 0.5:
            try:
                status, _, body = server.request(
                    "POST",
                    "/generate",
                    {"text": "Hi", "sampling_params": {"max_new_tokens": 4}},
                    timeout=20,
                )
                new_request = {"t_s": now, "status": status, "body": body.decode(errors="replace")[:200]}
            except OSError as exc:
                new_request = {"t_s": now, "error": f"{type(exc).__name__}: {exc}"}
        if main_exit is None and server.proc.poll() is not None:
            main_exit = now
        if main_exit is not None and not server.group_pids():
            group_exit = now
            break
        time.sleep(0.2)
    killed = group_exit is None
    if killed:
        os.killpg(server.pgid, signal.SIGKILL)
    stream.join(30)
    return {
        "variant": variant,
        "stream": stream.result,
        "stream_tokens_asked": STREAM_TOKENS,
        "health_during_stop": health,
        "new_request_during_stop": new_request,
        "main_exit_s": main_exit,
        "group_exit_s": group_exit,
        "exit_status": server.proc.returncode,
        "sigkill_needed": killed,
        "log_tail": server.log_text().splitlines()[-25:],
    }


def test_stop_drains_the_request_in_flight(out_dir, models):
    servers = {
        mode: Server(harness.render(ARGS, models["dense"]), out_dir / "logs", f"drain-{mode}", gpus=str(i))
        for i, mode in enumerate(VARIANTS)
    }
    for server in servers.values():
        server.wait_ready(timeout=600)
    records: dict = {}
    threads = [
        threading.Thread(target=lambda m=mode, s=server: records.update({m: watch_stop(s, VARIANTS[m])}))
        for mode, server in servers.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    unit_mode = unit_kill_mode()
    harness.write_json(out_dir / "recordings" / "drain.json", {"unit_kill_mode": unit_mode, **records})
    ours = records[unit_mode]
    assert ours["stream"]["done"] and ours["stream"]["chunks"] >= STREAM_TOKENS // 2, ours
    assert not ours["sigkill_needed"], ours
