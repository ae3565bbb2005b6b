"""The emulator's SYNTHETIC performance model (emulator/perf.py) and the lab's model (group_vars/lab.yml): what it
does to a launch, and which candidates of the README's example search it makes best, crash or print garbage."""

from __future__ import annotations

import json

import pytest
import yaml

from sglang_deploy.launch import profiles
from sglang_deploy import tune
from sglang_deploy.emulator import perf
from sglang_deploy.emulator.config import FAULTS, Config
from sglang_deploy.paths import REPO
from test_tune import LAB_FACTS

LAB_MODEL = yaml.safe_load((REPO / "group_vars" / "lab.yml").read_text())["sglang_lab_perf_model"]
ARGV = ["--model-path", "/m", "--moe-runner-backend", "triton", "--enable-mscclpp"]


def config(argv, **env) -> Config:
    return Config(
        argv,
        {
            "SGLANG_EMU_DECODE_TOK_S": "100",
            "SGLANG_EMU_AGGREGATE_TOK_S": "1000",
            perf.ENV: json.dumps(LAB_MODEL),
            **env,
        },
    )


def test_flags_and_environment_scale_the_rates():
    cfg = config(ARGV)
    assert cfg.decode_tok_s == pytest.approx(100 * 0.80 * 1.10) and cfg.aggregate_tok_s == pytest.approx(
        1000 * 0.75 * 1.05
    )
    assert cfg.fault is None and cfg.settings()["perf_model"] == {
        "synthetic": True,
        "rules_matched": [0, 2],
        "multipliers": {"decode": 0.88, "aggregate": 0.7875, "ttft": 1.0},
    }
    plain = Config(["--model-path", "/m"], {})
    assert plain.decode_tok_s == 172.0 and plain.settings()["perf_model"] is None


def test_combinations_crash_or_print_garbage():
    assert config(ARGV, SGLANG_ENABLE_PCIE_IPC_ALLREDUCE="1").fault == "garbage"
    crash = config(["--model-path", "/m", "--enable-mscclpp", "--speculative-algorithm", "NEXTN"])
    assert crash.fault == "crash_on_load" and "synthetic crash" in crash.fault_message
    assert config(ARGV, SGLANG_ENABLE_PCIE_IPC_ALLREDUCE="1", SGLANG_EMU_FAULT="never_ready").fault == "never_ready"


@pytest.mark.parametrize(
    "model, needle",
    [
        ("{", "is not JSON"),
        ('{"a": 1}', "JSON list"),
        ('[{"when": {}}]', "non-empty mapping 'when'"),
        ('[{"when": {"x": 1}, "decode": 0}]', "positive multiplier"),
        ('[{"when": {"x": 1}, "fault": "boom"}]', "fault must be"),
    ],
)
def test_a_bad_model_is_refused_with_the_reason(model, needle):
    with pytest.raises(perf.ModelError, match=needle):
        perf.parse(model, FAULTS)


def expected(search: tune.Search) -> dict:
    """Per runnable candidate of the search: the lab model's outcome for its rendered launch."""
    hosts = [tune.HostFacts("lab", profiles.load_profiles(), profiles.load_settings(), "0.5.23", LAB_FACTS, {}, True)]
    out = {}
    for p in tune.plan(search, tune.expand(search)[0], hosts):
        if p.pruned:
            continue
        launch = p.launches["lab"]
        flags = {k.replace("-", "_"): v for k, v in launch["args"].items()}
        out[p.candidate.label] = perf.apply(LAB_MODEL, flags, launch["env"])
    return out


def test_the_example_search_has_a_known_optimum_one_crash_kind_and_one_garbage_kind():
    search = tune.load_search(REPO / "examples" / "tune-lab.yml")
    cands, excluded = tune.expand(search)
    assert len(cands) >= 24
    got = expected(search)
    assert len(got) == 12
    crash = sorted(lb for lb, r in got.items() if r["fault"] == "crash_on_load")
    garbage = sorted(lb for lb, r in got.items() if r["fault"] == "garbage")
    assert crash and garbage and all("mscclpp" in lb and "nextn" in lb for lb in crash)
    ok = {lb: r for lb, r in got.items() if r["fault"] is None}
    best_decode = max(ok, key=lambda lb: ok[lb]["decode"])
    best_aggregate = max(ok, key=lambda lb: ok[lb]["aggregate"])
    assert best_decode == "moe-runner-backend=flashinfer_cutlass, allreduce=pcie-ipc, spec=nextn"
    assert best_aggregate == "moe-runner-backend=flashinfer_cutlass, allreduce=pcie-ipc, spec=off"
