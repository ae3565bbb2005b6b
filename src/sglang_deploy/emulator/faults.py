"""Faults the emulator can play (SGLANG_EMU_FAULT): SGLang-shaped tracebacks, crashes and errors."""

from __future__ import annotations

import os
import random
import signal
import sys
import time

from .protocol import HttpError, openai_error

SPEC_MOVES_FROM = 5  # spec_changes_tokens: tokens after position 4 differ from the non-speculative ones
SLOW_SHARE = 0.1  # slow: every rate at this share of the configured one (the first token 1 / SLOW_SHARE as late)


def rate_share(fault: str | None) -> float:
    """The share of the configured speed the engine runs at: SLOW_SHARE with the fault slow, else 1."""
    return SLOW_SHARE if fault == "slow" else 1.0


def stalls(fault: str | None, internal: bool) -> bool:
    """stall: a client's request is admitted (running, /health still 200) and never gets a token; the warm-up's own
    requests pass, so the server comes up as a stalled SGLang does (sgl-project/sglang#6624)."""
    return fault == "stall" and not internal


def move_tokens(plan, fault: str | None, spec: bool, count: int) -> None:
    """The faults that change greedy tokens (engine.Plan.word): ``nondeterministic`` moves them after the first
    few, differently for each request (drawn from ``count``, the request's number, so runs repeat);
    ``spec_changes_tokens`` moves them after position 4, only with a speculative algorithm (a lossless mode that
    is not)."""
    if fault == "nondeterministic":
        rng = random.Random(count)
        plan.moved_from, plan.moved_by = rng.randint(2, 4), rng.randrange(1, 64)
    elif fault == "spec_changes_tokens" and spec:
        plan.moved_from, plan.moved_by = SPEC_MOVES_FROM, 1


def _sglang_site() -> str:
    return f"/usr/local/lib/python{sys.version_info[0]}.{sys.version_info[1]}/dist-packages/sglang"


def _final_line(message: str | None, default: str) -> str:
    if not message:
        return default
    head = message.split(":", 1)[0]
    if head.isidentifier() and (head.endswith("Error") or head.endswith("Exception")):
        return message
    return f"RuntimeError: {message}"


def args_assert_traceback() -> str:
    site = _sglang_site()
    return (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        '  File "<frozen runpy>", line 88, in _run_code\n'
        f'  File "{site}/launch_server.py", line 32, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        f'  File "{site}/srt/server_args.py", line 412, in prepare_server_args\n'
        "    return ServerArgs.from_cli_args(raw_args)\n"
        f'  File "{site}/srt/server_args.py", line 371, in from_cli_args\n'
        "    return cls(**{attr: getattr(args, attr) for attr in attrs})\n"
        '  File "<string>", line 318, in __init__\n'
        f'  File "{site}/srt/server_args.py", line 298, in __post_init__\n'
        "    self._handle_speculative_decoding()\n"
        f'  File "{site}/srt/arg_groups/speculative_hook.py", line 57, in _handle_eagle_family\n'
        "    assert (\n"
        "AssertionError\n"
    )


def load_crash_traceback(message: str | None) -> str:
    site = _sglang_site()
    return (
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{site}/srt/managers/scheduler.py", line 2870, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
        f'  File "{site}/srt/managers/scheduler.py", line 312, in __init__\n'
        "    self.init_model_worker()\n"
        f'  File "{site}/srt/managers/tp_worker.py", line 97, in __init__\n'
        "    self.model_runner = ModelRunner(\n"
        f'  File "{site}/srt/model_executor/model_runner.py", line 301, in initialize\n'
        "    self.load_model()\n"
        f'  File "{site}/srt/model_executor/model_runner.py", line 842, in load_model\n'
        "    self.model = get_model(model_config=self.model_config, load_config=self.load_config)\n"
        f'  File "{site}/srt/model_loader/loader.py", line 611, in load_model\n'
        "    assert quant_method is not None\n" + _final_line(message, "AssertionError") + "\n"
    )


def runtime_crash_traceback() -> str:
    site = _sglang_site()
    return (
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{site}/srt/managers/scheduler.py", line 2888, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        f'  File "{site}/srt/managers/scheduler.py", line 1104, in event_loop_overlap\n'
        "    batch_result = self.run_batch(batch)\n"
        f'  File "{site}/srt/managers/tp_worker.py", line 241, in forward_batch_generation\n'
        "    logits_output, can_run_cuda_graph = self.model_runner.forward(forward_batch)\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "Received sigquit from a child process. It usually means the child failed.\n"
    )


def dist_store_timeout_traceback(timeout: int, joined: int, total: int) -> str:
    """Rank 0 when a node never joined (torch's TCPStore, raised in the scheduler's process group init)."""
    site = _sglang_site()
    return load_time_stamp() + (
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{site}/srt/managers/scheduler.py", line 2870, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)\n"
        f'  File "{site}/srt/model_executor/model_runner.py", line 688, in init_torch_distributed\n'
        "    init_distributed_environment(\n"
        f"torch.distributed.DistStoreError: Timed out after {timeout} seconds waiting for clients. "
        f"{joined}/{total} clients joined.\n"
        "Received sigquit from a child process. It usually means the child failed.\n"
    )


def group_death_traceback(reason: str) -> str:
    """A node of a formed group when another one is gone (the recording's rank 0: gloo's read error)."""
    site = _sglang_site()
    return load_time_stamp() + (
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{site}/srt/managers/scheduler.py", line 4639, in run_scheduler_process\n'
        "    scheduler.run_event_loop()\n"
        f'  File "{site}/srt/utils/common.py", line 2175, in broadcast_pyobj\n'
        "    dist.broadcast(tensor_size, src=src, group=dist_group)\n"
        f"RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:538] {reason}\n"
    )


def load_time_stamp() -> str:
    return f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] "


def kill_process_tree() -> None:
    """How SGLang's main process ends after a drain or a child's failure: kill_process_tree(os.getpid(),
    include_parent=True) (python/sglang/srt/utils/common.py) kills the process itself with SIGKILL (status -9)."""
    pid = os.getpid()
    print(f"{load_time_stamp()}kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}", flush=True)
    sys.stderr.flush()
    os.kill(pid, signal.SIGKILL)


def crash_mid_stream() -> None:
    """The scheduler dies under a running request: the traceback, then the whole process exits."""
    sys.stderr.write(load_time_stamp() + runtime_crash_traceback())
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(1)


def check_generation_fault(fault: str | None, message: str | None, openai: bool) -> None:
    """http_500: generation endpoints answer 500 (in OpenAI's error shape on the OpenAI routes)."""
    if fault != "http_500":
        return
    message = message or "CUDA error: an illegal memory access was encountered"
    if openai:
        raise openai_error(500, f"Internal server error: {message}", "InternalServerError")
    raise HttpError(500, {"error": {"message": message}})
