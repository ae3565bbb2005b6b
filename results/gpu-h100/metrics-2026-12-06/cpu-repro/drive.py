import json, subprocess, sys, threading, time, urllib.parse, urllib.request, tempfile, os
PORT, PPORT = 18431, 18432
PROM = "/var/cache/sglang-deploy/promtool/root/usr/bin/prometheus"
py = sys.executable
app = subprocess.Popen([py, "/tmp/repro/app.py", str(PORT)])
time.sleep(3)
tmp = tempfile.mkdtemp()
# --relabel: the server job's metric_relabel_configs of monitor/scrape.py SERVER_RELABEL (drive2.log)
RELABEL = [{"source_labels": ["__name__"], "regex": "sglang_(.+)", "target_label": "__name__", "replacement": "sglang:$1"}]
cfg = {"global": {"scrape_interval": "5s", "scrape_timeout": "4s", "evaluation_interval": "5s"},
       "scrape_configs": [{"job_name": "sglang", "static_configs": [{"targets": [f"127.0.0.1:{PORT}"]}],
                          **({"metric_relabel_configs": RELABEL} if "--relabel" in sys.argv else {})}]}
open(f"{tmp}/p.yml", "w").write(json.dumps(cfg))
prom = subprocess.Popen([PROM, f"--config.file={tmp}/p.yml", f"--storage.tsdb.path={tmp}/d",
                         f"--web.listen-address=127.0.0.1:{PPORT}"], stderr=open(f"{tmp}/prom.log", "w"))
stop = threading.Event(); sent = [0]
def load():
    while not stop.is_set():
        req = urllib.request.Request(f"http://127.0.0.1:{PORT}/generate", data=b'{"text":"x"}', method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read(); sent[0] += 1
ts = [threading.Thread(target=load, daemon=True) for _ in range(8)]
[t.start() for t in ts]
def q(e):
    u = f"http://127.0.0.1:{PPORT}/api/v1/query?" + urllib.parse.urlencode({"query": e})
    return [r["value"][1] for r in json.loads(urllib.request.urlopen(u, timeout=10).read())["data"]["result"]]
looks = {"running+queue": "sum(sglang:num_running_reqs) + sum(sglang:num_queue_reqs)", "underscored_running": "sum(sglang_num_running_reqs)", "underscored_http": 'sum(sglang_http_requests_active{endpoint="/generate"})', "up": "up",
         "http_generate": 'sum(sglang:http_requests_active{endpoint="/generate"})'}
for i in range(4):
    time.sleep(5)
    try:
        print(i, {k: q(e) for k, e in looks.items()}, flush=True)
    except OSError as err:
        print(i, "query failed", err, flush=True)
for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
    body = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{PORT}/metrics", headers={"Accept": accept})).read().decode()
    print(accept, [l for l in body.splitlines() if l.startswith(("sglang:num_running", "sglang:http_requests_active"))])
print("requests", sent[0])
stop.set(); prom.terminate(); app.terminate(); prom.wait(); app.wait()
