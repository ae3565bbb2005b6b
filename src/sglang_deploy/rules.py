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
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any, Callable, Iterable

from packaging.version import Version

from .host import sglang_defaults
from .flags import FLAG_RENAMES, SPEC_V2_ENV, flag_table, is_truthy
from .paths import read_bounded
from .profiles import Launch, ProfileError, render

ERROR, WARNING, INFO = "error", "warning", "info"

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
TRTLLM_MOE = frozenset({"flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"})
SM100_ONLY_MOE = TRTLLM_MOE | {"flashinfer_megamoe", "megamoe"}
SM100_ONLY_ATTENTION = frozenset({"trtllm_mla", "cutlass_mla"})
SM90_ONLY_ATTENTION = frozenset({"fa3", "hpc_ops"})
ATTENTION_FLAGS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")
MOE_FLAGS = ("moe-runner-backend", "speculative-moe-runner-backend")
MAMBA_STRATEGY_FLAGS = ("mamba-radix-cache-strategy", "mamba-scheduler-strategy")
DEFAULT_MAMBA_TRACK_INTERVAL = 256
MSCCLPP_WORLD_OLD = (8, 16)
PCIE_IPC_ENV = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"
PCIE_IPC_WORLD = (2, 4, 8)
# flashinfer_cutlass MoE accepts these quantizations (None = unquantized)
CUTLASS_MOE_QUANT = frozenset({"modelopt_fp4", "modelopt_fp8", "modelopt_mixed"})
# checkpoint quant_method -> --quantization values SGLang accepts for it
COMPATIBLE_QUANT = {
    "modelopt_fp4": {"modelopt", "modelopt_fp4"},
    "modelopt_fp8": {"modelopt", "modelopt_fp8"},
    "modelopt": {"modelopt", "modelopt_fp4", "modelopt_fp8", "modelopt_mixed"},
}


@dataclass(frozen=True)
class Finding:
    rule: str
    level: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Rule:
    id: str
    level: str
    summary: str
    needs: tuple[str, ...]
    check: Callable[["Ctx"], Iterable[str]]


class Ctx:
    """What a rule sees: the launch's flags (canonical names), env, version, facts, concurrency."""

    def __init__(self, launch: Launch, facts: dict[str, Any], concurrency: int | None):
        self.launch = launch
        self.args = launch.args
        self.env = launch.env
        self.version = Version(launch.sglang_version)
        self.table = flag_table(launch.sglang_version)
        self.facts = facts
        self.concurrency = concurrency

    def _get(self, name: str) -> Any:
        """The value of a flag under any of its spellings in the release (alias, canonical name)."""
        if name in self.args:
            return self.args[name]
        found = self.table.lookup(name)
        if found:
            for key, value in self.args.items():
                other = self.table.lookup(key)
                if other and other[1]["dest"] == found[1]["dest"]:
                    return value
        return None

    def arg(self, name: str, default: Any = None) -> Any:
        value = self._get(name)
        return default if value is None or value is False else value

    def on(self, name: str) -> bool:
        return self._get(name) is True

    def int_arg(self, name: str, default: int | None = None) -> int | None:
        value = self.arg(name)
        try:
            return int(value) if value is not None else default
        except (TypeError, ValueError):
            return default

    @property
    def spec(self) -> str | None:
        value = self.arg("speculative-algorithm")
        return str(value).upper() if value else None

    @property
    def tp(self) -> int:
        return self.int_arg("tp-size", 1) or 1

    @property
    def pp(self) -> int:
        return self.int_arg("pp-size", 1) or 1

    @property
    def mamba_strategy(self) -> str:
        for name in MAMBA_STRATEGY_FLAGS:
            if self.arg(name):
                return str(self.arg(name))
        return "auto"

    @property
    def sm12x(self) -> bool:
        return str(self.facts["gpu_arch"]).lower().replace(".", "").startswith(("sm_12", "sm12", "12"))

    @property
    def quantization(self) -> str | None:
        value = self.arg("quantization") or self.facts.get("model_quantization")
        return None if value in (None, "none") else str(value)


def _v(ctx: Ctx, lo: str | None = None, hi: str | None = None) -> bool:
    """lo <= version < hi."""
    return (lo is None or ctx.version >= Version(lo)) and (hi is None or ctx.version < Version(hi))


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
    if _v(ctx, hi="0.5.11") and is_truthy(ctx.env.get(SPEC_V2_ENV, "0")):
        yield (
            f"{SPEC_V2_ENV}=1 with --speculative-eagle-topk {topk}: sglang {ctx.launch.sglang_version} raises"
            " 'Spec v2 currently only supports topk = 1'; use topk 1 or unset the variable (spec v1)"
        )


def _spec_v1_fallback(ctx: Ctx):
    topk = ctx.int_arg("speculative-eagle-topk", 1)
    if ctx.spec in EAGLE_FAMILY and topk > 1 and _v(ctx, "0.5.11", "0.5.13"):
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
        and _v(ctx, hi="0.5.14")
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
    if ctx.mamba_strategy.startswith("extra_buffer") and ctx.on("disable-radix-cache") and _v(ctx, hi="0.5.14"):
        yield "mamba extra_buffer with --disable-radix-cache: SGLang raises; use no_buffer, or keep the radix cache"


def _extra_buffer_lazy_spec(ctx: Ctx):
    # 0.5.14-0.5.16 server_args.py::_validate_mamba_extra_buffer asserts; 0.5.17 allows it (DFLASH aside).
    if ctx.mamba_strategy == "extra_buffer_lazy" and ctx.spec and _v(ctx, hi="0.5.17"):
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
    if _v(ctx, "0.5.14") and ctx.mamba_strategy == "no_buffer" and not ctx.on("disable-overlap-schedule"):
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


# --- GPU architecture -------------------------------------------------------------------------


def _arch_moe(ctx: Ctx):
    if not ctx.sm12x:
        return
    for name in MOE_FLAGS:
        backend = ctx.arg(name)
        if backend in SM100_ONLY_MOE:
            yield f"--{name} {backend} on {ctx.facts['gpu_arch']}: its trtllm-gen/MegaMoE kernels are SM100-only and crash; use flashinfer_cutlass"
        elif backend == "flashinfer_cutedsl":
            yield f"--{name} flashinfer_cutedsl on {ctx.facts['gpu_arch']}: produces garbage ('!!!!') output; use flashinfer_cutlass"


def _sm_major(arch: str) -> int | None:
    """9 for "sm_90", 12 for "sm_120"/"12.0"; None when unreadable."""
    digits = "".join(ch for ch in str(arch).lower().replace("sm_", "").replace("sm", "") if ch.isdigit() or ch == ".")
    head = digits.split(".")[0] if "." in digits else digits[:-1]
    return int(head) if head.isdigit() else None


def _arch_attention(ctx: Ctx):
    arch = ctx.facts["gpu_arch"]
    major = _sm_major(arch)
    for name in ATTENTION_FLAGS:
        backend = ctx.arg(name)
        if backend == "trtllm_mha" and name != "decode-attention-backend" and major != 10:
            # server_args.py::_handle_attention_backend_compatibility: prefill SM100-only up to 0.5.18
            # ("only supported on Blackwell GPUs (SM100)", seen on an H200 with 0.5.16); SM90/SM100/SM120 from 0.5.19.
            if _v(ctx, hi="0.5.19"):
                yield (
                    f"--{name} trtllm_mha on {arch}: trtllm-gen prefill is SM100-only up to sglang 0.5.18 (ValueError"
                    " at startup); use fa3 on SM90, triton or flashinfer"
                )
            elif major not in (9, 12):
                yield f"--{name} trtllm_mha on {arch}: needs SM90, SM100 or SM120; use triton or flashinfer"
            elif major == 12 and str(ctx.arg("kv-cache-dtype", "")) == "fp8_e4m3":
                yield f"--{name} trtllm_mha with fp8_e4m3 KV cache on {arch}: not supported; use another KV dtype or triton"
        if not ctx.sm12x:
            continue
        if backend in SM100_ONLY_ATTENTION:
            yield f"--{name} {backend} on {arch}: trtllm-gen/CUTLASS MLA kernels are SM100-only ('Unsupported architecture'); use triton or flashinfer"
        elif backend in SM90_ONLY_ATTENTION:
            yield f"--{name} {backend} on {arch}: {backend} is Hopper (SM90) only; use triton or flashinfer"


def _fp4_gemm_nan(ctx: Ctx):
    backend = ctx.arg("fp4-gemm-backend") or ("flashinfer_cutlass" if _v(ctx, hi="0.5.10") else None)
    if ctx.sm12x and ctx.quantization == "modelopt_fp4" and backend == "flashinfer_cutlass" and _v(ctx, hi="0.5.13"):
        yield (
            f"FP4 GEMM flashinfer_cutlass on {ctx.facts['gpu_arch']} with sglang {ctx.launch.sglang_version}: NaN rows under"
            " mixed batches (sglang #20043, crash in torch.multinomial); use fp4-gemm-backend: flashinfer_cudnn"
        )


# --- parallelism and host ---------------------------------------------------------------------


def _parallel_gpus(ctx: Ctx):
    nnodes = ctx.int_arg("nnodes", 1) or 1
    dp = ctx.int_arg("dp-size", 1) or 1
    per_node = ctx.tp * ctx.pp * (dp if not ctx.on("enable-dp-attention") else 1) // nnodes
    have = ctx.facts["gpu_count"]
    if nnodes > 1 and ctx.tp * ctx.pp != nnodes * have:
        # A group uses every GPU of every node: SGLang places tp*pp/nnodes ranks on each node.
        yield (
            f"tp {ctx.tp} x pp {ctx.pp} = {ctx.tp * ctx.pp} GPUs, but the group's {nnodes} nodes have"
            f" {nnodes * have} ({have} each): set sglang_tp to {nnodes * have // ctx.pp} for the whole group"
            " (group_vars/<group>.yml), or change the profile's pp-size"
        )
    elif per_node > have:
        yield f"tp {ctx.tp} x pp {ctx.pp} x dp {dp} / {nnodes} node(s) needs {per_node} GPUs per node, the host has {have}: lower sglang_tp or the profile's sizes"


def _parallel_shape(ctx: Ctx):
    nnodes = ctx.int_arg("nnodes", 1) or 1
    if (ctx.tp * ctx.pp) % nnodes:
        yield f"tp {ctx.tp} x pp {ctx.pp} is not divisible by --nnodes {nnodes}: SGLang refuses it"
    if (ctx.int_arg("dp-size", 1) or 1) > 1 and nnodes > 1 and not ctx.on("enable-dp-attention"):
        yield "--dp-size > 1 with --nnodes > 1: data-parallel replicas are single-node only; use attention DP or one node"
    ep = ctx.int_arg("ep-size", 1) or 1
    backend = ctx.arg("moe-runner-backend")
    if backend in ("flashinfer_cutlass", "flashinfer_cutedsl") and ep not in (1, ctx.tp):
        yield f"--moe-runner-backend {backend} with --ep-size {ep}: expert parallel size must be 1 or tp ({ctx.tp})"


def _node_layout(ctx: Ctx):
    """The launch's --nnodes/--node-rank against the inventory's group (a profile may not set its own)."""
    count, rank = ctx.facts.get("node_count", 1), ctx.facts.get("node_rank", 0)
    nnodes = ctx.int_arg("nnodes", 1) or 1
    if nnodes != count and count == 1:
        yield (
            f"--nnodes {nnodes} on a host that is not in a multi-node group: the other ranks never join and the server"
            " exits after --dist-timeout; put the hosts in one inventory group, set sglang_multinode_group to it, and"
            " remove nnodes from the profile"
        )
    elif nnodes > count:
        yield (
            f"--nnodes {nnodes} is larger than the group ({count} hosts): the missing ranks never join and rank 0 exits"
            " after --dist-timeout; add the hosts to the group, or remove nnodes from the profile (the inventory sets it)"
        )
    elif nnodes != count:
        yield f"--nnodes {nnodes} but the group has {count} hosts, one node each: remove nnodes from the profile (the inventory sets it)"
    if count > 1 and (ctx.int_arg("node-rank", 0) or 0) != rank:
        yield f"--node-rank {ctx.arg('node-rank')} but this host is rank {rank} of its group (inventory order): remove node-rank from the profile"
    addr = str(ctx.arg("dist-init-addr", ""))
    if count > 1 and addr.rsplit(":", 1)[-1] == str(ctx.launch.listen["port"]):
        yield f"--dist-init-addr {addr} uses the API port {ctx.launch.listen['port']} of rank 0: set sglang_dist_init_port to another port"


def _served_name(ctx: Ctx):
    if ":" in str(ctx.arg("served-model-name", "")):
        yield f"--served-model-name {ctx.arg('served-model-name')!r} contains ':' (LoRA adapter syntax): SGLang refuses it; rename"


def _model_path(ctx: Ctx):
    if ctx.facts["model_path_exists"] is False:
        yield f"model path {ctx.arg('model-path')} does not exist on the host: download the checkpoint or fix sglang_model_path"


def _quant_checkpoint(ctx: Ctx):
    ckpt = ctx.facts["model_quantization"]
    flag = ctx.arg("quantization")
    if flag is None or ckpt in (None, "none") or flag == ckpt:
        return
    if flag not in COMPATIBLE_QUANT.get(ckpt, {ckpt}):
        yield f"--quantization {flag} but the checkpoint is {ckpt}: SGLang raises a quantization mismatch; use {ckpt} or leave it unset"


def _moe_quant(ctx: Ctx):
    quant = ctx.arg("quantization")
    if ctx.arg("moe-runner-backend") == "flashinfer_cutlass" and quant is not None and quant not in CUTLASS_MOE_QUANT:
        yield f"--moe-runner-backend flashinfer_cutlass with --quantization {quant}: it supports {', '.join(sorted(CUTLASS_MOE_QUANT))} or none"


# --- all-reduce on PCIe -----------------------------------------------------------------------


def _custom_ar_pcie(ctx: Ctx):
    if ctx.on("disable-custom-all-reduce") and ctx.facts["nvlink"] is False and ctx.facts["gpu_count"] > 2:
        yield "--disable-custom-all-reduce on >2 PCIe-only GPUs only silences a warning: custom all-reduce disables itself there"


def _mscclpp(ctx: Ctx):
    if not ctx.on("enable-mscclpp"):
        return
    world = ctx.tp * ctx.pp
    if _v(ctx, hi="0.5.20") and world not in MSCCLPP_WORLD_OLD:
        yield f"--enable-mscclpp with world size {world}: this release's MSCCL++ runs only at 8 or 16 ranks, otherwise it is unused"
    if _v(ctx, "0.5.20"):
        yield "--enable-mscclpp needs the separate `mscclpp` Python package on the host; without it SGLang silently falls back to NCCL"


def _pcie_ipc(ctx: Ctx):
    if not is_truthy(ctx.env.get(PCIE_IPC_ENV, "0")):
        return
    world = ctx.tp * ctx.pp
    if world not in PCIE_IPC_WORLD:
        yield f"{PCIE_IPC_ENV}=1 at world size {world}: only 2/4/8 ranks are supported, it stays off"


def _pcie_ipc_nvlink(ctx: Ctx):
    if is_truthy(ctx.env.get(PCIE_IPC_ENV, "0")) and ctx.facts["nvlink"] is True:
        yield f"{PCIE_IPC_ENV}=1 on an NVLink host: custom all-reduce is tried first there, so the PCIe IPC path is unused"


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
    Rule("arch-moe-backend", ERROR, "MoE backend unusable on SM12x", ("gpu_arch",), _arch_moe),
    Rule(
        "arch-attention-backend",
        ERROR,
        "attention backend unusable on the GPU architecture",
        ("gpu_arch",),
        _arch_attention,
    ),
    Rule(
        "fp4-gemm-nan", WARNING, "flashinfer_cutlass FP4 GEMM NaNs on SM12x (<= 0.5.12)", ("gpu_arch",), _fp4_gemm_nan
    ),
    Rule("parallel-gpus", ERROR, "tp x pp (x dp) vs GPU count", ("gpu_count",), _parallel_gpus),
    Rule("parallel-shape", ERROR, "nnodes / dp / ep shape", (), _parallel_shape),
    Rule("router-listen", ERROR, "a replica listens where the router reaches it", (), _router_listen),
    Rule("node-layout", ERROR, "nnodes / node-rank vs the inventory's group", (), _node_layout),
    Rule("served-model-name", ERROR, "served model name with ':'", (), _served_name),
    Rule("model-path", ERROR, "model path missing on the host", ("model_path_exists",), _model_path),
    Rule("quantization-checkpoint", ERROR, "--quantization vs checkpoint", ("model_quantization",), _quant_checkpoint),
    Rule("moe-quantization", ERROR, "flashinfer_cutlass MoE quantization", (), _moe_quant),
    Rule(
        "custom-ar-pcie", INFO, "disable-custom-all-reduce is a no-op on PCIe", ("nvlink", "gpu_count"), _custom_ar_pcie
    ),
    Rule("mscclpp", WARNING, "MSCCL++ world size / package", (), _mscclpp),
    Rule("pcie-ipc-world", WARNING, "PCIe IPC all-reduce world size", (), _pcie_ipc),
    Rule("pcie-ipc-nvlink", WARNING, "PCIe IPC all-reduce on an NVLink host", ("nvlink",), _pcie_ipc_nvlink),
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


# --- facts from files -------------------------------------------------------------------------


# A checkpoint's config.json is a few KB; a quantization config listing every layer a few MB.
MAX_CONFIG_BYTES = 64 << 20


class ModelConfigError(ValueError):
    """A checkpoint config.json (or hf_quant_config.json) of the wrong shape."""


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ModelConfigError(f"{what} must be a JSON object, not {type(value).__name__}")
    return value


def _name(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ModelConfigError(f"{what} must be a string, not {type(value).__name__}")
    return value


def model_facts(config: Any, hf_quant: Any = None) -> dict[str, Any]:
    """model_architecture / model_quantization from a checkpoint's config.json (and hf_quant_config.json).
    Raises ModelConfigError for files of the wrong shape (the keys read by SGLang's ModelConfig)."""
    config = _mapping(config, "config.json")
    hf_quant = _mapping(hf_quant, "hf_quant_config.json")
    archs = config.get("architectures") or []
    if not isinstance(archs, list):
        raise ModelConfigError(f"config.json architectures must be a list, not {type(archs).__name__}")
    arch = _name(archs[0], "config.json architectures[0]") if archs else None
    qc = _mapping(config.get("quantization_config"), "config.json quantization_config") or _mapping(
        _mapping(config.get("text_config"), "config.json text_config").get("quantization_config"),
        "config.json text_config.quantization_config",
    )
    method = (_name(qc.get("quant_method"), "config.json quant_method") or "").lower() or None
    algo = _name(qc.get("quant_algo"), "config.json quant_algo") or _name(
        _mapping(hf_quant.get("quantization"), "hf_quant_config.json quantization").get("quant_algo"),
        "hf_quant_config.json quant_algo",
    )
    algo = (algo or "").upper()
    if method is None and hf_quant:
        method = "modelopt"
    if method == "modelopt" and algo:
        method = {"NVFP4": "modelopt_fp4", "FP8": "modelopt_fp8", "MIXED_PRECISION": "modelopt_mixed"}.get(algo, method)
    return {"model_architecture": arch, "model_quantization": method or "none"}


def read_json(path: Path, what: str) -> Any:
    """A JSON file, or ModelConfigError naming the file (unreadable, not a regular file, too large, not UTF-8, not
    JSON)."""
    try:
        data = read_bounded(path, MAX_CONFIG_BYTES, what)
    except OSError as exc:
        raise ModelConfigError(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ModelConfigError(str(exc)) from exc
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelConfigError(f"{path} is not UTF-8 JSON: {exc}") from exc


def model_facts_from_path(path: str | Path) -> dict[str, Any]:
    """model_facts() for a config.json file or a checkpoint directory holding one."""
    path = Path(path)
    config_file = path / "config.json" if path.is_dir() else path
    hf_quant_file = config_file.parent / "hf_quant_config.json"
    hf_quant = read_json(hf_quant_file, "the checkpoint's hf_quant_config.json") if hf_quant_file.exists() else None
    return model_facts(read_json(config_file, "a checkpoint's config.json or its folder"), hf_quant)


def gpu_facts(sglang_gpu: dict[str, Any] | None) -> dict[str, Any]:
    """Rule facts from the GPU facts module's ``sglang_gpu`` (count 0 = no GPU seen = unknown)."""
    if not sglang_gpu or not sglang_gpu.get("count"):
        return {}
    return {
        "gpu_arch": sglang_gpu.get("arch"),
        "gpu_count": int(sglang_gpu["count"]),
        "nvlink": sglang_gpu.get("nvlink"),
    }


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
