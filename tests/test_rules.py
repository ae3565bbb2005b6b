"""Every validation rule with a failing and a passing case; the seed's crashing launches are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_deploy.launch import nodes, profiles
from sglang_deploy.rules import rules

SETTINGS = profiles.load_settings()
FIXTURES = Path(__file__).parent / "fixtures"
HYBRID = {"model_architecture": "Qwen3_5MoeForConditionalGeneration"}
SPEC_AUTO = {"speculative-algorithm": "NEXTN"}
SPEC_TREE = {
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 2,
    "speculative-num-draft-tokens": 4,
}
SPEC_CHAIN = {**SPEC_TREE, "speculative-eagle-topk": 1}
# Rank 1 of a two-host group of 8 GPUs each (tp 16).
RANK1 = nodes.node("gpu-b", "pair", ["gpu-a", "gpu-b"], "10.0.0.1", 20000, 600)
GROUP = {"sglang_node": RANK1, "sglang_tp": 16}
ROUTED = {"sglang_host": "0.0.0.0", "sglang_port": 30000, "sglang_api_key": "k" * 16}


def case(args=None, env=None, version="0.5.23", facts=None, concurrency=None, settings=None):
    return {
        "args": args or {},
        "env": env or {},
        "version": version,
        "facts": facts or {},
        "concurrency": concurrency,
        "settings": settings or {},
    }


def run(c):
    profile_defs = {"t": {"description": "test", "args": c["args"], "env": c["env"]}}
    launch = profiles.render("t", profile_defs, {**SETTINGS, **c["settings"]}, c["version"])
    return rules.validate(launch, c["facts"], c["concurrency"])


# rule id -> (failing case, passing case): the rule fires on the first and not on the second.
CASES = {
    "unknown-flag": (case({"enable-ep-moe": True}), case({"enable-metrics": True})),
    "flag-arity": (case({"trust-remote-code": "yes"}), case({"trust-remote-code": True})),
    "bad-choice": (case({"attention-backend": "flash"}), case({"attention-backend": "triton"})),
    "bad-type": (case({"max-running-requests": "many"}), case({"max-running-requests": 64})),
    "spec-algorithm": (case({"speculative-algorithm": "MEDUSA"}), case(SPEC_AUTO)),
    "dropped-by-version": (
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}, version="0.5.10.post1"),
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}, version="0.5.23"),
    ),
    "config-file": (case({"conf": "/etc/sglang/extra.yaml"}), case()),  # SGLang reads flags from the file
    "open-bind": (case({"host": "0.0.0.0"}), case({"host": "0.0.0.0"}, settings={"sglang_api_key": "k" * 16})),
    # A profile's port on a replica the router reaches at the settings' port (and a loopback bind): never routed.
    "router-listen": (
        case({"port": 31000}, settings=ROUTED, facts={"router_worker_url": "http://gpu-1:30000"}),
        case({}, settings=ROUTED, facts={"router_worker_url": "http://gpu-1:30000"}),
    ),
    "spec-triple": (
        case({**SPEC_AUTO, "speculative-num-draft-tokens": 2, "speculative-eagle-topk": 1}),
        case(SPEC_CHAIN),
    ),
    "spec-v2-topk": (
        case(SPEC_TREE, {"SGLANG_ENABLE_SPEC_V2": 1}, "0.5.10.post1"),
        case(SPEC_CHAIN, {"SGLANG_ENABLE_SPEC_V2": 1}, "0.5.10.post1"),
    ),
    "spec-v1-fallback": (case(SPEC_TREE, version="0.5.12"), case(SPEC_TREE, version="0.5.23")),
    "trtllm-mha-topk": (
        case({**SPEC_TREE, "decode-attention-backend": "trtllm_mha"}),
        case({**SPEC_CHAIN, "decode-attention-backend": "trtllm_mha"}),
    ),
    "spec-running-cap": (
        case(SPEC_AUTO, concurrency=64),
        case({**SPEC_AUTO, "max-running-requests": 64}, concurrency=64),
    ),
    "hybrid-spec-extra-buffer": (
        case(SPEC_AUTO, version="0.5.10.post1", facts=HYBRID),
        case({**SPEC_AUTO, "mamba-scheduler-strategy": "extra_buffer"}, version="0.5.10.post1", facts=HYBRID),
    ),
    "extra-buffer-radix": (
        case({"mamba-radix-cache-strategy": "extra_buffer", "disable-radix-cache": True}, version="0.5.13"),
        case({"mamba-radix-cache-strategy": "extra_buffer", "disable-radix-cache": True}, version="0.5.16"),
    ),
    "extra-buffer-lazy-spec": (
        case({"speculative-algorithm": "NEXTN", "mamba-radix-cache-strategy": "extra_buffer_lazy"}, version="0.5.16"),
        case({"speculative-algorithm": "NEXTN", "mamba-radix-cache-strategy": "extra_buffer_lazy"}, version="0.5.19"),
    ),
    "extra-buffer-non-hybrid": (
        case({"mamba-radix-cache-strategy": "extra_buffer"}, facts={"model_architecture": "LlamaForCausalLM"}),
        case({"mamba-radix-cache-strategy": "extra_buffer"}, facts=HYBRID),
    ),
    "no-buffer-overlap": (
        case({"mamba-radix-cache-strategy": "no_buffer"}),
        case({"mamba-radix-cache-strategy": "no_buffer", "disable-overlap-schedule": True}),
    ),
    "mamba-track-interval": (
        case({**SPEC_CHAIN, "mamba-radix-cache-strategy": "extra_buffer", "mamba-track-interval": 2}),
        case({**SPEC_CHAIN, "mamba-radix-cache-strategy": "extra_buffer", "mamba-track-interval": 8}),
    ),
    "arch-moe-backend": (
        case({"moe-runner-backend": "flashinfer_cutedsl"}, facts={"gpu_arch": "sm_120"}),
        case({"moe-runner-backend": "flashinfer_cutlass"}, facts={"gpu_arch": "sm_120"}),
    ),
    "arch-attention-backend": (
        case({"attention-backend": "trtllm_mla"}, facts={"gpu_arch": "sm_120"}),
        case({"attention-backend": "trtllm_mla"}, facts={"gpu_arch": "sm_100"}),
    ),
    "fp4-gemm-nan": (
        case({"quantization": "modelopt_fp4"}, version="0.5.9", facts={"gpu_arch": "sm_120"}),
        case(
            {"quantization": "modelopt_fp4", "fp4-gemm-backend": "flashinfer_cudnn"},
            version="0.5.9",
            facts={"gpu_arch": "sm_120"},
        ),
    ),
    "parallel-gpus": (case(facts={"gpu_count": 4}), case(facts={"gpu_count": 8})),
    "parallel-shape": (
        case({"moe-runner-backend": "flashinfer_cutlass", "ep-size": 4}),
        case({"moe-runner-backend": "flashinfer_cutlass", "ep-size": 8}),
    ),
    "node-layout": (
        case({"nnodes": 2}),
        case(settings=GROUP, facts={"node_count": 2, "node_rank": 1}),
    ),
    "served-model-name": (case(settings={"sglang_served_model_name": "qwen:397b"}), case()),
    "model-path": (case(facts={"model_path_exists": False}), case(facts={"model_path_exists": True})),
    "quantization-checkpoint": (
        case({"quantization": "fp8"}, facts={"model_quantization": "modelopt_fp4"}),
        case({"quantization": "modelopt"}, facts={"model_quantization": "modelopt_fp4"}),
    ),
    "moe-quantization": (
        case({"moe-runner-backend": "flashinfer_cutlass", "quantization": "fp8"}),
        case({"moe-runner-backend": "flashinfer_cutlass", "quantization": "modelopt_fp4"}),
    ),
    "custom-ar-pcie": (
        case({"disable-custom-all-reduce": True}, facts={"nvlink": False, "gpu_count": 8}),
        case({"disable-custom-all-reduce": True}, facts={"nvlink": True, "gpu_count": 8}),
    ),
    "mscclpp": (
        case({"enable-mscclpp": True}, version="0.5.10.post1", settings={"sglang_tp": 4}),
        case({"enable-mscclpp": True}, version="0.5.10.post1"),
    ),
    "pcie-ipc-world": (
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}, settings={"sglang_tp": 6}),
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}),
    ),
    "pcie-ipc-nvlink": (
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}, facts={"nvlink": True}),
        case(env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}, facts={"nvlink": False}),
    ),
}


def test_every_rule_has_cases():
    assert set(CASES) == {r.id for r in rules.RULES}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fails_then_passes(rule_id):
    bad, good = CASES[rule_id]
    level = next(r.level for r in rules.RULES if r.id == rule_id)
    fired = [f for f in run(bad) if f.rule == rule_id and f.level == level]
    assert fired, f"{rule_id} did not fire"
    assert all(f.message and "skipped" not in f.message for f in fired)
    assert not [f for f in run(good) if f.rule == rule_id and f.level != rules.INFO]


@pytest.mark.parametrize("rule_id", ["arch-moe-backend", "parallel-gpus", "model-path", "spec-running-cap"])
def test_unknown_facts_skip_with_info(rule_id):
    bad, _ = CASES[rule_id]
    skipped = [f for f in run({**bad, "facts": {}, "concurrency": None}) if f.rule == rule_id]
    assert [f.level for f in skipped] == [rules.INFO] and "skipped" in skipped[0].message


def test_zero_gpus_counts_as_unknown():
    findings = run(case(facts={"gpu_count": 0}))
    assert [f.level for f in findings if f.rule == "parallel-gpus"] == [rules.INFO]
    assert rules.gpu_facts({"count": 0, "arch": None}) == {}
    assert rules.gpu_facts({"count": 8, "arch": "sm_120", "nvlink": False}) == {
        "gpu_arch": "sm_120",
        "gpu_count": 8,
        "nvlink": False,
    }


@pytest.mark.parametrize(
    ("arch", "version", "refused"),
    [
        ("sm_90", "0.5.16", True),
        ("sm_120", "0.5.16", True),
        ("sm_100", "0.5.16", False),
        ("sm_90", "0.5.19", False),
        ("sm_89", "0.5.23", True),
    ],
)
def test_trtllm_mha_prefill_outside_sm100(arch, version, refused):
    found = [
        f
        for f in run(case({"attention-backend": "trtllm_mha"}, version=version, facts={"gpu_arch": arch}))
        if f.rule == "arch-attention-backend"
    ]
    assert bool(found) == refused, found


def test_sm100_trtllm_moe_allowed_sm120_refused():
    args = {"moe-runner-backend": "flashinfer_trtllm"}
    assert [f for f in run(case(args, facts={"gpu_arch": "sm_120"})) if f.rule == "arch-moe-backend"]
    assert not [f for f in run(case(args, facts={"gpu_arch": "sm_100"})) if f.rule == "arch-moe-backend"]


def test_operator_command_unknown_flag_on_0_5_20_style_names():
    findings = run(case({"enable-ep-moe": True, "cuda-graph-max-bs": 8}))
    unknown = [f for f in findings if f.rule == "unknown-flag"]
    assert len(unknown) == 1 and "--enable-ep-moe" in unknown[0].message  # cuda-graph-max-bs is translated


SEED = profiles.load_profiles(FIXTURES / "seed_launches.yml")
SEED_FACTS = {
    "gpu_arch": "sm_120",
    "gpu_count": 8,
    "nvlink": False,
    "model_architecture": "Qwen3_5MoeForConditionalGeneration",
    "model_quantization": "modelopt_fp4",
}


@pytest.mark.parametrize(
    "name, version, refused_by",
    [
        ("seed-msg5980", "0.5.10.post1", {"hybrid-spec-extra-buffer", "spec-triple"}),
        ("seed-msg5980", "0.5.9", {"hybrid-spec-extra-buffer", "spec-triple"}),
        ("seed-msg5983", "0.5.10.post1", {"spec-triple"}),
        ("seed-spec-v2-topk2", "0.5.10.post1", {"spec-v2-topk"}),
        ("seed-msg5980", "0.5.23", {"spec-triple"}),  # the assert survives in 0.5.23
        ("seed-msg6001", "0.5.10.post1", set()),
        ("seed-msg6001", "0.5.23", set()),
        ("seed-baseline", "0.5.9", set()),
    ],
)
def test_seed_launches(name, version, refused_by):
    launch = profiles.render(name, SEED, SETTINGS, version)
    findings = rules.validate(launch, SEED_FACTS, concurrency=32)
    assert {f.rule for f in rules.errors(findings)} == refused_by


def test_model_facts_from_config(tmp_path):
    config = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert rules.model_facts_from_path(tmp_path) == {
        "model_architecture": "Qwen3_5MoeForConditionalGeneration",
        "model_quantization": "modelopt_fp4",
    }
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert rules.model_facts_from_path(tmp_path / "config.json")["model_quantization"] == "none"
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    assert rules.model_facts_from_path(tmp_path)["model_quantization"] == "modelopt_fp4"


def test_renamed_flag_accepted_between_recorded_releases(monkeypatch):
    from sglang_deploy.launch import flags

    monkeypatch.setattr(flags, "recorded_releases", lambda: ["0.5.10.post1", "0.5.23"])
    findings = run(case({"mamba-scheduler-strategy": "extra_buffer"}, version="0.5.16"))
    assert not [f for f in findings if f.rule == "unknown-flag"]
    findings = run(case({"mamba-radix-cache-strategy": "extra_buffer", "enable-ep-moe": True}, version="0.5.16"))
    assert [f.message.split()[0] for f in findings if f.rule == "unknown-flag"] == ["--enable-ep-moe"]


REAL = Path(__file__).parent / "fixtures" / "sglang-0.5.16-h200"


def _args_of(argv: list) -> dict:
    """A rendered argv back into profile args (values as strings, bare switches true)."""
    args, i = {}, 0
    while i < len(argv):
        takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        args[argv[i][2:]] = argv[i + 1] if takes_value else True
        i += 2 if takes_value else 1
    return args


@pytest.mark.parametrize("row", json.loads((REAL / "verdicts.json").read_text())["rows"], ids=lambda r: r["case"])
def test_rules_predict_what_real_sglang_did(row):
    """Recorded by tests/gpu/test_rules_real.py: sglang 0.5.16 on an H200 refused these launches at startup or
    served them; the rules must refuse exactly the ones it refused."""
    profile_defs = {"t": {"description": "recorded", "args": _args_of(row["argv"]), "env": {}}}
    launch = profiles.render("t", profile_defs, {}, "0.5.16")
    facts = {
        **json.loads((REAL / "verdicts.json").read_text())["gpu"],
        "model_path_exists": True,
        **rules.model_facts_from_path(REAL / "models" / row["model"]),
    }
    refused = rules.errors(rules.validate(launch, facts))
    assert bool(refused) == (row["outcome"] == "refused at startup"), (row["outcome"], refused)


def test_spec_running_cap_has_one_source(monkeypatch):
    """The rule warns at the cap the emulated server applies: one constant, the collection's
    module_utils/sglang_defaults.py. The emulator imports it (no copy or link in emulator/), and the lookup that ships
    the emulator to lab hosts ships that file beside it."""
    from ansible_collections.sglang.deploy.plugins.module_utils import sglang_defaults
    from sglang_deploy.emulator import config

    emulator = Path(config.__file__).parent
    assert not (emulator / "sglang_defaults.py").exists()
    assert config.SPEC_DEFAULT_MAX_RUNNING is sglang_defaults.SPEC_DEFAULT_MAX_RUNNING
    from ansible_collections.sglang.deploy.plugins.lookup import sglang_emulator_sources as sources

    shipped = [Path(p) for p in sources.LookupModule().run([])]
    assert [p for p in shipped if p.name == "sglang_defaults.py"] == [Path(sglang_defaults.__file__).resolve()]
    monkeypatch.setattr(sglang_defaults, "SPEC_DEFAULT_MAX_RUNNING", 40)
    fired = [f.message for f in run(case(SPEC_AUTO, concurrency=44)) if f.rule == "spec-running-cap"]
    assert fired and "> 40 running requests" in fired[0]


@pytest.mark.parametrize(
    "args",
    [
        {"host": "127.0.0.1"},
        {"port": 31000},
        {"host": "localhost", "port": 30000},
        *({"host": h} for h in ("LOCALHOST", "127.1", "::ffff:127.0.0.1", "localhost.")),
    ],
)
def test_a_replica_behind_the_router_listens_where_the_router_reaches_it(args):
    """A profile's host/port used to pass on a replica: it served on its own port, the router's health check never
    saw it, and the roll stopped with the new profile running outside the router."""
    found = run(case(args, settings=ROUTED, facts={"router_worker_url": "http://gpu-1:30000"}))
    (error,) = [f for f in found if f.rule == "router-listen"]
    assert error.level == rules.ERROR and "Remove host/port from the profile" in error.message
    assert not [f for f in run(case(args, settings=ROUTED)) if f.rule == "router-listen"]  # a host of its own
