"""Issue item 4, second half: NEXTN (MTP) speculative decoding on the small hybrid GDN model; the accept
length from real /metrics or /server_info (what `sglang-deploy bench` reports) next to bench_serving's."""

from __future__ import annotations

import json

import benchcmp
import harness
from harness import Server

from sglang_deploy.rules import rules

LEVELS = (1, 8)
INPUT_LEN = OUTPUT_LEN = 256


def test_nextn_on_the_hybrid_model(out_dir, models):
    launch = harness.render(harness.NEXTN_ARGS, models["hybrid"])
    facts = {
        **rules.gpu_facts(harness.gpu_facts()),
        **rules.model_facts_from_path(models["hybrid"]),
    }
    assert rules.errors(rules.validate(launch, facts, max(LEVELS))) == []
    server = Server(launch, out_dir / "logs", "hybrid-nextn")
    try:
        ready = server.wait_ready(timeout=600)
        bench_dir = out_dir / "bench"
        bench_dir.mkdir(exist_ok=True)
        mine = benchcmp.ours(server, LEVELS, bench_dir / "nextn-ours.json", INPUT_LEN, OUTPUT_LEN)
        requests = {c: level["requests"] for c, level in zip(LEVELS, mine["levels"])}
        theirs = benchcmp.bench_serving(
            server,
            models["hybrid"],
            LEVELS,
            requests,
            bench_dir / "nextn-bench_serving.json",
            INPUT_LEN,
            OUTPUT_LEN,
        )
        info = json.loads(server.request("GET", "/server_info")[2])
        metrics = server.request("GET", "/metrics")[2].decode()
        rows = benchcmp.side_by_side(mine, theirs)
        for row, level in zip(rows, mine["levels"]):
            row["accept_length_ours"] = level["spec_accept_length"]
            row["accept_length_bench_serving"] = theirs[str(level["concurrency"])].get("accept_length")
        harness.write_json(bench_dir / "nextn-side-by-side.json", rows)
        harness.write_json(out_dir / "recordings" / "nextn_server_info.json", info)
        (out_dir / "recordings" / "nextn_metrics.txt").write_text(metrics)
        harness.write_json(out_dir / "recordings" / "nextn_ready.json", ready)
        benchcmp.plot(
            rows,
            bench_dir / "nextn-side-by-side.png",
            "H200, small Qwen3-Next-style hybrid model (dummy weights), NEXTN 3/1/4, sglang 0.5.16",
        )
    finally:
        server.stop()
    for level in mine["levels"]:
        assert level["failed"] == 0 and level["output_len_mismatch"]["count"] == 0, level
        assert level["spec_accept_length"] and level["spec_accept_length"]["value"] >= 1.0, level
    assert all(row["accept_length_bench_serving"] for row in rows), rows
