"""Monitoring (issue 50) against real SGLang: the release's own /metrics next to what tools/record_metrics.py read
from its code (src/sglang_deploy/data/metrics-0.5.16.json), and the real Prometheus scraping it and the GPU
exporter (host/gpu_exporter.py) with the rules rendered for the release (monitor/rules.py): every rule evaluates
without error, the stall alert does not fire on a healthy server under load, and it fires when SGLang's scheduler
is stopped (SIGSTOP) under that load. Writes metrics.json and the scraped /metrics text.

    SGLANG_DEPLOY_PROMETHEUS=/path/to/prometheus python -m pytest tests/gpu/test_metrics.py -v --gpu-out DIR

Prometheus: the distribution's binary (Debian's `prometheus` package unpacked with dpkg-deb, no service); skipped
without one.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import signal
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

# The least stall window the settings take, and a short for: so a healthy load of LOAD_S fills the window and
# outlasts the for: (a rule that took it for stalled would be seen), and a real stall fires in about 80 s.
SETTINGS = {"stall_seconds": 60, "stall_for": "10s"}
LOAD_S = 100
STALL_GUARD_S = 150  # stall_seconds + stall_for + two 5 s scrape and evaluation rounds, with room
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
    seen["stalled_at"], seen["progress_at"], start = {}, None, time.monotonic()
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
        now = round(time.monotonic() - start, 1)
        for a in firing:
            seen["alerts"].setdefault(a["labels"]["alertname"], set()).add(a["state"])
            if a["labels"]["alertname"] == "SGLangStalled":
                seen["stalled_at"].setdefault(a["state"], now)
        if seen["progress_at"] is None and query(api, "instance:sglang_tokens_processed:increase_stall > 0"):
            seen["progress_at"] = now
        for key, rows in found.items():
            seen[key] = max([seen[key], *(float(r["value"][1]) for r in rows)])
    return seen


@pytest.fixture(scope="module")
def server(models, out_dir):
    # 0.3 of the GPU's memory: room for the GPU lab's server (0.5) started beside it once this one is up.
    args = {**DENSE_ARGS, "mem-fraction-static": 0.3}
    s = Server(harness.render(args, models["dense"]), out_dir / "logs", "metrics")
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


class Watched:
    """Prometheus (with the GPU exporter) scraping the server under a load of STREAMS streams."""

    def __init__(self, server: Server, out_dir: Path, tmp_path: Path):
        gpu_port, prom_port = harness.free_port(), harness.free_port()
        self.server, self.out_dir = server, out_dir
        self.api = f"http://127.0.0.1:{prom_port}/api/v1"
        self.jobs = {metrics.JOBS["server"]: server.port, metrics.JOBS["gpu"]: gpu_port}
        self.sent = {"ok": 0, "failed": 0}
        self.stop = threading.Event()
        self.exporter = subprocess.Popen(
            # As the unit runs it: a module of its package (it imports its siblings relatively).
            [sys.executable, "-m", f"{server_http.__package__}.gpu_exporter", "--port", str(gpu_port)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(server_http.__file__).parents[5]), *sys.path])},
            stdout=subprocess.DEVNULL,
            stderr=open(out_dir / "gpu_exporter.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        (tmp_path / "rules.yml").write_text(rules.render_rules([SGLANG_VERSION], SETTINGS))
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
                    **(
                        {"metric_relabel_configs": list(scrape.SERVER_RELABEL)} if job == metrics.JOBS["server"] else {}
                    ),
                }
                for job, port in self.jobs.items()
            ],
        }
        (tmp_path / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.prom = subprocess.Popen(
            [
                str(prometheus_binary()),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(out_dir / "prometheus.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        self.threads = [threading.Thread(target=self._load, daemon=True) for _ in range(STREAMS)]
        for t in self.threads:
            t.start()

    def _load(self) -> None:
        endpoint = server_http.Endpoint.parse(self.server.url)
        while not self.stop.is_set():
            body = {"text": "Count slowly:", "sampling_params": {"max_new_tokens": 512, "ignore_eos": True}}
            try:
                ok = server_http.request(endpoint, "POST", "/generate", body, API_KEY, 300).status == 200
            except OSError:
                ok = False
            self.sent["ok" if ok else "failed"] += 1

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=310)
        for process in (self.prom, self.exporter):
            process.terminate()
            process.wait(30)


@pytest.fixture(scope="module")
def watched(server, out_dir, tmp_path_factory):
    w = Watched(server, out_dir, tmp_path_factory.mktemp("prometheus"))
    try:
        yield w
    finally:
        w.close()
        SEEN["requests"] = w.sent
        harness.write_json(out_dir / "metrics.json", SEEN)


def test_prometheus_evaluates_every_rule_and_the_stall_alert_stays_quiet_under_load(watched):
    api = watched.api
    seen = watch(api, LOAD_S)
    targets = json.loads(get(f"{api}/targets"))["data"]["activeTargets"]
    scrapes = query(api, f'sum_over_time(up{{job="sglang"}}[{LOAD_S}s])')
    tried = query(api, f'count_over_time(up{{job="sglang"}}[{LOAD_S}s])')
    slowest = query(api, f'max_over_time(scrape_duration_seconds{{job="sglang"}}[{LOAD_S}s])')
    health = {r["name"]: r["health"] for g in json.loads(get(f"{api}/rules"))["data"]["groups"] for r in g["rules"]}
    gpu = query(api, "sglang_gpu_memory_used_bytes")
    SEEN.update(
        settings=SETTINGS,
        load_s=LOAD_S,
        streams=STREAMS,
        rule_problems=seen["problems"],
        rule_health=health,
        alerts_seen={k: sorted(v) for k, v in seen["alerts"].items()},
        stalled_first_seen_s=seen["stalled_at"],
        progress_first_seen_s=seen["progress_at"],
        most_pending=seen["most_pending"],
        most_running_queued=seen["most_running"],
        most_http_generate=seen["most_http_generate"],
        targets={t["labels"]["job"]: t["health"] for t in targets},
        scrapes_ok=scrapes,
        scrapes_tried=tried,
        slowest_scrape_s=slowest,
        gpu_memory_used=gpu,
    )
    assert {t["labels"]["job"]: t["health"] for t in targets} == {job: "up" for job in watched.jobs}, targets
    assert seen["problems"] == {} and set(health.values()) == {"ok"}, (seen["problems"], health)
    # Before Prometheus has two samples of the token counter there is no progress to see: pending then is expected
    # (as on the lab, tests/test_monitor_alerts.py); never firing, and never pending once progress was seen.
    stalled, progress = seen["stalled_at"], seen["progress_at"]
    assert "firing" not in stalled and progress is not None, (stalled, progress)
    assert stalled.get("pending", 0) <= progress, (stalled, progress)
    assert seen["most_pending"] > 0, "the load never showed as running requests: the stall rule saw no load"
    assert watched.sent["ok"] > 0 and watched.sent["failed"] == 0, watched.sent
    assert gpu, "the GPU exporter's memory reading did not reach Prometheus"


def test_the_stall_alert_fires_when_the_scheduler_stops(watched):
    """A real hang: SIGSTOP to SGLang's scheduler under the load (what a dead or stuck scheduler looks like from
    outside). The stall alert must go pending, then fire, within stall_seconds + stall_for and two scrape and
    evaluation rounds; /health's answer meanwhile is recorded (sgl-project/sglang#6624: 200 with a dead scheduler;
    0.5.16 on an H100 gave none within 5 s). SIGCONT then lets the load finish."""
    schedulers = [p for p in watched.server.group_pids() if _comm(p).startswith("sglang::schedul")]
    assert schedulers, "no sglang::scheduler process in the server's group"
    for pid in schedulers:
        os.kill(pid, signal.SIGSTOP)
    stopped, states, health = time.monotonic(), {}, []
    try:
        while time.monotonic() - stopped < STALL_GUARD_S and "firing" not in states:
            time.sleep(2)
            since = round(time.monotonic() - stopped, 1)
            try:
                alerts = json.loads(get(f"{watched.api}/alerts"))["data"]["alerts"]
            except OSError:
                continue
            for a in alerts:
                if a["labels"]["alertname"] == "SGLangStalled":
                    states.setdefault(a["state"], since)
            try:
                health.append((since, watched.server.request("GET", "/health", api_key=None, timeout=5)[0]))
            except OSError as e:
                health.append((since, type(e).__name__))
    finally:
        for pid in schedulers:
            os.kill(pid, signal.SIGCONT)
    SEEN["stall"] = {"schedulers": len(schedulers), "alert_states_s": states, "health": health}
    assert "firing" in states, f"SGLangStalled not firing {STALL_GUARD_S} s after the scheduler stopped: {states}"
    assert states.get("pending", 0) <= states["firing"], states


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
