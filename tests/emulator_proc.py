"""Test helpers: the emulated SGLang server as a subprocess on 127.0.0.1, and running a library module
in-process with patch_module_args."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ansible.module_utils import _internal
from ansible.module_utils.testing import patch_module_args

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """`python -m sglang_deploy.emulator` on a free port; stdout/stderr go to files in tmp_path."""

    def __init__(self, tmp_path: Path, *flags: str, **env: float | str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"emulator-{self.port}.log"
        settings = {"SGLANG_EMU_LOAD_S": "0.3", "SGLANG_EMU_WARMUP_S": "0.2"}
        settings.update({f"SGLANG_EMU_{k.upper()}": str(v) for k, v in env.items()})
        with open(self.log, "wb") as out:
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
        from sglang_deploy.host.readiness import wait_ready

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


def run_module(module, args: dict, capsys) -> tuple:
    """Run module.main() with args; (failed, result dict)."""
    capsys.readouterr()
    # As on a host: once controller code was imported in this process (any ansible.errors import), the
    # module_utils would hand warnings to the controller's display instead of returning them.
    controller, _internal.is_controller = _internal.is_controller, False
    with patch_module_args(args):
        try:
            module.main()
        except SystemExit:
            pass
        finally:
            _internal.is_controller = controller
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{") :])
    return bool(result.get("failed")), result
