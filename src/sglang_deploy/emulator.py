"""EMULATED SGLang server: an SGLang-compatible HTTP server whose every number is synthetic.

It lets the deploy/benchmark flow run and be tested on machines without a GPU. Nothing here loads a
model: the "tokens" are words from a small fixed vocabulary, and all timings come from the settings
below. Every response carries the header ``x-sglang-emulated: true``; /server_info and /model_info
carry ``"emulated": true``; the first log line is "EMULATED SGLang server: numbers are synthetic".

Run it with sglang.launch_server's command line::

    python -m sglang_deploy.emulator --model-path Qwen/Qwen3.5 --port 30000 [any sglang flags]
    python3 /opt/x/emulator.py ...      # the file also runs as a standalone script (stdlib only)

Launch flags honoured: --host, --port, --model-path/--model, --served-model-name, --api-key,
--speculative-algorithm, --speculative-num-steps, --speculative-eagle-topk,
--speculative-num-draft-tokens, --reasoning-parser, --enable-metrics, --context-length,
--max-running-requests (with a speculative algorithm and no value, 48 as SGLang does),
--stream-response-default-include-usage, --enable-cache-report, --incremental-streaming-output,
--skip-server-warmup. Every other ``--flag`` is accepted and ignored (shown in /server_info); a flag
followed by tokens not starting with ``--`` takes them as its value(s), otherwise it is a switch.
SGLang's EAGLE-family assert is reproduced: --speculative-eagle-topk or --speculative-num-draft-tokens
without --speculative-num-steps exits 1 with an AssertionError traceback.

Emulation settings (environment variable, or the ``--emu-*`` flag that overrides it):

    SGLANG_EMU_LOAD_S          --emu-load-s          3     seconds the port stays closed ("loading")
    SGLANG_EMU_WARMUP_S        --emu-warmup-s        1     seconds /health* answer 503 after the port opens
    SGLANG_EMU_TTFT_MS         --emu-ttft-ms         80    time to first token, from admission
    SGLANG_EMU_DECODE_TOK_S    --emu-decode-tok-s    172   per-stream decode rate (delivered tokens/s)
    SGLANG_EMU_AGGREGATE_TOK_S --emu-aggregate-tok-s 0     ceiling over all running streams (0 = none);
                                                           per-stream rate = min(decode, aggregate / running)
    SGLANG_EMU_ACCEPT_LENGTH   --emu-accept-length   2.5 with a speculative algorithm, else 1.0:
                                                           tokens per decode step (>= 1, at most
                                                           num_steps + 1); a fraction gives a deterministic
                                                           mix of step sizes whose mean is exact
    SGLANG_EMU_FAULT           --emu-fault           none: crash_on_load | crash_mid_stream | garbage |
                                                           never_ready | http_500
    SGLANG_EMU_FAULT_MESSAGE   --emu-fault-message   text of the crash_on_load / http_500 error

Faults: crash_on_load prints a Python traceback to stderr halfway through the load time and exits 1;
crash_mid_stream exits the process (os._exit) halfway through a generation; garbage makes every token
"!"; never_ready keeps /health 503 forever; http_500 answers generation endpoints with 500.

Timing: the first token comes TTFT after admission; then all running streams advance on one shared
virtual clock whose speed is the per-stream rate, and token j of a stream is due when that clock has
moved j tokens past the stream's first token. Deadlines are absolute (monotonic clock), so lateness
never accumulates. One chunk is sent per decode step; a stream's chunk is due at its last token's time,
so (e2e - ttft) / (completion_tokens - 1) is exactly 1 / rate.

Endpoints: GET /health /health_generate /ready /v1/models /v1/models/{id} /model_info /server_info
(and the deprecated /get_model_info /get_server_info) /metrics; POST /v1/chat/completions
/v1/completions /generate /flush_cache. Output length: max_tokens (chat/completions) or
sampling_params.max_new_tokens (/generate); without ignore_eos a stream stops at a deterministic
"EOS" point (32..256 tokens, from the prompt) but never before min_tokens / min_new_tokens.
usage.prompt_tokens is the prompt's whitespace word count (at least 1).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import math
import os
import signal
import sys
import time
import uuid
import zlib

BANNER = "EMULATED SGLang server: numbers are synthetic"
READY_LINE = "The server is fired up and ready to roll!"
EMULATED_HEADER = "x-sglang-emulated"
FAULTS = ("crash_on_load", "crash_mid_stream", "garbage", "never_ready", "http_500")
VOCAB = (
    "the", "model", "server", "token", "batch", "stream", "queue", "cache", "graph", "kernel",
    "tensor", "layer", "expert", "router", "draft", "verify", "accept", "prefill", "decode", "memory",
    "page", "radix", "prefix", "sample", "logit", "weight", "scale", "block", "warp", "thread",
    "launch", "profile", "latency", "rate", "window", "context", "prompt", "answer", "reason", "think",
    "check", "value", "index", "vector", "matrix", "buffer", "signal", "socket", "packet", "frame",
    "clock", "cycle", "field", "range", "order", "shard", "rank", "node", "link", "path",
    "input", "output", "state", "phase",
)  # 64 words; token j of a request is VOCAB[(seed + 7 * j) % 64]
VOCAB_ID_BASE = 1000
GARBAGE_TOKEN, GARBAGE_TOKEN_ID = "!", 0
EOS_TOKEN_ID = 151645
EOS_MIN, EOS_SPAN = 32, 225
REASONING_SHARE = 0.3
SPEC_DEFAULT_MAX_RUNNING = 48
DEFAULT_CONTEXT_LENGTH = 32768
WARMUP_PROMPT = "The capital city of France is"
WARMUP_TOKENS = 8
WAKE_TOLERANCE_S = 50e-6  # tokens due within this of a wake-up are sent in that wake-up
DECODE_LOG_INTERVAL_S = 5.0
EMU_SETTINGS = (  # (env var, flag dest, type, default)
    ("SGLANG_EMU_LOAD_S", "emu_load_s", float, 3.0),
    ("SGLANG_EMU_WARMUP_S", "emu_warmup_s", float, 1.0),
    ("SGLANG_EMU_TTFT_MS", "emu_ttft_ms", float, 80.0),
    ("SGLANG_EMU_DECODE_TOK_S", "emu_decode_tok_s", float, 172.0),
    ("SGLANG_EMU_AGGREGATE_TOK_S", "emu_aggregate_tok_s", float, 0.0),
    ("SGLANG_EMU_ACCEPT_LENGTH", "emu_accept_length", float, None),
    ("SGLANG_EMU_FAULT", "emu_fault", str, None),
    ("SGLANG_EMU_FAULT_MESSAGE", "emu_fault_message", str, None),
)
HTTP_REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 411: "Length Required", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


def log(message: str, err: bool = False) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}] {message}", file=sys.stderr if err else sys.stdout, flush=True)


# ---------------------------------------------------------------------------------------------------
# Command line and settings


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sglang_deploy.emulator",
        description=BANNER + ". Takes sglang.launch_server's flags; unknown flags are ignored.",
        allow_abbrev=False,
    )
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--served-model-name")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--api-key")
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    p.add_argument("--reasoning-parser")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--context-length", type=_human_int)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--stream-response-default-include-usage", action="store_true")
    p.add_argument("--enable-cache-report", action="store_true")
    p.add_argument("--incremental-streaming-output", action="store_true")
    p.add_argument("--skip-server-warmup", action="store_true")
    emu = p.add_argument_group("emulation settings (override the SGLANG_EMU_* environment)")
    for env, dest, kind, _default in EMU_SETTINGS:
        flag = "--" + dest.replace("_", "-")
        if dest == "emu_fault":
            emu.add_argument(flag, dest=dest, choices=FAULTS, help=f"overrides {env}")
        else:
            emu.add_argument(flag, dest=dest, type=kind, help=f"overrides {env}")
    return p


def _human_int(text: str) -> int:
    units = {"k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}
    low = text.strip().lower()
    for suffix in sorted(units, key=len, reverse=True):
        if low.endswith(suffix):
            return int(float(low[: -len(suffix)]) * units[suffix])
    return int(low)


def split_argv(argv: list[str], known: set[str]) -> tuple[list[str], dict]:
    """Separate the flags this emulator knows from the rest; the rest become {dest: value}."""
    mine: list[str] = []
    ignored: dict = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        name = tok.split("=", 1)[0]
        values = []
        j = i + 1
        if "=" not in tok:
            while j < len(argv) and not argv[j].startswith("--"):
                values.append(argv[j])
                j += 1
        if name in known or not tok.startswith("--"):
            mine.extend(argv[i:j])  # argparse reports stray positionals as it would for sglang
        elif "=" in tok:
            ignored[name[2:].replace("-", "_")] = _guess_type(tok.split("=", 1)[1])
        elif values:
            vals = [_guess_type(v) for v in values]
            ignored[name[2:].replace("-", "_")] = vals[0] if len(vals) == 1 else vals
        else:
            ignored[name[2:].replace("-", "_")] = True
        i = j
    return mine, ignored


def _guess_type(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class Config:
    """Resolved launch flags plus emulation settings."""

    def __init__(self, argv: list[str], environ: dict):
        parser = build_parser()
        known = {s for action in parser._actions for s in action.option_strings}
        mine, self.ignored_flags = split_argv(argv, known)
        ns = parser.parse_args(mine)
        self.args = ns
        self.argv = list(argv)
        for env, dest, kind, default in EMU_SETTINGS:
            value = getattr(ns, dest)
            if value is None and environ.get(env, "") != "":
                try:
                    value = kind(environ[env])
                except ValueError:
                    parser.error(f"{env}={environ[env]!r} is not a valid {kind.__name__}")
            setattr(self, dest[4:], default if value is None else value)
        if self.fault is not None and self.fault not in FAULTS:
            parser.error(f"SGLANG_EMU_FAULT must be one of {', '.join(FAULTS)} (got {self.fault!r})")
        if self.decode_tok_s <= 0 or self.aggregate_tok_s < 0 or self.ttft_ms < 0:
            parser.error("decode rate must be > 0, aggregate rate and TTFT >= 0")
        if self.load_s < 0 or self.warmup_s < 0:
            parser.error("load and warm-up times must be >= 0")
        if ns.skip_server_warmup:
            self.warmup_s = 0.0
        self.served_model_name = ns.served_model_name or ns.model_path
        self.context_length = ns.context_length or DEFAULT_CONTEXT_LENGTH
        self.spec = bool(ns.speculative_algorithm)
        self.spec_steps = self.spec_topk = self.spec_draft = None
        self.spec_assert_fails = False
        self.notes: list[str] = []
        if self.spec:
            eagle = ns.speculative_algorithm.upper() in ("EAGLE", "EAGLE3", "NEXTN")
            unset_steps = ns.speculative_num_steps is None
            if eagle and unset_steps and (
                ns.speculative_eagle_topk is not None or ns.speculative_num_draft_tokens is not None
            ):
                self.spec_assert_fails = True
            self.spec_steps = ns.speculative_num_steps or 3
            self.spec_topk = ns.speculative_eagle_topk or 1
            self.spec_draft = ns.speculative_num_draft_tokens or self.spec_steps + 1
            if self.accept_length is None:
                self.accept_length = 2.5
            if self.accept_length > self.spec_steps + 1:
                self.notes.append(
                    f"accept length {self.accept_length} > num_steps + 1; using {self.spec_steps + 1}"
                )
                self.accept_length = float(self.spec_steps + 1)
        else:
            if self.accept_length not in (None, 1.0):
                self.notes.append("accept length ignored: no --speculative-algorithm")
            self.accept_length = 1.0
        if self.accept_length < 1:
            parser.error("accept length must be >= 1 (tokens per decode step)")
        self.max_running = ns.max_running_requests or (SPEC_DEFAULT_MAX_RUNNING if self.spec else None)

    def settings(self) -> dict:
        return {
            "load_s": self.load_s, "warmup_s": self.warmup_s, "ttft_ms": self.ttft_ms,
            "decode_tok_s": self.decode_tok_s, "aggregate_tok_s": self.aggregate_tok_s,
            "accept_length": self.accept_length, "fault": self.fault,
        }

    def redacted_argv(self) -> list[str]:
        out, hide = [], False
        for tok in self.argv:
            if hide:
                out.append("***")
                hide = False
            elif tok == "--api-key":
                out.append(tok)
                hide = True
            elif tok.startswith("--api-key="):
                out.append("--api-key=***")
            else:
                out.append(tok)
        return out


# ---------------------------------------------------------------------------------------------------
# Faked tracebacks


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
        "    assert quant_method is not None\n"
        + _final_line(message, "AssertionError")
        + "\n"
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


# ---------------------------------------------------------------------------------------------------
# Pacing


class Pacer:
    """One virtual clock shared by all running streams; it advances at the per-stream rate.

    The rate is min(decode, aggregate / running) and changes only when `running` changes; at each
    change the clock is re-anchored (v0 at t0), so every deadline stays absolute.
    """

    def __init__(self, decode_tok_s: float, aggregate_tok_s: float):
        self.loop = asyncio.get_running_loop()
        self.decode = decode_tok_s
        self.aggregate = aggregate_tok_s
        self.running = 0
        self.v0 = 0.0
        self.t0 = self.loop.time()
        self.rate = decode_tok_s
        self._heap: list = []
        self._seq = 0
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def v_at(self, t: float) -> float:
        return self.v0 + max(0.0, t - self.t0) * self.rate

    def deadline(self, v: float) -> float:
        return self.t0 + (v - self.v0) / self.rate

    def add_running(self, delta: int) -> None:
        now = self.loop.time()
        self.v0, self.t0 = self.v_at(now), now
        self.running += delta
        rate = self.decode
        if self.aggregate > 0 and self.running > 0:
            rate = min(rate, self.aggregate / self.running)
        self.rate = rate
        self._arm(force=True)

    async def wait(self, v: float) -> None:
        if self.deadline(v) <= self.loop.time() + WAKE_TOLERANCE_S:
            return
        fut = self.loop.create_future()
        self._seq += 1
        heapq.heappush(self._heap, (v, self._seq, fut))
        self._arm(force=False)
        await fut

    def _arm(self, force: bool) -> None:
        if not self._heap:
            return
        when = self.deadline(self._heap[0][0])
        if not force and when >= self._armed_at:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle, self._armed_at = None, math.inf
        limit = self.v_at(self.loop.time() + WAKE_TOLERANCE_S)
        heap = self._heap
        while heap and heap[0][0] <= limit:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)
        self._arm(force=True)


class Histogram:
    def __init__(self, buckets: tuple):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1


class Stats:
    def __init__(self):
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.num_requests = 0
        self.aborted = 0
        self.emitted_tokens = 0  # tokens sent so far, finished or not (for gen_throughput)
        self.spec_verify_calls = 0
        self.spec_accepted_tokens = 0
        self.queued = 0
        self.gen_throughput = 0.0
        self.ttft = Histogram((0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 120, 160))
        self.e2e = Histogram((0.1, 0.2, 0.4, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 150, 200, 300))

    def avg_accept_length(self) -> float | None:
        if not self.spec_verify_calls:
            return None
        return self.spec_accepted_tokens / self.spec_verify_calls


class Plan:
    """What one request will produce: length, finish reason, reasoning split, token text."""

    def __init__(self, prompt: str, prompt_tokens: int, max_new: int, min_new: int, ignore_eos: bool,
                 reasoning: bool, garbage: bool):
        self.seed = zlib.crc32(prompt.encode("utf-8", "replace"))
        self.prompt_tokens = prompt_tokens
        stop_at = None if ignore_eos else max(EOS_MIN + self.seed % EOS_SPAN, min_new)
        if stop_at is not None and stop_at < max_new:
            self.n, self.finish = stop_at, "stop"
        else:
            self.n, self.finish = max_new, "length"
        self.reasoning_tokens = int(self.n * REASONING_SHARE) if reasoning else 0
        self.garbage = garbage

    def text(self, start: int, end: int) -> str:
        if self.garbage:
            return GARBAGE_TOKEN * (end - start)
        return "".join(VOCAB[(self.seed + 7 * j) % len(VOCAB)] + " " for j in range(start, end))

    def ids(self, start: int, end: int) -> list[int]:
        if self.garbage:
            return [GARBAGE_TOKEN_ID] * (end - start)
        return [VOCAB_ID_BASE + (self.seed + 7 * j) % len(VOCAB) for j in range(start, end)]

    def finish_json(self) -> tuple:
        """(finish_reason, matched_stop) in OpenAI form."""
        return (self.finish, EOS_TOKEN_ID) if self.finish == "stop" else (self.finish, None)


class Engine:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.pacer = Pacer(cfg.decode_tok_s, cfg.aggregate_tok_s)
        self.slots = asyncio.Semaphore(cfg.max_running) if cfg.max_running else None
        self.stats = Stats()

    async def run(self, plan: Plan, internal: bool = False):
        """Yield (start, end) token ranges, one per step: the prefill token, then decode steps."""
        cfg, st, loop = self.cfg, self.stats, self.loop
        arrival = loop.time()
        st.queued += 1
        try:
            if self.slots is not None:
                await self.slots.acquire()
        finally:
            st.queued -= 1
        self.pacer.add_running(+1)
        finished = False
        try:
            first_due = loop.time() + cfg.ttft_ms / 1000.0
            await asyncio.sleep(max(0.0, first_due - loop.time()))
            st.ttft.observe(loop.time() - arrival)
            if plan.n > 0:
                st.emitted_tokens += 1
                yield 0, 1
            crash_at = plan.n // 2 if cfg.fault == "crash_mid_stream" and not internal else None
            v_first = self.pacer.v_at(first_due)
            done, step = 1, 0
            while done < plan.n:
                if crash_at is not None and done >= crash_at:
                    sys.stderr.write(load_time_stamp() + runtime_crash_traceback())
                    sys.stderr.flush()
                    sys.stdout.flush()
                    os._exit(1)
                step += 1
                last = min(plan.n - 1, int(step * cfg.accept_length + 1e-9))
                await self.pacer.wait(v_first + last)
                if cfg.spec:
                    st.spec_verify_calls += 1
                    st.spec_accepted_tokens += last + 1 - done
                st.emitted_tokens += last + 1 - done
                yield done, last + 1
                done = last + 1
            finished = True
            st.num_requests += 1
            st.prompt_tokens += plan.prompt_tokens
            st.generation_tokens += plan.n
            st.e2e.observe(loop.time() - arrival)
        finally:
            if not finished:
                st.aborted += 1
            self.pacer.add_running(-1)
            if self.slots is not None:
                self.slots.release()


def load_time_stamp() -> str:
    return f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] "


# ---------------------------------------------------------------------------------------------------
# HTTP


class HttpError(Exception):
    def __init__(self, status: int, body):
        super().__init__(status)
        self.status = status
        self.body = body


def openai_error(status: int, message: str, kind: str) -> HttpError:
    return HttpError(status, {"object": "error", "message": message, "type": kind, "param": None,
                              "code": status})


class Request:
    def __init__(self, method: str, path: str, version: str, headers: dict, body: bytes):
        self.method, self.path, self.version, self.headers, self.body = method, path, version, headers, body

    def json(self) -> dict:
        try:
            data = json.loads(self.body or b"null")
        except ValueError as exc:
            raise openai_error(400, f"Invalid JSON body: {exc}", "BadRequestError") from None
        if not isinstance(data, dict):
            raise openai_error(400, "Request body must be a JSON object", "BadRequestError")
        return data


class Responder:
    """Writes one response: JSON with Content-Length, or SSE (chunked on HTTP/1.1, else close-delimited)."""

    def __init__(self, writer: asyncio.StreamWriter, version: str, keep_alive: bool):
        self.writer = writer
        self.version = version
        self.keep_alive = keep_alive
        self.chunked = False
        self.status = 0
        self._pending: list[bytes] = []

    def _head(self, status: int, headers: list) -> bytes:
        self.status = status
        lines = [f"HTTP/1.1 {status} {HTTP_REASONS.get(status, '')}", "server: uvicorn",
                 f"{EMULATED_HEADER}: true", "connection: " + ("keep-alive" if self.keep_alive else "close")]
        lines += [f"{k}: {v}" for k, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def send(self, status: int, body: bytes, content_type: str) -> None:
        head = self._head(status, [("content-type", content_type), ("content-length", str(len(body)))])
        self.writer.write(head + body)
        await self.writer.drain()

    async def send_json(self, status: int, obj) -> None:
        await self.send(status, json.dumps(obj, separators=(",", ":")).encode(), "application/json")

    def start_sse(self) -> None:
        self.chunked = self.version == "HTTP/1.1"
        if not self.chunked:
            self.keep_alive = False
        headers = [("content-type", "text/event-stream; charset=utf-8"), ("cache-control", "no-cache")]
        if self.chunked:
            headers.append(("transfer-encoding", "chunked"))
        self._pending.append(self._head(200, headers))  # goes out with the first token: one write, not two

    def add(self, obj) -> None:
        """Queue one SSE event; events queued together go out in one write at the next flush()."""
        data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        payload = f"data: {data}\n\n".encode()
        if self.chunked:
            payload = b"%x\r\n%s\r\n" % (len(payload), payload)
        self._pending.append(payload)

    async def flush(self) -> None:
        self.writer.write(b"".join(self._pending))
        self._pending.clear()
        await self.writer.drain()

    async def event(self, obj) -> None:
        self.add(obj)
        await self.flush()

    async def end_sse(self) -> None:
        self.add("[DONE]")
        if self.chunked:
            self._pending.append(b"0\r\n\r\n")
        await self.flush()


def prompt_token_count(text: str) -> int:
    return max(1, len(text.split()))


def _content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _int_field(body: dict, names: tuple, default, minimum: int = 0):
    for name in names:
        if body.get(name) is not None:
            value = body[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise openai_error(400, f"{name} must be an integer >= {minimum}", "BadRequestError")
            return value
    return default


class Server:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.engine = Engine(cfg)
        self.ready = False
        self.started = time.time()
        self.routes = {
            "/health": ("GET", self.health), "/health_generate": ("GET", self.health),
            "/ready": ("GET", self.health),
            "/v1/models": ("GET", self.models), "/model_info": ("GET", self.model_info),
            "/get_model_info": ("GET", self.model_info), "/server_info": ("GET", self.server_info),
            "/get_server_info": ("GET", self.server_info), "/metrics": ("GET", self.metrics),
            "/flush_cache": ("POST", self.flush_cache),
            "/v1/chat/completions": ("POST", self.chat), "/v1/completions": ("POST", self.completions),
            "/generate": ("POST", self.generate),
        }

    # -- connection handling --------------------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                except asyncio.LimitOverrunError:
                    await Responder(writer, "HTTP/1.1", False).send_json(431, {"detail": "headers too large"})
                    break
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, version = lines[0].split(" ", 2)
                except ValueError:
                    break
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                conn = headers.get("connection", "").lower()
                keep_alive = (version == "HTTP/1.1" and conn != "close") or conn == "keep-alive"
                out = Responder(writer, version, keep_alive)
                if headers.get("expect", "").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                try:
                    body = await self._read_body(reader, headers)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                except ValueError:
                    await out.send_json(400, {"detail": "bad request body framing"})
                    break
                req = Request(method, target.split("?", 1)[0], version, headers, body)
                await self.dispatch(req, out)
                print(f'INFO:     {peer[0]}:{peer[1]} - "{method} {req.path} {version}" '
                      f"{out.status} {HTTP_REASONS.get(out.status, '')}", flush=True)
                if not out.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _read_body(reader: asyncio.StreamReader, headers: dict) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")  # no trailers expected
                    return b"".join(parts)
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length = int(headers.get("content-length", "0") or 0)
        return await reader.readexactly(length) if length > 0 else b""

    async def dispatch(self, req: Request, out: Responder) -> None:
        cfg = self.cfg
        try:
            protected = not req.path.startswith(("/health", "/ready", "/metrics"))
            if cfg.args.api_key and protected and req.method != "OPTIONS":
                if req.headers.get("authorization", "") != f"Bearer {cfg.args.api_key}":
                    raise HttpError(401, {"error": "Unauthorized"})
            route = self.routes.get(req.path)
            if route is None and req.path.startswith("/v1/models/"):
                route = ("GET", self.model_by_id)
            if route is None:
                raise HttpError(404, {"detail": "Not Found"})
            if req.method != route[0]:
                raise HttpError(405, {"detail": "Method Not Allowed"})
            await route[1](req, out)
        except HttpError as exc:
            if out.status:  # headers already sent (streaming): the connection cannot be reused
                out.keep_alive = False
            else:
                await out.send_json(exc.status, exc.body)
        except (ConnectionError, asyncio.IncompleteReadError):
            raise
        except Exception as exc:  # a bug in the emulator: answer like a server would, keep serving
            log(f"ERROR: Exception in ASGI application: {exc!r}", err=True)
            out.keep_alive = False
            if not out.status:
                await out.send_json(500, {"detail": "Internal Server Error"})

    # -- info endpoints -------------------------------------------------------------------------

    async def health(self, req: Request, out: Responder) -> None:
        if self.ready:
            await out.send(200, b"", "text/plain")
        else:
            await out.send(503, b"", "text/plain")

    def _model_card(self) -> dict:
        return {"id": self.cfg.served_model_name, "object": "model", "created": int(self.started),
                "owned_by": "sglang", "root": self.cfg.args.model_path, "parent": None,
                "max_model_len": self.cfg.context_length}

    async def models(self, req: Request, out: Responder) -> None:
        await out.send_json(200, {"object": "list", "data": [self._model_card()]})

    async def model_by_id(self, req: Request, out: Responder) -> None:
        if req.path[len("/v1/models/"):] != self.cfg.served_model_name:
            raise openai_error(404, f"The model '{req.path[11:]}' does not exist", "NotFoundError")
        await out.send_json(200, self._model_card())

    async def model_info(self, req: Request, out: Responder) -> None:
        a = self.cfg.args
        await out.send_json(200, {
            "emulated": True, "model_path": a.model_path, "tokenizer_path": a.model_path,
            "served_model_name": self.cfg.served_model_name, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "load_format": "auto",
            "reasoning_parser": a.reasoning_parser,
            "tool_call_parser": self.cfg.ignored_flags.get("tool_call_parser"),
            "disaggregation_mode": "null", "has_image_understanding": False,
            "has_audio_understanding": False, "model_type": None, "architectures": None,
        })

    def _internal_state(self) -> dict:
        cfg, st = self.cfg, self.engine.stats
        state = {
            "last_gen_throughput": st.gen_throughput,
            "memory_usage": {"weight": 0.0, "kvcache": 0.0, "token_capacity": cfg.context_length,
                             "graph": 0.0},
            "effective_max_running_requests_per_dp": cfg.max_running,
        }
        if cfg.spec and st.avg_accept_length() is not None:
            state["avg_spec_accept_length"] = st.avg_accept_length()
        return state

    async def server_info(self, req: Request, out: Responder) -> None:
        cfg = self.cfg
        info = {k: v for k, v in vars(cfg.args).items() if not k.startswith("emu_")}
        info.update(cfg.ignored_flags)
        info.update({
            "api_key": "***" if cfg.args.api_key else None,
            "served_model_name": cfg.served_model_name, "context_length": cfg.context_length,
            "max_running_requests": cfg.max_running,
            "speculative_num_steps": cfg.spec_steps, "speculative_eagle_topk": cfg.spec_topk,
            "speculative_num_draft_tokens": cfg.spec_draft,
            "emulated": True, "emulator": cfg.settings(), "version": "emulated",
            "launch_command": " ".join(["python3", "-m", "sglang.launch_server"] + cfg.redacted_argv()),
            "startup_time": self.started, "internal_states": [self._internal_state()],
        })
        await out.send_json(200, info)

    async def metrics(self, req: Request, out: Responder) -> None:
        if not self.cfg.args.enable_metrics:
            raise HttpError(404, {"detail": "Not Found"})
        await out.send(200, self.render_metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")

    def render_metrics(self) -> str:
        cfg, st = self.cfg, self.engine.stats
        labels = f'model_name="{cfg.served_model_name}",tp_rank="0",pp_rank="0"'
        lines = [f"# {BANNER}"]

        def metric(name: str, kind: str, help_text: str, value: float) -> None:
            sample = name + ("_total" if kind == "counter" else "")
            lines.extend([f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}",
                          f"sglang:{sample}{{{labels}}} {float(value)}"])

        def histogram(name: str, help_text: str, h: Histogram) -> None:
            lines.extend([f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"])
            for edge, count in zip(h.buckets, h.counts):
                lines.append(f'sglang:{name}_bucket{{{labels},le="{float(edge)}"}} {float(count)}')
            lines.append(f'sglang:{name}_bucket{{{labels},le="+Inf"}} {float(h.n)}')
            lines.append(f"sglang:{name}_count{{{labels}}} {float(h.n)}")
            lines.append(f"sglang:{name}_sum{{{labels}}} {h.total}")

        metric("prompt_tokens", "counter", "Number of prefill tokens processed.", st.prompt_tokens)
        metric("generation_tokens", "counter", "Number of generation tokens processed.", st.generation_tokens)
        metric("num_requests", "counter", "Number of requests processed.", st.num_requests)
        metric("cached_tokens", "counter", "Number of cached prompt tokens.", 0)
        metric("num_aborted_requests", "counter", "Number of requests aborted.", st.aborted)
        metric("num_running_reqs", "gauge", "The number of running requests.", self.engine.pacer.running)
        metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", st.queued)
        metric("gen_throughput", "gauge", "The generation throughput (token/s).", st.gen_throughput)
        metric("token_usage", "gauge", "The token usage.", 0.0)
        metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0)
        metric("num_retracted_reqs", "gauge", "The number of retracted requests.", 0)
        metric("context_len", "gauge", "The context length.", cfg.context_length)
        if cfg.spec:
            accept = st.avg_accept_length() or 0.0
            proposed = cfg.spec_steps
            metric("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
                   accept)
            metric("spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
                   (accept - 1) / proposed if accept else 0.0)
            metric("spec_verify_calls", "counter", "Number of speculative verify forwards.",
                   st.spec_verify_calls)
            metric("spec_num_steps", "gauge", "Speculative num steps.", cfg.spec_steps)
            metric("spec_num_draft_tokens", "gauge", "Speculative num draft tokens.", cfg.spec_draft)
        histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", st.ttft)
        histogram("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                  st.e2e)
        return "\n".join(lines) + "\n"

    async def flush_cache(self, req: Request, out: Responder) -> None:
        await out.send(200, b"Cache flushed.\nPlease check backend logs for more details. "
                            b"(When there are running or waiting requests, the operation will not be performed.)\n",
                       "text/plain")

    # -- generation -----------------------------------------------------------------------------

    def _check_generation_fault(self, openai: bool) -> None:
        if self.cfg.fault != "http_500":
            return
        message = self.cfg.fault_message or "CUDA error: an illegal memory access was encountered"
        if openai:
            raise openai_error(500, f"Internal server error: {message}", "InternalServerError")
        raise HttpError(500, {"error": {"message": message}})

    def _plan(self, prompt: str, prompt_tokens: int, max_new, min_new: int, ignore_eos: bool,
              reasoning: bool) -> Plan:
        if max_new is None:
            max_new = max(0, self.cfg.context_length - prompt_tokens)
        return Plan(prompt, prompt_tokens, max_new, min_new, ignore_eos, reasoning,
                    self.cfg.fault == "garbage")

    def _usage(self, plan: Plan, completion: int) -> dict:
        return {"prompt_tokens": plan.prompt_tokens, "completion_tokens": completion,
                "total_tokens": plan.prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": 0} if self.cfg.args.enable_cache_report else None,
                "reasoning_tokens": min(plan.reasoning_tokens, completion)}

    def _stream_opts(self, body: dict) -> tuple:
        opts = body.get("stream_options") or {}
        include = bool(opts.get("include_usage")) or self.cfg.args.stream_response_default_include_usage
        return include, bool(opts.get("continuous_usage_stats"))

    async def chat(self, req: Request, out: Responder) -> None:
        body = req.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise openai_error(400, "messages must be a non-empty list", "BadRequestError")
        self._check_generation_fault(openai=True)
        prompt = " ".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))
        kwargs = body.get("chat_template_kwargs") or {}
        reasoning = bool(self.cfg.args.reasoning_parser) and kwargs.get("enable_thinking") is not False \
            and body.get("separate_reasoning", True) is not False
        plan = self._plan(prompt, prompt_token_count(prompt),
                          _int_field(body, ("max_completion_tokens", "max_tokens"), None),
                          _int_field(body, ("min_tokens",), 0), bool(body.get("ignore_eos")), reasoning)
        rid, created, model = f"{uuid.uuid4().hex}", int(time.time()), self.cfg.served_model_name
        r = plan.reasoning_tokens
        if not body.get("stream"):
            async with contextlib.aclosing(self.engine.run(plan)) as steps:
                async for _ in steps:
                    pass
            finish, matched = plan.finish_json()
            message = {"role": "assistant", "content": plan.text(r, plan.n),
                       "reasoning_content": plan.text(0, r) if reasoning else None, "tool_calls": None}
            await out.send_json(200, {
                "id": rid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                             "matched_stop": matched}],
                "usage": self._usage(plan, plan.n)})
            return
        include_usage, continuous = self._stream_opts(body)

        def chunk(delta: dict, finish=None, matched=None, done: int = 0) -> dict:
            return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                                 "matched_stop": matched}],
                    "usage": self._usage(plan, done) if continuous else None}

        # token chunks are most of the traffic: render them from a prepared frame (same JSON as chunk())
        frame = json.dumps(chunk({"role": None, "content": "\0C", "reasoning_content": "\0R"}),
                           separators=(",", ":"))

        def token_chunk(text: str, reasoning_part: bool, done: int):
            if continuous:
                return chunk({"role": None, "content": None if reasoning_part else text,
                              "reasoning_content": text if reasoning_part else None}, done=done)
            content, thought = ("null", json.dumps(text)) if reasoning_part else (json.dumps(text), "null")
            return frame.replace('"\\u0000C"', content, 1).replace('"\\u0000R"', thought, 1)

        out.start_sse()
        sent_role = False
        async with contextlib.aclosing(self.engine.run(plan)) as steps:
            async for start, end in steps:
                if not sent_role:
                    out.add(chunk({"role": "assistant", "content": ""}))
                    sent_role = True
                if start < r:
                    out.add(token_chunk(plan.text(start, min(end, r)), True, end))
                if end > r:
                    out.add(token_chunk(plan.text(max(start, r), end), False, end))
                await out.flush()
        if not sent_role:
            out.add(chunk({"role": "assistant", "content": ""}))
        finish, matched = plan.finish_json()
        out.add(chunk({"role": None, "content": None, "reasoning_content": None}, finish, matched, done=plan.n))
        if include_usage:
            out.add({"id": rid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [], "usage": self._usage(plan, plan.n)})
        await out.end_sse()

    async def completions(self, req: Request, out: Responder) -> None:
        body = req.json()
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            prompt_text, prompt_tokens = " ".join(map(str, prompt)), len(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, str) for t in prompt):
            prompt_text = " ".join(prompt)
            prompt_tokens = prompt_token_count(prompt_text)
        elif isinstance(prompt, str):
            prompt_text, prompt_tokens = prompt, prompt_token_count(prompt)
        else:
            raise openai_error(400, "prompt must be a string, a list of strings or token ids",
                               "BadRequestError")
        self._check_generation_fault(openai=True)
        plan = self._plan(prompt_text, prompt_tokens, _int_field(body, ("max_tokens",), 16),
                          _int_field(body, ("min_tokens",), 0), bool(body.get("ignore_eos")), False)
        rid, created, model = f"cmpl-{uuid.uuid4().hex}", int(time.time()), self.cfg.served_model_name
        finish, matched = plan.finish_json()
        if not body.get("stream"):
            async with contextlib.aclosing(self.engine.run(plan)) as steps:
                async for _ in steps:
                    pass
            await out.send_json(200, {
                "id": rid, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": plan.text(0, plan.n), "logprobs": None,
                             "finish_reason": finish, "matched_stop": matched}],
                "usage": self._usage(plan, plan.n)})
            return
        include_usage, continuous = self._stream_opts(body)

        def chunk(text: str, fin=None, mat=None, done: int = 0) -> dict:
            return {"id": rid, "object": "text_completion", "created": created, "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": fin,
                                 "matched_stop": mat}],
                    "usage": self._usage(plan, done) if continuous else None}

        out.start_sse()
        async with contextlib.aclosing(self.engine.run(plan)) as steps:
            async for start, end in steps:
                await out.event(chunk(plan.text(start, end), done=end))
        out.add(chunk("", finish, matched, done=plan.n))
        if include_usage:
            out.add({"id": rid, "object": "text_completion", "created": created, "model": model,
                     "choices": [], "usage": self._usage(plan, plan.n)})
        await out.end_sse()

    async def generate(self, req: Request, out: Responder) -> None:
        body = req.json()
        text, input_ids = body.get("text"), body.get("input_ids")
        if isinstance(text, str):
            prompt_text, prompt_tokens = text, prompt_token_count(text)
        elif isinstance(input_ids, list) and input_ids and all(isinstance(t, int) for t in input_ids):
            prompt_text, prompt_tokens = " ".join(map(str, input_ids)), len(input_ids)
        else:
            raise HttpError(400, {"error": {"message": "The emulator takes one prompt: 'text' (a string) "
                                                       "or 'input_ids' (a list of ints)"}})
        self._check_generation_fault(openai=False)
        sp = body.get("sampling_params") or {}
        plan = self._plan(prompt_text, prompt_tokens, _int_field(sp, ("max_new_tokens",), 128),
                          _int_field(sp, ("min_new_tokens",), 0), bool(sp.get("ignore_eos")), False)
        rid, cfg = uuid.uuid4().hex, self.cfg
        start_time = time.monotonic()

        def meta(done: int, final: bool) -> dict:
            m = {"id": rid, "finish_reason": None, "prompt_tokens": plan.prompt_tokens,
                 "completion_tokens": done, "cached_tokens": 0, "reasoning_tokens": 0,
                 "weight_version": "default", "num_retractions": 0, "emulated": True}
            if final:
                if plan.finish == "stop":
                    m["finish_reason"] = {"type": "stop", "matched": EOS_TOKEN_ID}
                else:
                    m["finish_reason"] = {"type": "length", "length": plan.n}
                m["e2e_latency"] = time.monotonic() - start_time
                if cfg.spec:
                    verify = max(1, math.ceil((plan.n - 1) / cfg.accept_length)) if plan.n > 1 else 0
                    m["spec_verify_ct"] = verify
                    m["spec_accept_length"] = plan.n / verify if verify else 0.0
                    m["spec_accept_rate"] = ((plan.n / verify - 1) / cfg.spec_steps) if verify else 0.0
            return m

        if not body.get("stream"):
            async with contextlib.aclosing(self.engine.run(plan)) as steps:
                async for _ in steps:
                    pass
            await out.send_json(200, {"text": plan.text(0, plan.n), "output_ids": plan.ids(0, plan.n),
                                      "meta_info": meta(plan.n, True)})
            return
        incremental = cfg.args.incremental_streaming_output
        out.start_sse()
        last = 0
        async with contextlib.aclosing(self.engine.run(plan)) as steps:
            async for start, end in steps:
                lo = start if incremental else 0
                final = end == plan.n
                await out.event({"text": plan.text(lo, end), "output_ids": plan.ids(lo, end),
                                 "meta_info": meta(end, final)})
                last = end
        if last != plan.n or plan.n == 0:
            out.add({"text": "", "output_ids": [], "meta_info": meta(plan.n, True)})
        await out.end_sse()

    # -- lifecycle ------------------------------------------------------------------------------

    async def warm_up(self) -> None:
        """SGLang sends one real 8-token request before it reports ready; so does the emulator."""
        cfg = self.cfg
        deadline = asyncio.get_running_loop().time() + cfg.warmup_s
        if not cfg.args.skip_server_warmup:
            plan = Plan(WARMUP_PROMPT, prompt_token_count(WARMUP_PROMPT), WARMUP_TOKENS, 0, True, False, False)
            async with contextlib.aclosing(self.engine.run(plan, internal=True)) as steps:
                async for _ in steps:
                    pass
        await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))
        if cfg.fault == "never_ready":
            log("Warmup request is still pending (no response from the scheduler).")
            return
        print('INFO:     127.0.0.1:0 - "POST /generate HTTP/1.1" 200 OK', flush=True)
        self.ready = True
        log(READY_LINE)

    async def decode_log(self) -> None:
        st, loop = self.engine.stats, asyncio.get_running_loop()
        last_t, last_tokens = loop.time(), st.emitted_tokens
        while True:
            await asyncio.sleep(DECODE_LOG_INTERVAL_S)
            now = loop.time()
            st.gen_throughput = (st.emitted_tokens - last_tokens) / (now - last_t)
            last_t, last_tokens = now, st.emitted_tokens
            if self.engine.pacer.running:
                log(f"Decode batch. #running-req: {self.engine.pacer.running}, "
                    f"gen throughput (token/s): {st.gen_throughput:.2f}, #queue-req: {st.queued}")


async def serve(cfg: Config) -> int:
    loop = asyncio.get_running_loop()
    a = cfg.args
    log(BANNER)
    # Real SGLang (0.5.23 included) logs server_args with the API key in clear; so does the emulator, so that the
    # deploy's launcher has to mask it (sglang_deploy/launch.py) and the lab proves it does.
    log(f"server_args=ServerArgs(model_path={a.model_path!r}, served_model_name={cfg.served_model_name!r}, "
        f"api_key={a.api_key!r}, host={a.host!r}, port={a.port}, speculative_algorithm={a.speculative_algorithm!r}, "
        f"reasoning_parser={a.reasoning_parser!r}, enable_metrics={a.enable_metrics}, "
        f"ignored={sorted(cfg.ignored_flags)})")
    log(f"Emulation settings: {json.dumps(cfg.settings())}")
    for note in cfg.notes:
        log(f"WARNING: {note}", err=True)
    if cfg.spec_assert_fails:
        sys.stderr.write(args_assert_traceback())
        return 1
    log("Load weight begin. (emulated: nothing is loaded)")
    if cfg.fault == "crash_on_load":
        await asyncio.sleep(cfg.load_s / 2)
        sys.stderr.write(load_time_stamp() + load_crash_traceback(cfg.fault_message))
        sys.stderr.write("Received sigquit from a child process. It usually means the child failed.\n")
        sys.stderr.flush()
        return 1
    await asyncio.sleep(cfg.load_s)
    log("Load weight end. Capture cuda graph end. (emulated)")
    server = Server(cfg)
    try:
        listener = await asyncio.start_server(server.handle, a.host, a.port, backlog=4096)
    except OSError as exc:
        log(f"ERROR: [Errno {exc.errno}] error while attempting to bind on address "
            f"({a.host!r}, {a.port}): {exc.strerror}", err=True)
        return 1
    log(f"Started server process [{os.getpid()}]")
    log("Application startup complete.")
    log(f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    tasks = [loop.create_task(server.warm_up()), loop.create_task(server.decode_log())]
    await stop
    log("Shutting down")
    for task in tasks:
        task.cancel()
    listener.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    cfg = Config(sys.argv[1:] if argv is None else argv, dict(os.environ))
    try:
        return asyncio.run(serve(cfg))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
