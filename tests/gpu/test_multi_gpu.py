"""Issue item 7 (hosts with 2+ GPUs): tp 2 on two GPUs, and tp 2 as two "nodes" on one machine (one process
group per rank, one GPU each, --nnodes 2 --node-rank 0/1 --dist-init-addr 127.0.0.1:PORT). Records what
rank 1 serves and how the pair starts and stops."""

from __future__ import annotations

import json
import threading
import time

import harness
import pytest
from harness import Server

from sglang_deploy.rules import rules
from ansible_collections.sglang.deploy.plugins.module_utils import readiness

ARGS = {
    "load-format": "dummy",
    "mem-fraction-static": 0.5,
    "sampling-backend": "pytorch",
    "disable-prefill-cuda-graph": True,
    "cuda-graph-max-bs": 16,
    "enable-metrics": True,
}
PATHS = ("/health", "/health_generate", "/v1/models", "/server_info", "/metrics")


@pytest.fixture(autouse=True)
def two_gpus(gpu_count):
    if gpu_count < 2:
        pytest.skip("needs 2 GPUs")


def answers(server: Server) -> dict:
    out = {}
    for path in PATHS:
        try:
            status, _, body = server.request("GET", path, timeout=10)
            out[path] = {"status": status, "body": body.decode(errors="replace")[:300]}
        except OSError as exc:
            out[path] = {"status": None, "error": f"{type(exc).__name__}: {exc}"}
    return out


def generate(server: Server) -> dict:
    status, _, body = server.request(
        "POST",
        "/generate",
        {"text": "Hello", "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
        timeout=60,
    )
    return {
        "status": status,
        "body": json.loads(body) if status == 200 else body.decode(errors="replace"),
    }


def test_tp2_on_two_gpus(out_dir, models):
    launch = harness.render(ARGS, models["dense"], tp=2)
    facts = {
        **rules.gpu_facts(harness.gpu_facts()),
        **rules.model_facts_from_path(models["dense"]),
    }
    assert rules.errors(rules.validate(launch, facts)) == []
    server = Server(launch, out_dir / "logs", "tp2", gpus="0,1")
    try:
        ready = server.wait_ready(timeout=600)
        apps = harness.compute_apps()
        gen = generate(server)
    finally:
        stop = server.stop()
    harness.write_json(
        out_dir / "recordings" / "tp2.json",
        {"ready": ready, "compute_apps": apps, "generate": gen, "stop": stop},
    )
    assert gen["status"] == 200
    assert len(apps) >= 2, apps  # one scheduler per GPU
    assert not stop["sigkill"], stop


def test_tp2_as_two_nodes_on_one_machine(out_dir, models):
    dist = f"127.0.0.1:{harness.free_port()}"
    ranks = []
    for rank in (0, 1):
        args = {**ARGS, "nnodes": 2, "node-rank": rank, "dist-init-addr": dist}
        ranks.append(harness.render(args, models["dense"], tp=2))
    facts = {
        **rules.gpu_facts(harness.gpu_facts()),
        **rules.model_facts_from_path(models["dense"]),
    }
    for launch in ranks:
        assert rules.errors(rules.validate(launch, facts)) == []
    servers = [
        Server(launch, out_dir / "logs", f"node-rank{rank}", gpus=str(rank)) for rank, launch in enumerate(ranks)
    ]
    record: dict = {"dist_init_addr": dist, "argv": [s.launch.argv for s in servers]}
    waits: dict = {}

    def wait(server: Server, key: str):
        try:
            waits[key] = server.wait_ready(timeout=600)
        except (readiness.ServerDied, readiness.NotReady) as exc:
            waits[key] = {"error": str(exc)}

    try:
        threads = [threading.Thread(target=wait, args=(s, f"rank{i}")) for i, s in enumerate(servers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(660)
        record["ready"] = dict(waits)
        record["rank0"] = answers(servers[0])
        record["rank1"] = answers(servers[1])
        record["rank0_generate"] = generate(servers[0])
        # Stop rank 1 as systemd would stop its unit; watch rank 0.
        start = time.monotonic()
        record["rank1_stop"] = servers[1].stop()
        probes = []
        while servers[0].proc.poll() is None and time.monotonic() - start < 90:
            probes.append(
                {
                    "t_s": round(time.monotonic() - start, 2),
                    "stage": readiness.probe(servers[0].url, harness.API_KEY, timeout=1.0)[0],
                }
            )
            time.sleep(0.5)
        record["rank0_after_rank1_stop"] = {
            "probes": probes,
            "exited_after_s": round(time.monotonic() - start, 2) if servers[0].proc.poll() is not None else None,
            "exit_status": servers[0].proc.returncode,
        }
    finally:
        record["rank0_stop"] = servers[0].stop()
        servers[1].stop()
        record["rank0_log_tail"] = servers[0].log_text().splitlines()[-40:]
        harness.write_json(out_dir / "recordings" / "two_nodes.json", record)
    assert "elapsed" in waits["rank0"], waits
    assert record["rank0_generate"]["status"] == 200
