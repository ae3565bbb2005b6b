"""Issue item 3: every rule this GPU and release can exercise, predicted by `rules.validate` and then forced
past it on real SGLang. A launch refused at startup must be one the rules refuse, and the readiness code must
report the real traceback within 3 s of the process exit. Writes verdicts.json (the table in docs/gpu.md)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import harness
import pytest
from harness import Server

from sglang_deploy.rules import rules
from ansible_collections.sglang.deploy.plugins.module_utils import readiness

REPORT_WITHIN_S = 3.0
# Launches run side by side: each caps its KV pool (max-total-tokens), so the memory check's fraction of the
# whole GPU leaves room for the others.
SMALL = {
    "load-format": "dummy",
    "mem-fraction-static": 0.9,
    "max-total-tokens": 16384,
    "max-running-requests": 16,
    "sampling-backend": "pytorch",
    "disable-prefill-cuda-graph": True,
    "cuda-graph-max-bs": 8,
}
NEXTN = {
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
}

# (case, model, profile args, what it exercises). The seed's three crashes come first.
CASES = (
    (
        "seed-topk-draft-without-steps",
        "hybrid",
        {
            "speculative-algorithm": "NEXTN",
            "speculative-eagle-topk": 4,
            "speculative-num-draft-tokens": 8,
        },
        "spec-triple: topk/draft without steps (the seed's spec v2 launch)",
    ),
    (
        "hybrid-nextn-no-buffer",
        "hybrid",
        {**NEXTN, "mamba-radix-cache-strategy": "no_buffer"},
        "no-buffer-overlap: NEXTN on the hybrid model, no_buffer with the overlap scheduler",
    ),
    (
        "trtllm-mha-on-sm90",
        "dense",
        {"attention-backend": "trtllm_mha"},
        "arch-attention-backend: a backend this GPU lacks (trtllm-gen prefill is SM100-only)",
    ),
    (
        "hybrid-nextn-extra-buffer-lazy",
        "hybrid",
        {**NEXTN, "mamba-radix-cache-strategy": "extra_buffer_lazy"},
        "extra_buffer_lazy with speculative decoding",
    ),
    (
        "hybrid-track-interval-below-draft",
        "hybrid",
        {
            **NEXTN,
            "mamba-radix-cache-strategy": "extra_buffer",
            "mamba-track-interval": 2,
        },
        "mamba-track-interval: interval < draft tokens",
    ),
    (
        "hybrid-extra-buffer-no-radix",
        "hybrid",
        {"mamba-radix-cache-strategy": "extra_buffer", "disable-radix-cache": True},
        "extra-buffer-radix: extra_buffer with the radix cache off",
    ),
    (
        "dense-extra-buffer",
        "dense",
        {"mamba-radix-cache-strategy": "extra_buffer"},
        "extra-buffer-non-hybrid: extra_buffer on a model without mamba state",
    ),
    (
        "served-name-with-colon",
        "dense",
        {"served-model-name": "tiny:v1"},
        "served-model-name with ':'",
    ),
    ("unknown-flag", "dense", {"no-such-flag": 1}, "unknown-flag"),
    ("bad-choice", "dense", {"attention-backend": "no_such_backend"}, "bad-choice"),
    (
        "tp-over-gpu-count",
        "dense",
        {"tp-size": 4},
        "parallel-gpus: tp above the GPU count",
    ),
    (
        "hybrid-nextn-topk4",
        "hybrid",
        {**NEXTN, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 8},
        "spec v2 (the only path since 0.5.14) with topk 4, steps given",
    ),
    (
        "hybrid-nextn-auto",
        "hybrid",
        dict(NEXTN),
        "control: NEXTN on the hybrid model, default strategy",
    ),
    (
        "dense-fa3",
        "dense",
        {"attention-backend": "fa3"},
        "control: fa3 (SM90-only) on SM90",
    ),
)


def run_case(case, model_dir, args, facts, log_dir, gpus) -> dict:
    launch = harness.render({**SMALL, **args}, model_dir)
    findings = rules.validate(
        launch,
        {**facts, **rules.model_facts_from_path(model_dir), "model_path_exists": True},
    )
    predicted = sorted({f.rule for f in rules.errors(findings)})
    warnings = sorted({f.rule for f in findings if f.level == rules.WARNING})
    server = Server(launch, log_dir, case, gpus=gpus)
    row = {
        "case": case,
        "argv": launch.argv,
        "predicted_errors": predicted,
        "predicted_warnings": warnings,
    }
    try:
        ready = server.wait_ready(timeout=420, sleep=0.5)
        row.update(outcome="served", ready_s=ready["elapsed"])
    except readiness.ServerDied as exc:
        reported = time.monotonic()
        while server.exited_at is None and time.monotonic() - reported < 5:
            time.sleep(0.05)
        error_lines = [line for line in exc.journal if "Error" in line or "error:" in line]
        row.update(
            outcome="refused at startup",
            reason=exc.reason,
            report_delay_s=round(reported - server.exited_at, 3) if server.exited_at else None,
            traceback="Traceback (most recent call last)" in "\n".join(exc.journal),
            error=error_lines[-1].strip() if error_lines else None,
            exit_status=server.proc.returncode,
        )
    except readiness.NotReady as exc:
        row.update(outcome="not ready in time", reason=str(exc))
    finally:
        row["stop"] = server.stop()
    return row


@pytest.fixture(scope="module")
def verdicts(out_dir, models):
    facts = rules.gpu_facts(harness.gpu_facts())
    log_dir = out_dir / "logs" / "rules"
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = [
            pool.submit(
                run_case,
                case,
                models[model],
                args,
                facts,
                log_dir,
                None if "tp-size" in args else str(i % facts["gpu_count"]),
            )
            for i, (case, model, args, _) in enumerate(CASES)
        ]
        rows = [f.result() for f in futures]
    for row, (_, model, _, what) in zip(rows, CASES):
        row["model"] = model
        row["exercises"] = what
        row["agree"] = bool(row["predicted_errors"]) == (row["outcome"] == "refused at startup")
    harness.write_json(
        out_dir / "verdicts.json",
        {"gpu": facts, "sglang": harness.SGLANG_VERSION, "rows": rows},
    )
    return {row["case"]: row for row in rows}


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_rule_prediction_matches_real_sglang(verdicts, case):
    row = verdicts[case]
    assert row["outcome"] != "not ready in time", row
    assert row["agree"], row


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_crash_reported_with_traceback_within_3s(verdicts, case):
    row = verdicts[case]
    if row["outcome"] != "refused at startup":
        pytest.skip(f"{case} served")
    assert row["report_delay_s"] is not None and row["report_delay_s"] <= REPORT_WITHIN_S, row
    assert row["error"], row
