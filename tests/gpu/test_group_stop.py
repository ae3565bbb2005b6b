"""Stopping a two-"node" tp 2 group as systemd's KillMode=mixed does (SIGTERM to each rank's main process only):
rank 0 first while a stream runs on it, then (a second group) rank 1 first. Records what each rank does."""

from __future__ import annotations

import os
import signal
import threading
import time

import harness
import pytest
from harness import Server
from test_drain import Stream
from test_multi_gpu import ARGS

from ansible_collections.sglang.deploy.plugins.module_utils import readiness


@pytest.fixture(autouse=True)
def two_gpus(gpu_count):
    if gpu_count < 2:
        pytest.skip("needs 2 GPUs")


def start_group(out_dir, models, tag):
    dist = f"127.0.0.1:{harness.free_port()}"
    servers = [
        Server(
            harness.render({**ARGS, "nnodes": 2, "node-rank": r, "dist-init-addr": dist}, models["dense"], tp=2),
            out_dir / "logs",
            f"{tag}-rank{r}",
            gpus=str(r),
        )
        for r in (0, 1)
    ]
    threads = [threading.Thread(target=s.wait_ready, kwargs={"timeout": 400}) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(420)
    return servers


def watch(servers, first: int, seconds: float = 40) -> dict:
    t0 = time.monotonic()
    os.kill(servers[first].proc.pid, signal.SIGTERM)
    exits: dict = {}
    probes = []
    while time.monotonic() - t0 < seconds and len(exits) < 2:
        now = round(time.monotonic() - t0, 2)
        for r, s in enumerate(servers):
            if r not in exits and s.proc.poll() is not None:
                exits[r] = {"t_s": now, "status": s.proc.returncode}
        probes.append({"t_s": now, "rank0": readiness.probe(servers[0].url, harness.API_KEY, timeout=0.5)[0]})
        time.sleep(0.5)
    return {"sigterm_to_rank": first, "exits": exits, "rank0_probes": probes[:: max(1, len(probes) // 30)]}


def test_group_stop_order(out_dir, models):
    record: dict = {}
    servers = start_group(out_dir, models, "grpA")
    try:
        stream = Stream(servers[0])
        stream.start()
        stream.first_chunk.wait(60)
        time.sleep(1)
        record["rank0_first"] = watch(servers, 0)
        stream.join(30)
        record["rank0_first"]["stream"] = stream.result
    finally:
        for s in servers:
            s.stop(timeout=20)
    servers = start_group(out_dir, models, "grpB")
    try:
        record["rank1_first"] = watch(servers, 1, seconds=30)
    finally:
        for s in servers:
            s.stop(timeout=20)
        record["logs_tail"] = {s.label: s.log_text().splitlines()[-12:] for s in servers}
        harness.write_json(out_dir / "recordings" / "group_stop.json", record)
    assert record["rank0_first"]["stream"]["done"], record
