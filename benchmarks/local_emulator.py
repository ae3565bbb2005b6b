"""The emulated SGLang server as a child process on 127.0.0.1, and a process's CPU time: shared by the benchmark
and calibration scripts and the tests (tests/emulator_proc.py). Needs the repository's src/ on the import path."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path


_GIVEN: set = set()  # free_port's ports in this process: several are drawn before any is bound


def free_port() -> int:
    """A port nothing is bound to, from 21000-27999, none given before in this process: below the kernel's ephemeral
    range (32768 up), so no outgoing connection takes it as its own before the server binds it (a bind(0) port is one
    of those: a CI run lost an emulator's port to one), and clear of the project's fixed ports (the dist-init 20000,
    the router's metrics 29000, SGLang's 30000, the GPU lab stand-in's 30700), also for the NCCL port SGLang derives
    from a server's (100-1000 above it). Probed on every address, as a group's dist-init store binds."""
    draw = random.SystemRandom()
    for _ in range(100):
        port = draw.randrange(21000, 28000)
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    raise OSError("no free port in 21000-27999")


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process from /proc (Linux), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Emulator:
    """`python -m sglang_deploy.emulator` on a free port (or ``port``: a server started again where one ran); its
    stdout/stderr go to a file in tmp_path, one per port (appended)."""

    def __init__(self, tmp_path: Path, *flags: str, port: int | None = None, **env: float | str):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"emulator-{self.port}.log"
        settings = {"SGLANG_EMU_LOAD_S": "0.3", "SGLANG_EMU_WARMUP_S": "0.2"}
        settings.update({f"SGLANG_EMU_{k.upper()}": str(v) for k, v in env.items()})
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sglang_deploy.emulator",
                    "--model-path",
                    "Qwen/Qwen3.5-397B-A17B-NVFP4",
                    "--served-model-name",
                    "qwen",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    *flags,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **settings},
            )
        self.exited_at: float | None = None
        threading.Thread(target=self._watch_exit, daemon=True).start()

    def _watch_exit(self) -> None:
        self.proc.wait()
        self.exited_at = time.monotonic()

    def wait_ready(self, timeout: float = 20.0) -> "Emulator":
        from ansible_collections.sglang.deploy.plugins.module_utils.readiness import wait_ready

        wait_ready(self.url, timeout=timeout, sleep=0.1)
        return self

    def log_lines(self) -> list:
        return self.log.read_text(errors="replace").splitlines()

    def stop(self) -> int:
        return stop_process(self.proc)


def stop_process(proc: subprocess.Popen) -> int:
    """SIGTERM, then SIGKILL after 10 s; the exit status."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
