"""The emulated server process: load, listen, route requests, warm up, report readiness, shut down."""

from __future__ import annotations

import asyncio
import errno
import functools
import hmac
import json
import math
import os
import signal
import sys
import time

from . import endpoints, generation, group, request_log
from .config import BANNER, Config, bind_failed, log
from .engine import Engine, Plan
from .faults import args_assert_traceback, kill_process_tree, load_crash_traceback, load_time_stamp
from .protocol import Handler, HttpError, Request, serve_connection

READY_LINE = "The server is fired up and ready to roll!"
WARMUP_PROMPT = "The capital city of France is"
WARMUP_TOKENS = 8
DECODE_LOG_INTERVAL_S = 5.0
DRAIN_LOG_INTERVAL_S = 5.0
ACCEPT_RESOURCE_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_WARN_INTERVAL_S = 60.0
# SGLang's AuthLevel.ADMIN_OPTIONAL endpoints (utils/auth.py): the admin key when the server has one, else the API key.
ADMIN_OPTIONAL = frozenset({"/flush_cache", "/freeze_gc", "/configure_logging"})
ROUTES = {  # path -> (methods, handler(server, request, responder))
    "/health": ("GET", endpoints.health),
    "/health_generate": ("GET", endpoints.health),
    "/ready": ("GET", endpoints.health),
    "/v1/models": ("GET", endpoints.models),
    "/model_info": ("GET", endpoints.model_info),
    "/get_model_info": ("GET", endpoints.model_info),
    "/server_info": ("GET", endpoints.server_info),
    "/get_server_info": ("GET", endpoints.server_info),
    "/metrics": ("GET", endpoints.metrics),
    "/flush_cache": ("GET POST", endpoints.flush_cache),
    "/freeze_gc": ("GET POST", endpoints.freeze_gc),
    "/configure_logging": ("GET POST", request_log.configure_logging),
    "/v1/chat/completions": ("POST", request_log.logged(generation.chat)),
    "/v1/completions": ("POST", request_log.logged(generation.completions)),
    "/generate": ("POST", request_log.logged(generation.generate)),
}


class Server:
    """State shared by the endpoints: the configuration, the engine, readiness."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.engine = Engine(cfg)
        self.request_log = request_log.RequestLog(cfg.ignored_flags)
        self.ready = False
        self.started = time.time()
        self.accept_warned_at = -math.inf
        self.draining = False  # SIGTERM came: /health* 503, exit once no request is left
        self.group_lost = False  # a node of the group is gone: requests hang until the process dies
        self.requests = 0
        self.generations = 0  # generation requests taken: the nondeterministic fault draws from it
        self.idle = asyncio.Event()
        self.idle.set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.route)

    def route(self, req: Request) -> Handler:
        """The handler for a request, from its line and headers alone: auth is checked before the body is read."""
        key = self.cfg.args.api_key
        if req.path in ADMIN_OPTIONAL:
            key = self.cfg.args.admin_api_key or key
        protected = not req.path.startswith(("/health", "/ready", "/metrics"))
        if key and protected and req.method != "OPTIONS":
            sent = req.headers.get("authorization", "").encode("latin-1")
            if not hmac.compare_digest(sent, b"Bearer " + key.encode()):
                raise HttpError(401, {"error": "Unauthorized"})
        route = ROUTES.get(req.path)
        if route is None and req.path.startswith("/v1/models/"):
            route = ("GET", endpoints.model_by_id)
        if route is None:
            raise HttpError(404, {"detail": "Not Found"})
        if req.method not in route[0].split():
            raise HttpError(405, {"detail": "Method Not Allowed"})
        return functools.partial(self.counted, route[1])

    async def counted(self, handler, req: Request, out) -> None:
        """Run a handler, counting it among the requests a SIGTERM drain waits for."""
        if self.group_lost:
            await asyncio.Event().wait()  # the scheduler is gone: nothing will answer
        self.requests += 1
        self.idle.clear()
        try:
            await handler(self, req, out)
        finally:
            self.requests -= 1
            if not self.requests:
                self.idle.set()

    async def drain(self, stop: asyncio.Future) -> None:
        """SIGTERM as SGLang takes it (python/sglang/srt/managers/tokenizer_manager.py, SignalHandler.sigterm_handler
        and TokenizerManager.sigterm_watchdog): /health answers 503, running requests finish with no time limit of
        its own, new ones are still taken (generate_request has no shutdown check; drain.json: a /generate sent
        during the drain answered 200), then the process kills itself. SGLang looks every 5 s; the emulator ends as
        soon as no request is left."""
        log("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.draining = True
        while True:
            log(f"Gracefully exiting... Remaining number of requests {self.requests}.")
            if not self.requests:
                break
            try:
                await asyncio.wait_for(self.idle.wait(), DRAIN_LOG_INTERVAL_S)
            except TimeoutError:
                pass
        stop.done() or stop.set_result("drained")

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        """At the fd limit asyncio retries accept() every second and logs a traceback each time: one line a minute
        instead. Everything else goes to asyncio's default handler."""
        exc = context.get("exception")
        if "socket" in context and isinstance(exc, OSError) and exc.errno in ACCEPT_RESOURCE_ERRNOS:
            if loop.time() >= self.accept_warned_at + ACCEPT_WARN_INTERVAL_S:
                self.accept_warned_at = loop.time()
                log(
                    f"WARNING: cannot accept connections: {exc.strerror}; they wait in the backlog "
                    f"(said at most once a minute)",
                    err=True,
                )
            return
        loop.default_exception_handler(context)

    async def warm_up(self) -> None:
        """SGLang sends one real 8-token request before it reports ready; so does the emulator."""
        cfg = self.cfg
        deadline = asyncio.get_running_loop().time() + cfg.warmup_s
        if not cfg.args.skip_server_warmup:
            plan = Plan(
                WARMUP_PROMPT, generation.prompt_token_count(WARMUP_PROMPT), WARMUP_TOKENS, 0, True, False, False
            )
            await self.engine.drain(plan, internal=True)
        await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))
        if cfg.fault == "never_ready":
            log("Warmup request is still pending (no response from the scheduler).")
            return
        print('INFO:     127.0.0.1:0 - "POST /generate HTTP/1.1" 200 OK', flush=True)
        self.ready = True
        log(READY_LINE)

    async def watch_group(self, store: group.Store) -> None:
        """A member's connection dropped: requests hang from now on, and the process dies (group.die)."""
        reason = await store.lost
        self.group_lost = True
        self.engine.pacer.halt()
        await group.die(reason)

    async def decode_log(self) -> None:
        st, loop = self.engine.stats, asyncio.get_running_loop()
        last_t, last_tokens = loop.time(), st.emitted_tokens
        while True:
            await asyncio.sleep(DECODE_LOG_INTERVAL_S)
            now = loop.time()
            st.gen_throughput = (st.emitted_tokens - last_tokens) / (now - last_t)
            last_t, last_tokens = now, st.emitted_tokens
            if self.engine.pacer.running:
                log(
                    f"Decode batch. #running-req: {self.engine.pacer.running}, "
                    f"gen throughput (token/s): {st.gen_throughput:.2f}, #queue-req: {st.queued}"
                )


async def pause(seconds: float) -> float:
    """Sleep; the seconds it took (what SGLang's startup lines report as elapsed)."""
    tic = time.perf_counter()
    await asyncio.sleep(seconds)
    return time.perf_counter() - tic


def _log_launch(cfg: Config) -> None:
    a = cfg.args
    log(BANNER)
    # Real SGLang (0.5.23 included) logs server_args with the API key in clear; so does the emulator, so that the
    # deploy's launcher has to mask it (plugins/module_utils/launch.py) and the lab proves it does.
    log(
        f"server_args=ServerArgs(model_path={a.model_path!r}, served_model_name={cfg.served_model_name!r}, "
        f"api_key={a.api_key!r}, host={a.host!r}, port={a.port}, speculative_algorithm={a.speculative_algorithm!r}, "
        f"reasoning_parser={a.reasoning_parser!r}, enable_metrics={a.enable_metrics}, tp_size={a.tp_size}, "
        f"pp_size={a.pp_size}, nnodes={a.nnodes}, node_rank={a.node_rank}, dist_init_addr={a.dist_init_addr!r}, "
        f"dist_timeout={a.dist_timeout!r}, "
        f"ignored={sorted(cfg.ignored_flags)})"
    )
    log(f"Emulation settings: {json.dumps(cfg.settings())}")
    for note in cfg.notes:
        log(f"WARNING: {note}", err=True)


async def _join_group(cfg: Config) -> tuple:
    """A multi-node group's rendezvous: rank 0 opens the store and waits for the others, a rank >= 1 joins it.
    (store, member, exit status when it failed)."""
    if cfg.args.node_rank == 0:
        store = group.Store(cfg)
        return store, None, await store.open() or await store.wait_formed()
    member = group.Member(cfg)
    return None, member, await member.join()


async def _load(cfg: Config) -> int | None:
    """The weights and the CUDA graphs, each half the load time; 1 when the crash_on_load fault crashes it."""
    log("Load weight begin. avail mem=0.00 GB")
    if cfg.fault == "crash_on_load":
        await asyncio.sleep(cfg.load_s / 2)
        sys.stderr.write(load_time_stamp() + load_crash_traceback(cfg.fault_message))
        sys.stderr.write("Received sigquit from a child process. It usually means the child failed.\n")
        sys.stderr.flush()
        return 1
    took = await pause(cfg.load_s / 2)
    log(f"Load weight end. elapsed={took:.2f} s, type=EmulatedModel, avail mem=0.00 GB, mem usage=0.00 GB.")
    log(
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {cfg.context_length}, K size: 0.00 GB, V size: 0.00 GB"
    )
    log("Memory pool end. avail mem=0.00 GB")
    graph, per_request = ("target verify", cfg.spec_draft) if cfg.spec else ("target decode", 1)
    log(f"Capture {graph} CUDA graph begin. backend=full, num_tokens_per_req={per_request}, avail mem=0.00 GB")
    took = await pause(cfg.load_s / 2)
    log(f"Capture {graph} CUDA graph end. bs=[1, 2, 4, 8], elapsed={took:.2f} s, mem usage=0.00 GB, avail mem=0.00 GB.")
    return None


async def _listen(cfg: Config, store) -> int:
    """The HTTP server until SIGINT, or SIGTERM's drain (which ends the process tree)."""
    loop = asyncio.get_running_loop()
    a = cfg.args
    server = Server(cfg)
    loop.set_exception_handler(server.loop_error)
    try:
        listener = await asyncio.start_server(server.handle, a.host, a.port, backlog=4096)
    except OSError as exc:
        return bind_failed(exc)
    log(f"Started server process [{os.getpid()}]")
    log("Application startup complete.")
    log(f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
    stop = loop.create_future()
    tasks = [loop.create_task(server.warm_up()), loop.create_task(server.decode_log())]
    loop.add_signal_handler(
        signal.SIGTERM, lambda: server.draining or tasks.append(loop.create_task(server.drain(stop)))
    )
    loop.add_signal_handler(signal.SIGINT, lambda: stop.done() or stop.set_result(None))
    if store is not None:
        tasks.append(loop.create_task(server.watch_group(store)))
    if await stop == "drained":
        kill_process_tree()
    log("Shutting down")
    for task in tasks:
        task.cancel()
    listener.close()
    if store is not None:
        store.close()
    return 0


async def serve(cfg: Config) -> int:
    a = cfg.args
    _log_launch(cfg)
    if cfg.spec_assert_fails:
        sys.stderr.write(args_assert_traceback())
        return 1
    # SGLang 0.5.23's startup lines (ansible_collections.sglang.deploy.plugins.module_utils.startup reads them) with synthetic timing: the load time is
    # half weights, half CUDA graph capture; no memory is used.
    tic = time.perf_counter()
    log("Init parallel begin." + (f" (emulated: node rank {a.node_rank} of {a.nnodes})" if a.nnodes > 1 else ""))
    store, member, failed = await _join_group(cfg) if a.nnodes > 1 else (None, None, None)
    if failed:
        return failed
    log(f"Init parallel ends. elapsed={time.perf_counter() - tic:.2f} s")
    failed = await _load(cfg)
    if failed:
        return failed
    if member is not None:
        return await group.serve_stand_in(cfg, member)
    return await _listen(cfg, store)


def main(argv: list[str] | None = None) -> int:
    cfg = Config(sys.argv[1:] if argv is None else argv, dict(os.environ))
    try:
        return asyncio.run(serve(cfg))
    except KeyboardInterrupt:
        return 0
