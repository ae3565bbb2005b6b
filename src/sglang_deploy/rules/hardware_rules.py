"""Pre-launch rules on the hardware and what runs on it: GPU architecture, the parallel shape and the multi-node
group, the checkpoint (path, name, quantization), all-reduce on PCIe. rules.RULES lists them."""

from __future__ import annotations

from ..launch.flags import is_truthy
from .rule_context import ATTENTION_FLAGS, Ctx

TRTLLM_MOE = frozenset({"flashinfer_trtllm", "flashinfer_trtllm_routed", "experimental_sgl_trtllm"})
SM100_ONLY_MOE = TRTLLM_MOE | {"flashinfer_megamoe", "megamoe"}
SM100_ONLY_ATTENTION = frozenset({"trtllm_mla", "cutlass_mla"})
SM90_ONLY_ATTENTION = frozenset({"fa3", "hpc_ops"})
MOE_FLAGS = ("moe-runner-backend", "speculative-moe-runner-backend")
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


# --- GPU architecture -------------------------------------------------------------------------


def arch_moe(ctx: Ctx):
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
    head = digits.split(".", maxsplit=1)[0] if "." in digits else digits[:-1]
    return int(head) if head.isdigit() else None


def arch_attention(ctx: Ctx):
    arch = ctx.facts["gpu_arch"]
    major = _sm_major(arch)
    for name in ATTENTION_FLAGS:
        backend = ctx.arg(name)
        if backend == "trtllm_mha" and name != "decode-attention-backend" and major != 10:
            # server_args.py::_handle_attention_backend_compatibility: prefill SM100-only up to 0.5.18
            # ("only supported on Blackwell GPUs (SM100)", seen on an H200 with 0.5.16); SM90/SM100/SM120 from 0.5.19.
            if ctx.version_in(hi="0.5.19"):
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


def fp4_gemm_nan(ctx: Ctx):
    backend = ctx.arg("fp4-gemm-backend") or ("flashinfer_cutlass" if ctx.version_in(hi="0.5.10") else None)
    if (
        ctx.sm12x
        and ctx.quantization == "modelopt_fp4"
        and backend == "flashinfer_cutlass"
        and ctx.version_in(hi="0.5.13")
    ):
        yield (
            f"FP4 GEMM flashinfer_cutlass on {ctx.facts['gpu_arch']} with sglang {ctx.launch.sglang_version}: NaN rows under"
            " mixed batches (sglang #20043, crash in torch.multinomial); use fp4-gemm-backend: flashinfer_cudnn"
        )


# --- parallelism and host ---------------------------------------------------------------------


def parallel_gpus(ctx: Ctx):
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
        yield (
            f"tp {ctx.tp} x pp {ctx.pp} x dp {dp} / {nnodes} node(s) needs {per_node} GPUs per node, "
            f"the host has {have}: lower sglang_tp or the profile's sizes"
        )


def parallel_shape(ctx: Ctx):
    nnodes = ctx.int_arg("nnodes", 1) or 1
    if (ctx.tp * ctx.pp) % nnodes:
        yield f"tp {ctx.tp} x pp {ctx.pp} is not divisible by --nnodes {nnodes}: SGLang refuses it"
    if (ctx.int_arg("dp-size", 1) or 1) > 1 and nnodes > 1 and not ctx.on("enable-dp-attention"):
        yield "--dp-size > 1 with --nnodes > 1: data-parallel replicas are single-node only; use attention DP or one node"
    ep = ctx.int_arg("ep-size", 1) or 1
    backend = ctx.arg("moe-runner-backend")
    if backend in ("flashinfer_cutlass", "flashinfer_cutedsl") and ep not in (1, ctx.tp):
        yield f"--moe-runner-backend {backend} with --ep-size {ep}: expert parallel size must be 1 or tp ({ctx.tp})"


def node_layout(ctx: Ctx):
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


def served_name(ctx: Ctx):
    if ":" in str(ctx.arg("served-model-name", "")):
        yield f"--served-model-name {ctx.arg('served-model-name')!r} contains ':' (LoRA adapter syntax): SGLang refuses it; rename"


def model_path(ctx: Ctx):
    if ctx.facts["model_path_exists"] is False:
        yield f"model path {ctx.arg('model-path')} does not exist on the host: download the checkpoint or fix sglang_model_path"


def quant_checkpoint(ctx: Ctx):
    ckpt = ctx.facts["model_quantization"]
    flag = ctx.arg("quantization")
    if flag is None or ckpt in (None, "none") or flag == ckpt:
        return
    if flag not in COMPATIBLE_QUANT.get(ckpt, {ckpt}):
        yield f"--quantization {flag} but the checkpoint is {ckpt}: SGLang raises a quantization mismatch; use {ckpt} or leave it unset"


def moe_quant(ctx: Ctx):
    quant = ctx.arg("quantization")
    if ctx.arg("moe-runner-backend") == "flashinfer_cutlass" and quant is not None and quant not in CUTLASS_MOE_QUANT:
        yield f"--moe-runner-backend flashinfer_cutlass with --quantization {quant}: it supports {', '.join(sorted(CUTLASS_MOE_QUANT))} or none"


# --- all-reduce on PCIe -----------------------------------------------------------------------


def custom_ar_pcie(ctx: Ctx):
    if ctx.on("disable-custom-all-reduce") and ctx.facts["nvlink"] is False and ctx.facts["gpu_count"] > 2:
        yield "--disable-custom-all-reduce on >2 PCIe-only GPUs only silences a warning: custom all-reduce disables itself there"


def mscclpp(ctx: Ctx):
    if not ctx.on("enable-mscclpp"):
        return
    world = ctx.tp * ctx.pp
    if ctx.version_in(hi="0.5.20") and world not in MSCCLPP_WORLD_OLD:
        yield f"--enable-mscclpp with world size {world}: this release's MSCCL++ runs only at 8 or 16 ranks, otherwise it is unused"
    if ctx.version_in("0.5.20"):
        yield "--enable-mscclpp needs the separate `mscclpp` Python package on the host; without it SGLang silently falls back to NCCL"


def pcie_ipc(ctx: Ctx):
    if not is_truthy(ctx.env.get(PCIE_IPC_ENV, "0")):
        return
    world = ctx.tp * ctx.pp
    if world not in PCIE_IPC_WORLD:
        yield f"{PCIE_IPC_ENV}=1 at world size {world}: only 2/4/8 ranks are supported, it stays off"


def pcie_ipc_nvlink(ctx: Ctx):
    if is_truthy(ctx.env.get(PCIE_IPC_ENV, "0")) and ctx.facts["nvlink"] is True:
        yield f"{PCIE_IPC_ENV}=1 on an NVLink host: custom all-reduce is tried first there, so the PCIe IPC path is unused"
