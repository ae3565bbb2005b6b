"""Explains a difference between `sglang-deploy bench` and bench_serving: our requests force the output length
with min_tokens as well as ignore_eos (bench_serving sends ignore_eos only). This measures what min_tokens
alone costs on the real server: bench_serving at concurrency 1, with and without min_tokens in the body (no
warm-up requests: bench_serving's 32-token warm-up cannot satisfy min_tokens 256, and the server refuses it)."""

from __future__ import annotations

import json

import benchcmp
import harness
from harness import Server

ARGS = {
    "load-format": "dummy",
    "mem-fraction-static": 0.5,
    "sampling-backend": "pytorch",
    "disable-prefill-cuda-graph": True,
    "cuda-graph-max-bs": 8,
}
LEN = 256


def test_min_tokens_cost_on_decode(out_dir, models):
    server = Server(harness.render(ARGS, models["dense"]), out_dir / "logs", "min-tokens")
    rows = {}
    try:
        server.wait_ready(timeout=600)
        for label, extra in (("plain", None), ("min_tokens", {"min_tokens": LEN})):
            path = out_dir / "bench" / f"min-tokens-{label}.json"
            path.parent.mkdir(exist_ok=True)
            result = benchcmp.bench_serving(
                server, models["dense"], (1,), {1: 8}, path, LEN, LEN, extra_body=extra, warmup=0
            )["1"]
            rows[label] = {
                k: result.get(k) for k in ("output_throughput", "mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms")
            }
    finally:
        server.stop()
    harness.write_json(out_dir / "bench" / "min-tokens.json", rows)
    assert rows["plain"]["mean_tpot_ms"] and rows["min_tokens"]["mean_tpot_ms"], json.dumps(rows)
