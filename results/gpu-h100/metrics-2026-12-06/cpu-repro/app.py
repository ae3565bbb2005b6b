"""CPU reproduction of SGLang 0.5.16's metrics path (issue 50): sglang's own middleware functions (read from the
installed sglang/srt/utils/common.py, not imported: the package needs torch), prometheus_client multiprocess mode,
a scheduler stand-in process setting the gauges as SchedulerMetricsCollector does (mostrecent), and a slow
/generate. Run: python app.py PORT"""
import ast, asyncio, multiprocessing as mp, os, re, sys, tempfile, time
from pathlib import Path
from typing import Dict, Optional, Tuple

SG = Path("/var/tmp/bs-venv/lib/python3.12/site-packages/sglang/srt")
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="repro-prom-"))  # set_prometheus_multiproc_dir


def load_sglang_functions():
    tree = ast.parse((SG / "utils/common.py").read_text())
    want = {"add_prometheus_middleware", "RefCountedGauge", "add_prometheus_track_response_middleware",
            "_get_fastapi_request_path"}
    nodes = [n for n in tree.body if getattr(n, "name", None) in want]
    assert len(nodes) == 4, [n.name for n in nodes]
    import importlib.util, types
    spec = importlib.util.spec_from_file_location("sglang.srt.utils.http_middleware_patch",
                                                  SG / "utils/http_middleware_patch.py")
    patch = importlib.util.module_from_spec(spec); spec.loader.exec_module(patch)
    for name in ("sglang", "sglang.srt", "sglang.srt.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["sglang.srt.utils.http_middleware_patch"] = patch
    from starlette.routing import Mount
    ns = {"Mount": Mount, "re": re, "Dict": Dict, "Optional": Optional, "Tuple": Tuple}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(SG / "utils/common.py"), "exec"), ns)
    return ns


def scheduler(stop):
    # As SchedulerMetricsCollector.__init__ / _log_gauge_queue_count: mostrecent gauges, set() at each report.
    from prometheus_client import Gauge
    labels = {"model_name": "tiny", "engine_type": "unified", "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0}
    running = Gauge("sglang:num_running_reqs", "r", labelnames=labels.keys(), multiprocess_mode="mostrecent")
    queue = Gauge("sglang:num_queue_reqs", "q", labelnames=labels.keys(), multiprocess_mode="mostrecent")
    while not stop.is_set() and os.getppid() != 1:
        running.labels(**labels).set(int(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"], "..", "inflight").resolve().read_text() or 0)
                                     if Path(os.environ["PROMETHEUS_MULTIPROC_DIR"], "..", "inflight").resolve().exists() else 0)
        queue.labels(**labels).set(0)
        time.sleep(0.05)  # ~ every decode_log_interval (40) steps


def main(port):
    ns = load_sglang_functions()
    from fastapi import FastAPI as Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    inflight = {"n": 0}
    flag = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"], "..", "inflight").resolve()

    async def generate(request):
        await request.body()
        inflight["n"] += 1; flag.write_text(str(inflight["n"]))
        await asyncio.sleep(0.7)  # ~ a 512-token generation on the H100 run (1,624 requests / 150 s / 8 streams)
        inflight["n"] -= 1; flag.write_text(str(inflight["n"]))
        return JSONResponse({"text": "x" * 10})

    app = Starlette(routes=[Route("/generate", generate, methods=["POST"])])
    ns["add_prometheus_track_response_middleware"](app)  # http_server.py:2427 (before uvicorn starts)
    ns["add_prometheus_middleware"](app)  # http_server.py:282 (in lifespan: a /metrics Mount)
    stop = mp.get_context("spawn").Event()
    p = mp.get_context("spawn").Process(target=scheduler, args=(stop,), daemon=True); p.start()
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
