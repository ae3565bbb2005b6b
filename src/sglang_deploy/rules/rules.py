"""Pre-launch validation: rules that refuse launches SGLang would crash on (or run wrongly) before a host is touched.

``validate(launch, facts, concurrency)`` runs every rule in RULES on a rendered ``Launch``. Facts (all optional):

    gpu_arch           "sm_120"          (GPU facts module: sglang_gpu.arch)
    gpu_count          8                 (sglang_gpu.count; 0 = no GPU seen, treated as unknown)
    nvlink             False             (sglang_gpu.nvlink)
    model_architecture "Qwen3_5MoeForConditionalGeneration"   (config.json architectures[0])
    model_quantization "modelopt_fp4"    (config.json quantization_config / hf_quant_config.json; "none")
    model_path_exists  True              (checked on the host)
    api_key_set        True              (sglang_api_key is set, when the launch is rendered without it)
    allow_open_bind    False             (sglang_server_allow_open_bind)
    node_count         2                 (hosts of the host's multi-node group; default 1, a server of its own)
    node_rank          0                 (the host's place in that group, inventory order)
    router_worker_url  "http://gpu-1:30000" (where the router reaches the host; only for a replica it routes to)

A rule whose facts are unknown is skipped with an ``info`` finding that says which facts it needed.
Sources: SGLang's own argument checks, python/sglang/srt/server_args.py (ServerArgs.__post_init__ and its
_handle_* methods; from 0.5.14 also python/sglang/srt/arg_groups/*_hook.py).
Here: the rules on flags, the listen address, speculative decoding and hybrid models, and RULES, the table of all;
hardware_rules.py: GPU, parallel shape, checkpoint, all-reduce; rule_context.py: what a rule sees; launch_facts.py:
the facts read from a checkpoint and the GPU facts.
"""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import urlsplit

from packaging.version import Version

from . import hardware_rules
from ansible_collections.sglang.deploy.plugins.module_utils import sglang_defaults
from ..launch.flags import FLAG_RENAMES, SPEC_V2_ENV, is_truthy
from .launch_facts import MAX_CONFIG_BYTES, ModelConfigError, gpu_facts, model_facts, model_facts_from_path
from ..launch.profiles import Launch, ProfileError, render
from .rule_context import ATTENTION_FLAGS, ERROR, INFO, WARNING, Ctx, Finding, Rule

# What callers use: the rules and the facts they read (launch_facts), in one place.
__all__ = [
    "ERROR",
    "INFO",
    "RULES",
    "WARNING",
    "MAX_CONFIG_BYTES",
    "Finding",
    "ModelConfigError",
    "check",
    "errors",
    "gpu_facts",
    "model_facts",
    "model_facts_from_path",
    "validate",
]

HYBRID_ARCHS = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
    }
)
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
SPEC_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO"})
DEFAULT_MAMBA_TRACK_INTERVAL = 256


# --- flags known to the release -------------------------------------------------------------


def _renamed_after_list(ctx: Ctx, name: str) -> bool:
    """A new name from FLAG_RENAMES the (older) recorded list cannot know yet, e.g. 0.5.14 checked with 0.5.10.post1."""
    return any(r.new == name and Version(ctx.table.release) < Version(r.since) <= ctx.version for r in FLAG_RENAMES)


def _unknown_flag(ctx: Ctx):
    for name in ctx.args:
        if ctx.table.lookup(name) is None and not _renamed_after_list(ctx, name):
            hint = ctx.table.suggest(name)
            fix = f"did you mean {', '.join('--' + h for h in hint)}?" if hint else "remove it from the profile"
            yield (
                f"--{name} is not a flag of sglang {ctx.launch.sglang_version} (recorded list {ctx.table.release});"
                f" the server would exit with 'unrecognized arguments': {fix}"
            )


def _flag_arity(ctx: Ctx):
    for name, value in ctx.args.items():
        found = ctx.table.lookup(name)
        if not found or value is False:
            continue
        spec = found[1]
        if not spec["takes_value"] and value is not True:
            yield f"--{name} is a switch in sglang {ctx.table.release} but the profile gives it {value!r}: use true or false"
        elif spec["takes_value"] and value is True and spec["nargs"] not in ("?", "*"):
            yield f"--{name} needs a value in sglang {ctx.table.release} but the profile sets it to true: give a value"


def _bad_choice(ctx: Ctx):
    for name, value in ctx.args.items():
        found = ctx.table.lookup(name)
        if not found or not found[1]["choices"] or isinstance(value, bool):
            continue
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if str(v) not in found[1]["choices"]:
                yield (
                    f"--{name} {v}: not a choice in sglang {ctx.table.release};"
                    f" use one of {', '.join(found[1]['choices'])}"
                )


def _bad_type(ctx: Ctx):
    casts = {"int": int, "float": float}
    for name, value in ctx.args.items():
        found = ctx.table.lookup(name)
        cast = casts.get(found[1]["type"]) if found else None
        if cast is None or isinstance(value, bool):
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            try:
                cast(str(v))
            except ValueError:
                yield f"--{name} {v!r}: sglang parses it as {found[1]['type']}; give a number"


def _spec_algorithm(ctx: Ctx):
    if ctx.spec and ctx.spec not in SPEC_ALGORITHMS:
        yield (
            f"--speculative-algorithm {ctx.arg('speculative-algorithm')}: not a builtin algorithm"
            f" ({', '.join(sorted(SPEC_ALGORITHMS))}); SGLang raises 'Unknown speculative algorithm name'"
            " unless a plugin registers it"
        )


def _dropped(ctx: Ctx):
    if ctx.launch.dropped:
        yield (
            f"sglang {ctx.launch.sglang_version} has no {', '.join(ctx.launch.dropped)}: dropped from the launch,"
            " so this profile's lever has no effect there (see the render notes)"
        )


def _config_file(ctx: Ctx):
    if ctx.arg("config"):
        yield (
            f"--config {ctx.arg('config')}: SGLang reads more flags from that file when it starts, and no rule here"
            " sees them (nor the secrets, the listen address or the parallel shape they may set): put the flags in"
            " the profile, or check the file yourself"
        )


def _open_bind(ctx: Ctx):
    listen = ctx.launch.listen
    has_key = ctx.launch.secret_env or ctx.facts.get("api_key_set")
    if listen["open"] and not has_key and not ctx.facts.get("allow_open_bind"):
        yield (
            f"the launch listens on {listen['host'] or '(all interfaces)'}, reachable from other hosts, and"
            " sglang_api_key is empty: anyone who reaches this host can use the server. Set sglang_api_key (vault it),"
            " bind to 127.0.0.1, or acknowledge with sglang_server_allow_open_bind=true"
        )


def _router_listen(ctx: Ctx):
    """A replica behind the router must listen where the router, the drain and status reach it."""
    url = ctx.facts.get("router_worker_url")
    if not url:
        return
    listen = ctx.launch.listen
    parsed = urlsplit(str(url))
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        port = None
    if port != listen["port"] or not listen["open"]:
        yield (
            f"the router reaches this replica at {url}, but the launch listens on {listen['host']}:{listen['port']}:"
            " the router would never see it serve. Remove host/port from the profile; set sglang_host/sglang_port"
            " (and sglang_router_worker_url) for the host instead"
        )


# --- speculative decoding ---------------------------------------------------------------------


def _spec_triple(ctx: Ctx):
    if ctx.spec not in EAGLE_FAMILY or ctx.arg("speculative-num-steps") is not None or ctx.on("speculative-adaptive"):
        return
    given = [f"--{n}" for n in ("speculative-eagle-topk", "speculative-num-draft-tokens") if ctx.arg(n) is not None]
    if given:
        yield (
            f"{' and '.join(given)} without --speculative-num-steps: SGLang asserts all three are set or none"
            " (bare AssertionError at startup); drop them to auto-choose (3/1/4) or set --speculative-num-steps too"
        )


def _spec_v2_topk(ctx: Ctx):
    topk = ctx.int_arg("speculative-eagle-topk", 1)
    if ctx.spec not in EAGLE_FAMILY or topk <= 1:
        return
    if ctx.version_in(hi="0.5.11") and is_truthy(ctx.env.get(SPEC_V2_ENV, "0")):
        yield (
            f"{SPEC_V2_ENV}=1 with --speculative-eagle-topk {topk}: sglang {ctx.launch.sglang_version} raises"
            " 'Spec v2 currently only supports topk = 1'; use topk 1 or unset the variable (spec v1)"
        )


def _spec_v1_fallback(ctx: Ctx):
    topk = ctx.int_arg("speculative-eagle-topk", 1)
    if ctx.spec in EAGLE_FAMILY and topk > 1 and ctx.version_in("0.5.11", "0.5.13"):
        yield (
            f"--speculative-eagle-topk {topk} on sglang {ctx.launch.sglang_version}: spec v2 only does topk 1, so it"
            " silently falls back to spec v1 with the overlap scheduler off; use topk 1 to keep overlap"
        )


def _trtllm_mha_topk(ctx: Ctx):
    topk = ctx.int_arg("speculative-eagle-topk", 1)
    if ctx.spec and topk > 1 and any(ctx.arg(f) == "trtllm_mha" for f in ATTENTION_FLAGS):
        yield "trtllm_mha with --speculative-eagle-topk > 1: SGLang raises 'trtllm_mha backend only supports topk = 1'"


def _spec_running_cap(ctx: Ctx):
    capped = ctx.spec and ctx.spec != "NGRAM"
    # One constant with the emulated server, which holds it because it runs on hosts without this package.
    limit = ctx.int_arg("max-running-requests") or (sglang_defaults.SPEC_DEFAULT_MAX_RUNNING if capped else None)
    if limit is not None and ctx.concurrency > limit:
        why = (
            ""
            if ctx.arg("max-running-requests")
            else f"speculative decoding sets --max-running-requests {limit} when unset; "
        )
        yield (
            f"benchmark concurrency {ctx.concurrency} > {limit} running requests ({why}the rest queue and the"
            f" decode CUDA graphs stop at {limit}): set --max-running-requests >= {ctx.concurrency} or lower the concurrency"
        )


# --- hybrid (Mamba / GDN) models --------------------------------------------------------------


def _hybrid_spec_buffer(ctx: Ctx):
    if not (
        ctx.facts["model_architecture"] in HYBRID_ARCHS
        and ctx.spec
        and ctx.version_in(hi="0.5.14")
        and not ctx.on("disable-radix-cache")
    ):
        return
    if ctx.mamba_strategy != "extra_buffer":
        yield (
            f"speculative decoding on the hybrid {ctx.facts['model_architecture']} with radix cache and mamba strategy"
            f" {ctx.mamba_strategy} (auto = no_buffer up to 0.5.13): sglang {ctx.launch.sglang_version} raises at startup;"
            " add mamba-scheduler-strategy: extra_buffer (or disable-radix-cache)"
        )


def _extra_buffer_radix(ctx: Ctx):
    # 0.5.9-0.5.13 server_args.py::_handle_mamba_radix_cache raises; 0.5.16 served it on an H200.
    if ctx.mamba_strategy.startswith("extra_buffer") and ctx.on("disable-radix-cache") and ctx.version_in(hi="0.5.14"):
        yield "mamba extra_buffer with --disable-radix-cache: SGLang raises; use no_buffer, or keep the radix cache"


def _extra_buffer_lazy_spec(ctx: Ctx):
    # 0.5.14-0.5.16 server_args.py::_validate_mamba_extra_buffer asserts; 0.5.17 allows it (DFLASH aside).
    if ctx.mamba_strategy == "extra_buffer_lazy" and ctx.spec and ctx.version_in(hi="0.5.17"):
        yield (
            f"mamba extra_buffer_lazy with speculative decoding on sglang {ctx.launch.sglang_version}: asserts"
            " 'extra_buffer_lazy unsupported with spec.' at startup; use extra_buffer"
        )


def _extra_buffer_non_hybrid(ctx: Ctx):
    arch = ctx.facts["model_architecture"]
    if ctx.mamba_strategy.startswith("extra_buffer") and arch not in HYBRID_ARCHS:
        yield (
            f"mamba {ctx.mamba_strategy} on {arch}, which has no mamba state: SGLang refuses it, or (0.5.16) crashes at"
            " the first request (TypeError in the mamba track buffer); remove the strategy flag"
        )


def _no_buffer_overlap(ctx: Ctx):
    if ctx.version_in("0.5.14") and ctx.mamba_strategy == "no_buffer" and not ctx.on("disable-overlap-schedule"):
        yield (
            f"explicit mamba no_buffer on sglang {ctx.launch.sglang_version} asserts 'no_buffer do not support overlap"
            " schedule': add disable-overlap-schedule: true, or use auto/extra_buffer"
        )


def _track_interval(ctx: Ctx):
    if not ctx.mamba_strategy.startswith("extra_buffer"):
        return
    interval = ctx.int_arg("mamba-track-interval", DEFAULT_MAMBA_TRACK_INTERVAL)
    draft = ctx.int_arg("speculative-num-draft-tokens")
    page = ctx.int_arg("page-size")
    if draft is not None and interval < draft:
        yield f"--mamba-track-interval {interval} < --speculative-num-draft-tokens {draft}: extra_buffer asserts; raise the interval"
    if page and interval % page:
        yield f"--mamba-track-interval {interval} is not a multiple of --page-size {page}: extra_buffer asserts"


RULES: tuple[Rule, ...] = (
    Rule("unknown-flag", ERROR, "flag unknown to the target release", (), _unknown_flag),
    Rule("flag-arity", ERROR, "switch given a value / value flag given none", (), _flag_arity),
    Rule("bad-choice", ERROR, "value outside the release's choices", (), _bad_choice),
    Rule("bad-type", ERROR, "non-numeric value for an int/float flag", (), _bad_type),
    Rule("spec-algorithm", WARNING, "speculative algorithm not builtin", (), _spec_algorithm),
    Rule("dropped-by-version", WARNING, "profile flag/env var dropped for this release", (), _dropped),
    Rule("config-file", WARNING, "flags from SGLang's --config file go unchecked", (), _config_file),
    Rule("open-bind", ERROR, "reachable from other hosts without an API key", (), _open_bind),
    Rule("spec-triple", ERROR, "topk/draft tokens without num-steps (seed crash 1)", (), _spec_triple),
    Rule("spec-v2-topk", ERROR, "spec v2 with topk > 1 raises (<= 0.5.10.post1)", (), _spec_v2_topk),
    Rule("spec-v1-fallback", WARNING, "topk > 1 falls back to spec v1 (0.5.11-0.5.12)", (), _spec_v1_fallback),
    Rule("trtllm-mha-topk", ERROR, "trtllm_mha with topk > 1", (), _trtllm_mha_topk),
    Rule(
        "spec-running-cap",
        WARNING,
        "running-request cap below benchmark concurrency",
        ("concurrency",),
        _spec_running_cap,
    ),
    Rule(
        "hybrid-spec-extra-buffer",
        ERROR,
        "spec on hybrid model without extra_buffer (<= 0.5.13; seed crash 2)",
        ("model_architecture",),
        _hybrid_spec_buffer,
    ),
    Rule("extra-buffer-radix", ERROR, "extra_buffer with radix cache disabled", (), _extra_buffer_radix),
    Rule(
        "extra-buffer-lazy-spec",
        ERROR,
        "extra_buffer_lazy with speculative decoding (0.5.14-0.5.16)",
        (),
        _extra_buffer_lazy_spec,
    ),
    Rule(
        "extra-buffer-non-hybrid",
        ERROR,
        "extra_buffer on a model without mamba state",
        ("model_architecture",),
        _extra_buffer_non_hybrid,
    ),
    Rule(
        "no-buffer-overlap",
        ERROR,
        "explicit no_buffer needs disable-overlap-schedule (>= 0.5.14)",
        (),
        _no_buffer_overlap,
    ),
    Rule("mamba-track-interval", ERROR, "track interval vs draft tokens / page size", (), _track_interval),
    Rule("arch-moe-backend", ERROR, "MoE backend unusable on SM12x", ("gpu_arch",), hardware_rules.arch_moe),
    Rule(
        "arch-attention-backend",
        ERROR,
        "attention backend unusable on the GPU architecture",
        ("gpu_arch",),
        hardware_rules.arch_attention,
    ),
    Rule(
        "fp4-gemm-nan",
        WARNING,
        "flashinfer_cutlass FP4 GEMM NaNs on SM12x (<= 0.5.12)",
        ("gpu_arch",),
        hardware_rules.fp4_gemm_nan,
    ),
    Rule("parallel-gpus", ERROR, "tp x pp (x dp) vs GPU count", ("gpu_count",), hardware_rules.parallel_gpus),
    Rule("parallel-shape", ERROR, "nnodes / dp / ep shape", (), hardware_rules.parallel_shape),
    Rule("router-listen", ERROR, "a replica listens where the router reaches it", (), _router_listen),
    Rule("node-layout", ERROR, "nnodes / node-rank vs the inventory's group", (), hardware_rules.node_layout),
    Rule("served-model-name", ERROR, "served model name with ':'", (), hardware_rules.served_name),
    Rule("model-path", ERROR, "model path missing on the host", ("model_path_exists",), hardware_rules.model_path),
    Rule(
        "quantization-checkpoint",
        ERROR,
        "--quantization vs checkpoint",
        ("model_quantization",),
        hardware_rules.quant_checkpoint,
    ),
    Rule("moe-quantization", ERROR, "flashinfer_cutlass MoE quantization", (), hardware_rules.moe_quant),
    Rule(
        "custom-ar-pcie",
        INFO,
        "disable-custom-all-reduce is a no-op on PCIe",
        ("nvlink", "gpu_count"),
        hardware_rules.custom_ar_pcie,
    ),
    Rule("mscclpp", WARNING, "MSCCL++ world size / package", (), hardware_rules.mscclpp),
    Rule("pcie-ipc-world", WARNING, "PCIe IPC all-reduce world size", (), hardware_rules.pcie_ipc),
    Rule(
        "pcie-ipc-nvlink", WARNING, "PCIe IPC all-reduce on an NVLink host", ("nvlink",), hardware_rules.pcie_ipc_nvlink
    ),
)


def _known(facts: dict[str, Any], key: str) -> bool:
    value = facts.get(key)
    return value is not None and not (key == "gpu_count" and not value)


def validate(launch: Launch, facts: dict[str, Any] | None = None, concurrency: int | None = None) -> list[Finding]:
    """Findings for ``launch``: errors refuse it, warnings and infos don't. Unknown facts skip their rules (info)."""
    facts = dict(facts or {})
    ctx = Ctx(launch, facts, concurrency)
    findings: list[Finding] = []
    for rule in RULES:
        missing = [n for n in rule.needs if (concurrency is None if n == "concurrency" else not _known(facts, n))]
        if missing:
            findings.append(Finding(rule.id, INFO, f"skipped ({rule.summary}): unknown {', '.join(missing)}"))
            continue
        findings.extend(Finding(rule.id, rule.level, msg) for msg in rule.check(ctx))
    return findings


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == ERROR]


def check(
    profile: str,
    profiles: dict[str, dict],
    settings: dict[str, Any],
    sglang_version: str | None = None,
    facts: dict[str, Any] | None = None,
    concurrency: int | None = None,
) -> tuple[Launch | None, list[Finding]]:
    """Render and validate in one call that never raises for bad input: (launch or None, findings). A profile that
    cannot be rendered safely gives None and one error finding per problem (rule ids such as unsafe-value,
    flag-list, secret-in-profile, value-type, env-name, unknown-profile)."""
    try:
        launch = render(profile, profiles, settings, sglang_version)
    except ProfileError as exc:
        return None, [Finding(rule, ERROR, message) for rule, message in exc.problems]
    return launch, validate(launch, facts, concurrency)
