"""The info endpoints: health, models, model and server info, metrics, flush_cache, freeze_gc."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

from .config import SECRET_ARGS, log
from .metrics import render_metrics
from .protocol import HttpError, Request, Responder, openai_error
from .request_log import LAUNCH

if TYPE_CHECKING:
    from .server import Server


async def health(server: Server, req: Request, out: Responder) -> None:
    if server.draining:
        log("Health check request received during shutdown. Returning 503.")
        await out.send(503, b"", "text/plain")
    elif server.ready:
        await out.send(200, b"", "text/plain")
    else:
        await out.send(503, b"", "text/plain")


def _model_card(server: Server) -> dict:
    return {
        "id": server.cfg.served_model_name,
        "object": "model",
        "created": int(server.started),
        "owned_by": "sglang",
        "root": server.cfg.served_model_name,
        "parent": None,
        "max_model_len": server.cfg.context_length,
    }


async def models(server: Server, req: Request, out: Responder) -> None:
    await out.send_json(200, {"object": "list", "data": [_model_card(server)]})


async def model_by_id(server: Server, req: Request, out: Responder) -> None:
    if req.path[len("/v1/models/") :] != server.cfg.served_model_name:
        raise openai_error(404, f"The model '{req.path[11:]}' does not exist", "NotFoundError")
    await out.send_json(200, _model_card(server))


async def model_info(server: Server, req: Request, out: Responder) -> None:
    a = server.cfg.args
    await out.send_json(
        200,
        {
            "emulated": True,
            "model_path": a.model_path,
            "tokenizer_path": a.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": None,
            "architectures": None,
        },
    )


def _internal_state(server: Server) -> dict:
    cfg, st = server.cfg, server.engine.stats
    state = {
        "last_gen_throughput": st.gen_throughput,
        "memory_usage": {"weight": 0.0, "kvcache": 0.0, "token_capacity": cfg.context_length, "graph": 0.0},
        "effective_max_running_requests_per_dp": cfg.max_running,
    }
    if cfg.spec and st.avg_accept_length() is not None:
        state["avg_spec_accept_length"] = st.avg_accept_length()
    return state


async def server_info(server: Server, req: Request, out: Responder) -> None:
    cfg = server.cfg
    info = {k: v for k, v in vars(cfg.args).items() if not k.startswith("emu_")}
    info.update(LAUNCH | cfg.ignored_flags)  # SGLang shows every ServerArgs field, defaults too
    info.update(
        {
            "served_model_name": cfg.served_model_name,
            "context_length": cfg.context_length,
            "max_running_requests": cfg.max_running,
            "speculative_num_steps": cfg.spec_steps,
            "speculative_eagle_topk": cfg.spec_topk,
            "speculative_num_draft_tokens": cfg.spec_draft,
            "emulated": True,
            "emulator": cfg.settings(),
            "version": "emulated",
            "launch_command": " ".join(["python3", "-m", "sglang.launch_server"] + cfg.redacted_argv()),
            "startup_time": server.started,
            "internal_states": [_internal_state(server)],
        }
    )
    info.update({name: "***" for name in SECRET_ARGS if info.get(name)})
    await out.send_json(200, info)


async def metrics(server: Server, req: Request, out: Responder) -> None:
    if not server.cfg.args.enable_metrics:
        raise HttpError(404, {"detail": "Not Found"})
    await out.send(200, render_metrics(server.engine).encode(), "text/plain; version=0.0.4; charset=utf-8")


async def flush_cache(server: Server, req: Request, out: Responder) -> None:
    await out.send(
        200,
        b"Cache flushed.\nPlease check backend logs for more details. "
        b"(When there are running or waiting requests, the operation will not be performed.)\n",
        "text/plain",
    )


async def freeze_gc(server: Server, req: Request, out: Responder) -> None:
    """SGLang's answer and log line (utils/common.py freeze_gc), and the emulator's own gc.freeze()."""
    before = [len(gc.get_objects(g)) for g in range(3)]
    gc.freeze()
    after = [len(gc.get_objects(g)) for g in range(3)]
    log("Freezing GC in Tokenizer Manager process. " + ", ".join(f"gen{g}: {before[g]}->{after[g]}" for g in range(3)))
    await out.send(200, b"Garbage collection frozen.\n", "text/plain")
