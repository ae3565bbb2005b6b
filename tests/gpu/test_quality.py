"""The quality gate (ansible_collections.sglang.deploy.plugins.module_utils.quality, docs/quality.md) on real SGLang, small dense model, dummy weights (so
the fingerprint only: random weights answer no question): the shape of /generate's logprobs as the gate reads them,
whether greedy tokens hold across restarts of one launch, whether the attention backend or CUDA graphs move them, and
how long the gate takes. Writes quality.json (every launch's drift against the first and the gate's seconds).

    python -m pytest tests/gpu/test_quality.py -v --gpu-out results/gpu-quality

Tests run in file order; each launch is a server of its own, stopped before the next starts.
"""

from __future__ import annotations

import time

import harness
import pytest
from harness import API_KEY, DENSE_ARGS, Server

from ansible_collections.sglang.deploy.plugins.module_utils import quality

GATE_BUDGET_S = 10.0  # what the gate may add to a deploy (issue 49)
RESTARTS = 3
VARIANTS = {
    "triton-attention": {**DENSE_ARGS, "attention-backend": "triton"},
    "no-cuda-graph": {**DENSE_ARGS, "disable-cuda-graph": True},
}
SEEN: dict = {}


def gated(models, out_dir, label: str, args: dict) -> dict:
    """Start a server of ``args``, run the gate against the first launch's fingerprint, stop it."""
    server = Server(harness.render(args, models["dense"]), out_dir / "logs", label)
    try:
        server.wait_ready(timeout=540)
        start = time.monotonic()
        reference = SEEN.get("restart-1", {}).get("fingerprint")
        found = quality.gate(server.url, "tiny", API_KEY, reference=reference)
        found["gate_s"] = round(time.monotonic() - start, 2)
    finally:
        server.stop()
    SEEN[label] = found
    return found


def test_the_fingerprint_reads_real_sglangs_logprobs(models, out_dir):
    found = gated(models, out_dir, "restart-1", DENSE_ARGS)
    assert found["dummy_weights"] is True and found["answers"] is None
    prints = found["fingerprint"]
    assert [p["prompt"] for p in prints] == list(quality.FINGERPRINT_PROMPTS)
    for p in prints:
        assert len(p["ids"]) == len(p["logprobs"]) == quality.DEFAULTS["fingerprint_tokens"], p
        assert all(len(row) == quality.DEFAULTS["top_k"] for row in p["top"]), p["top"][:2]
        assert [row[0] for row in p["top"]] == p["ids"], "the chosen token is not the top one: not greedy"
    assert quality.broken(prints, dummy=True) == [] and found["passed"], found["problems"]
    assert found["gate_s"] <= GATE_BUDGET_S


@pytest.mark.parametrize("n", range(2, RESTARTS + 1))
def test_greedy_tokens_hold_across_restarts(models, out_dir, n):
    found = gated(models, out_dir, f"restart-{n}", DENSE_ARGS)
    assert found["passed"], found["problems"]
    assert found["gate_s"] <= GATE_BUDGET_S


@pytest.mark.parametrize("label", VARIANTS)
def test_what_a_backend_change_does_to_greedy_tokens(models, out_dir, label):
    """Recorded, not judged: how far another attention backend or no CUDA graphs moves greedy tokens."""
    found = gated(models, out_dir, label, VARIANTS[label])
    assert quality.broken(found["fingerprint"], dummy=True) == []


def test_write_the_record(out_dir):
    harness.write_json(
        out_dir / "quality.json",
        {
            label: {k: found[k] for k in ("passed", "problems", "drift", "gate_s", "dummy_weights")}
            | {"fingerprint": found["fingerprint"]}
            for label, found in SEEN.items()
        },
    )
    assert SEEN
