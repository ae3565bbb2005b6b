"""Monitoring (issue 50) against real SGLang: the release's own /metrics next to what tools/record_metrics.py read
from its code (src/sglang_deploy/data/metrics-0.5.16.json), and the real Prometheus scraping it and the GPU
exporter (host/gpu_exporter.py) with the rules rendered for the release (monitor/rules.py): every rule evaluates
without error, and the stall alert does not fire on a healthy server under load. Writes metrics.json and the
scraped /metrics text.

    SGLANG_DEPLOY_PROMETHEUS=/path/to/prometheus python -m pytest tests/gpu/test_metrics.py -v --gpu-out DIR

Prometheus: the distribution's binary (Debian's `prometheus` package unpacked with dpkg-deb, no service); skipped
without one.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import harness
import pytest
from harness import API_KEY, DENSE_ARGS, SGLANG_VERSION, Server

from ansible_collections.sglang.deploy.plugins.module_utils import server_http
from sglang_deploy.monitor import metrics, rules, scrape

LOAD_S = 150  # under load for longer than the stall rule's for: (1m), with its 180 s window filling
STREAMS = 8
SEEN: dict = {}


def prometheus_binary() -> Path:
    found = os.environ.get("SGLANG_DEPLOY_PROMETHEUS")
    if not found or not Path(found).is_file():
        pytest.skip("no Prometheus binary: set SGLANG_DEPLOY_PROMETHEUS (Debian's prometheus package, unpacked)")
    return Path(found)


def families(text: str) -> dict:
    """name -> type of every '# TYPE' line of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            out[name] = kind
    return out


def get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - 127.0.0.1 only
        return r.read()


def query(api: str, expr: str) -> list:
    return json.loads(get(f"{api}/query?" + urllib.parse.urlencode({"query": expr})))["data"]["result"]


def watch(api: str, seconds: float) -> dict:
    """Poll Prometheus every 5 s for ``seconds``: rule name -> its evaluation error, alert name -> states seen, the
    most requests the pending record showed."""
    seen: dict = {"problems": {}, "alerts": {}, "most_pending": 0.0, "most_running": 0.0, "most_http_generate": 0.0}
    looks = {
        "most_pending": "instance:sglang_requests_pending:sum",
        "most_running": "sum(sglang:num_running_reqs) + sum(sglang:num_queue_reqs)",
        "most_http_generate": 'sum(sglang:http_requests_active{endpoint="/generate"})',
    }
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(5)
        try:
            groups = json.loads(get(f"{api}/rules"))["data"]["groups"]
            firing = json.loads(get(f"{api}/alerts"))["data"]["alerts"]
            found = {key: query(api, expr) for key, expr in looks.items()}
        except OSError:
            continue  # Prometheus still starting
        for r in (r for g in groups for r in g["rules"]):
            if r.get("health") not in ("ok", "unknown") or r.get("lastError"):
                seen["problems"][r["name"]] = r.get("lastError") or r.get("health")
        for a in firing:
            seen["alerts"].setdefault(a["labels"]["alertname"], set()).add(a["state"])
        for key, rows in found.items():
            seen[key] = max([seen[key], *(float(r["value"][1]) for r in rows)])
    return seen


@pytest.fixture(scope="module")
def server(models, out_dir):
    s = Server(harness.render(DENSE_ARGS, models["dense"]), out_dir / "logs", "metrics")
    try:
        s.wait_ready(timeout=540)
        yield s
    finally:
        s.stop()


def test_the_releases_metrics_are_the_recorded_ones(server, out_dir):
    """Every sglang: family the running server exposes is in the recording from the release's code (the rules and
    the dashboard are checked against that recording); what the recording has and this server did not expose (yet:
    some appear after the first request, or only with other features) is kept in the record."""
    endpoint = server_http.Endpoint.parse(server.url)
    for _ in range(4):  # finished requests, so the histograms have samples
        body = {"text": "Hello", "sampling_params": {"max_new_tokens": 16}}
        assert server_http.request(endpoint, "POST", "/generate", body, API_KEY, 60).status == 200
    text = get(f"{server.url}/metrics").decode()
    (out_dir / f"metrics-{SGLANG_VERSION}.txt").write_text(text)
    # What Prometheus 2.x gets: its Accept header asks for OpenMetrics, and prometheus_client may answer with
    # sglang_<name> samples (client_python issue 1177; issue 50). Kept with the client's version.
    accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    accept += "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    with urllib.request.urlopen(urllib.request.Request(f"{server.url}/metrics", headers={"Accept": accept})) as r:
        SEEN["openmetrics_content_type"] = r.headers.get("Content-Type")
        (out_dir / f"metrics-{SGLANG_VERSION}-openmetrics.txt").write_bytes(r.read())
    SEEN["prometheus_client"] = importlib.metadata.version("prometheus_client")
    exposed = {n: k for n, k in families(text).items() if n.startswith(metrics.PREFIXES)}
    recorded = metrics.metric_set(SGLANG_VERSION)
    # A counter's '# TYPE' line names its _total sample (prometheus_client's text format): compare samples too.
    names = set(recorded.families) | recorded.series()
    SEEN["exposed"] = exposed
    SEEN["recorded_not_exposed"] = sorted(
        n for n, m in recorded.families.items() if n not in exposed and not set(m.series) & set(exposed)
    )
    assert exposed, "the server exposes no sglang metric: --enable-metrics did not take"
    assert set(exposed) <= names, f"exposed but not recorded: {sorted(set(exposed) - names)}"


def test_prometheus_evaluates_every_rule_and_the_stall_alert_stays_quiet_under_load(server, out_dir, tmp_path):
    binary = prometheus_binary()
    gpu_port, prom_port = harness.free_port(), harness.free_port()
    exporter = subprocess.Popen(
        [sys.executable, str(harness.REPO / "plugins/module_utils/gpu_exporter.py"), "--port", str(gpu_port)],
        stdout=subprocess.DEVNULL,
        stderr=open(out_dir / "gpu_exporter.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    (tmp_path / "rules.yml").write_text(rules.render_rules([SGLANG_VERSION], {}))
    jobs = {metrics.JOBS["server"]: server.port, metrics.JOBS["gpu"]: gpu_port}
    config = {
        # A scrape of a busy SGLang's /metrics can take seconds (its multiprocess registry): a timed-out scrape
        # marks every series stale, and the rules then see nothing.
        "global": {"scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "5s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        # The server job's metric relabelling as the role deploys it (monitor/scrape.py SERVER_RELABEL, issue 50).
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                **({"metric_relabel_configs": list(scrape.SERVER_RELABEL)} if job == metrics.JOBS["server"] else {}),
            }
            for job, port in jobs.items()
        ],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    prom = subprocess.Popen(
        [
            str(binary),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(out_dir / "prometheus.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    api = f"http://127.0.0.1:{prom_port}/api/v1"
    stop = threading.Event()
    sent = {"ok": 0, "failed": 0}

    def load():
        endpoint = server_http.Endpoint.parse(server.url)
        while not stop.is_set():
            body = {"text": "Count slowly:", "sampling_params": {"max_new_tokens": 512, "ignore_eos": True}}
            try:
                ok = server_http.request(endpoint, "POST", "/generate", body, API_KEY, 120).status == 200
            except OSError:
                ok = False
            sent["ok" if ok else "failed"] += 1

    threads = [threading.Thread(target=load, daemon=True) for _ in range(STREAMS)]
    try:
        for t in threads:
            t.start()
        seen = watch(api, LOAD_S)
        targets = json.loads(get(f"{api}/targets"))["data"]["activeTargets"]
        scrapes = query(api, f'sum_over_time(up{{job="sglang"}}[{LOAD_S}s])')
        tried = query(api, f'count_over_time(up{{job="sglang"}}[{LOAD_S}s])')
        slowest = query(api, f'max_over_time(scrape_duration_seconds{{job="sglang"}}[{LOAD_S}s])')
        health = {r["name"]: r["health"] for g in json.loads(get(f"{api}/rules"))["data"]["groups"] for r in g["rules"]}
        gpu = query(api, "sglang_gpu_memory_used_bytes")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=130)
        prom.terminate()
        exporter.terminate()
        prom.wait(30)
        exporter.wait(30)
    SEEN.update(
        load_s=LOAD_S,
        streams=STREAMS,
        requests=sent,
        rule_problems=seen["problems"],
        rule_health=health,
        alerts_seen={k: sorted(v) for k, v in seen["alerts"].items()},
        most_pending=seen["most_pending"],
        most_running_queued=seen["most_running"],
        most_http_generate=seen["most_http_generate"],
        targets={t["labels"]["job"]: t["health"] for t in targets},
        scrapes_ok=scrapes,
        scrapes_tried=tried,
        slowest_scrape_s=slowest,
        gpu_memory_used=gpu,
    )
    harness.write_json(out_dir / "metrics.json", SEEN)
    assert {t["labels"]["job"]: t["health"] for t in targets} == {job: "up" for job in jobs}, targets
    assert seen["problems"] == {} and set(health.values()) == {"ok"}, (seen["problems"], health)
    assert "SGLangStalled" not in seen["alerts"], seen["alerts"]
    assert seen["most_pending"] > 0, "the load never showed as running requests: the stall rule saw no load"
    assert sent["ok"] > 0 and sent["failed"] == 0, sent
    assert gpu, "the GPU exporter's memory reading did not reach Prometheus"
