"""Multi-node tensor parallelism (--nnodes > 1): the group's rendezvous over real TCP, its death, and the stand-in
server of ranks >= 1.

SGLang's nodes meet in torch's TCPStore on rank 0's --dist-init-addr (python/sglang/srt/model_executor/
model_runner.py, init_torch_distributed): rank 0 listens, the others connect, and every node blocks until all
have joined or --dist-timeout (torch's 30 minutes when unset) has passed. The emulator speaks its own line
protocol on that port: a rank >= 1 sends "node-rank N" and rank 0 answers "formed" once all nnodes - 1 have. The
connections stay open; one that closes is the group's death, whichever side closed it (results/gpu-h200/
group_stop.json: rank 0 stopped cleanly still takes rank 1 down, exit 3 two seconds later).

Ranks >= 1 serve no API: python/sglang/srt/utils/common.py, launch_dummy_health_check_server, answers /ping,
/health and /health_generate with 200 (and /metrics with --enable-metrics); the rest is FastAPI's 404.
"""

from __future__ import annotations

import asyncio
import sys

from .config import BANNER, Config, bind_failed, log, split_address
from .faults import dist_store_timeout_traceback, group_death_traceback, kill_process_tree
from .protocol import HttpError, Request, Responder, serve_connection

HELLO = b"node-rank "
FORMED = b"formed\n"
CONNECT_RETRY_S = 0.2
# Rank 0 after a member's loss: SGLang's SIGQUIT handler sleeps 5 s, then kills its process tree (the recordings:
# rank 0 gone 4.5 to 5.5 s after rank 1, status -9).
DEATH_DELAY_S = 5.0
# A rank >= 1 after rank 0's loss (group_stop.json, rank 0 stopped first: rank 1 exited 2.0 s after it, status 3).
MEMBER_EXIT_DELAY_S = 2.0
MEMBER_EXIT_STATUS = 3
STAND_IN_PATHS = ("/ping", "/health", "/health_generate")


def clients(cfg: Config, nodes: int) -> int:
    """torch ranks on `nodes` nodes: the store counts processes (one per GPU), tp x pp over all nodes."""
    a = cfg.args
    world = max(a.tp_size * a.pp_size, a.nnodes)
    return nodes * world // a.nnodes


async def die(reason: str) -> None:
    """Rank 0 lost a member: what SGLang printed, then its own SIGKILL after DEATH_DELAY_S."""
    sys.stderr.write(group_death_traceback(reason))
    log("SIGQUIT received. signum=None, frame=None. It usually means one child failed.", err=True)
    log("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.", err=True)
    await asyncio.sleep(DEATH_DELAY_S)
    kill_process_tree()


class Store:
    """Rank 0: the members' connections. `lost` resolves with a reason when a formed group loses a member."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.members: dict[int, asyncio.StreamWriter] = {}
        self.formed = asyncio.Event()
        self.lost: asyncio.Future = asyncio.get_running_loop().create_future()
        self.listener: asyncio.Server | None = None

    async def open(self) -> int | None:
        """Listen on the dist-init port, on every address as TCPStore does; an exit status when it cannot. (Every
        IPv4 address, or every IPv6 one for an IPv6 dist-init address: a host without IPv6 cannot bind "::".)"""
        a = self.cfg.args
        host, port = split_address(a.dist_init_addr) if a.dist_init_addr else ("127.0.0.1", 0)
        bind = host if not a.dist_init_addr else "::" if ":" in host else "0.0.0.0"
        try:
            self.listener = await asyncio.start_server(self._member, bind, port)
        except OSError as exc:
            log(
                f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {port}, useIpv6: False, code: -{exc.errno}, message: {exc.strerror}",
                err=True,
            )
            return 1
        return None

    async def wait_formed(self) -> int | None:
        """Block until every node has joined; after --dist-timeout, SGLang's error and an exit status."""
        a = self.cfg.args
        try:
            await asyncio.wait_for(self.formed.wait(), self.cfg.dist_timeout)
        except TimeoutError:
            joined, total = clients(self.cfg, 1 + len(self.members)), clients(self.cfg, a.nnodes)
            sys.stderr.write(dist_store_timeout_traceback(self.cfg.dist_timeout, joined, total))
            sys.stderr.flush()
            self.close()
            return 1
        for writer in self.members.values():
            writer.write(FORMED)
        return None

    async def _member(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rank = None
        try:
            line = await asyncio.wait_for(reader.readline(), 5.0)
            if line.startswith(HELLO) and line[len(HELLO) :].strip().isdigit():
                rank = int(line[len(HELLO) :])
            if self.formed.is_set() or rank is None or not 1 <= rank < self.cfg.args.nnodes or rank in self.members:
                return  # not a member, or a second one for a rank: torch would refuse it too
            self.members[rank] = writer
            log(f"Node rank {rank} joined the group ({len(self.members) + 1}/{self.cfg.args.nnodes} nodes).")
            if len(self.members) == self.cfg.args.nnodes - 1:
                self.formed.set()
            while await reader.read(4096):
                pass
        except (OSError, TimeoutError):
            pass
        except asyncio.CancelledError:
            return  # the process is exiting; asyncio's start_server would log the cancellation as an error
        finally:
            if rank is not None and self.members.get(rank) is writer:
                if self.formed.is_set() and not self.lost.done():
                    host, port = (writer.get_extra_info("peername") or ("?", 0))[:2]
                    self.lost.set_result(f"Read error [{host}]:{port}: Connection reset by peer")
                elif not self.formed.is_set():
                    del self.members[rank]  # left before the group formed: it may come back
            writer.close()

    def close(self) -> None:
        for writer in self.members.values():
            writer.close()
        if self.listener is not None:
            self.listener.close()


class Member:
    """A rank >= 1: its connection to rank 0. `ended` resolves when rank 0 is gone."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.ended: asyncio.Future = asyncio.get_running_loop().create_future()

    async def join(self) -> int | None:
        """Connect to rank 0 (retrying) and wait for the group to form; an exit status when it does not."""
        a, loop = self.cfg.args, asyncio.get_running_loop()
        deadline = loop.time() + self.cfg.dist_timeout
        # Without --dist-init-addr SGLang rendezvouses on a random local port: no other node can find it.
        host, port = split_address(a.dist_init_addr) if a.dist_init_addr else ("127.0.0.1", 0)
        while loop.time() < deadline:
            if port:
                try:
                    self.reader, self.writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), max(0.01, deadline - loop.time())
                    )
                    break
                except (OSError, TimeoutError):
                    pass
            await asyncio.sleep(min(CONNECT_RETRY_S, max(0.0, deadline - loop.time())))
        else:
            log(
                f"torch.distributed.DistNetworkError: The client socket has timed out after "
                f"{self.cfg.dist_timeout * 1000}ms while trying to connect to ({host}, {port}).",
                err=True,
            )
            return 1
        self.writer.write(HELLO + b"%d\n" % a.node_rank)
        try:
            line = await asyncio.wait_for(self.reader.readline(), max(0.01, deadline - loop.time()))
        except (OSError, TimeoutError):
            line = b""
        if line != FORMED:
            log(
                f"torch.distributed.DistStoreError: failed to recv, got 0 bytes (rank 0 at {host}:{port} went away)",
                err=True,
            )
            return 1
        asyncio.get_running_loop().create_task(self._watch())
        return None

    async def _watch(self) -> None:
        try:
            while await self.reader.read(4096):
                pass
        except OSError:
            pass
        self.ended.set_result(None)


class StandIn:
    """The HTTP server of a rank >= 1."""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self.route)

    def route(self, req: Request):
        metrics = req.path == "/metrics" and self.cfg.args.enable_metrics
        if req.path not in STAND_IN_PATHS and not metrics:
            raise HttpError(404, {"detail": "Not Found"})
        if req.method != "GET":
            raise HttpError(405, {"detail": "Method Not Allowed"})
        return self.metrics if metrics else self.ok

    async def ok(self, req: Request, out: Responder) -> None:
        await out.send(200, b"", "text/plain")

    async def metrics(self, req: Request, out: Responder) -> None:
        # This rank's registry holds no serving gauges: they come from rank 0's tokenizer and scheduler.
        await out.send(200, f"# {BANNER}\n".encode(), "text/plain; version=0.0.4; charset=utf-8")


async def serve_stand_in(cfg: Config, member: Member) -> int:
    """A rank >= 1 after loading: the stand-in server until rank 0 is gone. SIGTERM is left to its default action
    (the recording: rank 1 exited at once, -15, and rank 0 died after it)."""
    a = cfg.args
    try:
        listener = await asyncio.start_server(StandIn(cfg).handle, a.host, a.port)
    except OSError as exc:
        return bind_failed(exc)
    log(f"Dummy health check server started in background thread at {a.host}:{a.port}")
    await member.ended
    sys.stderr.write(group_death_traceback(f"Connection to node rank 0 ({a.dist_init_addr}) closed by peer"))
    await asyncio.sleep(MEMBER_EXIT_DELAY_S)
    listener.close()
    return MEMBER_EXIT_STATUS
