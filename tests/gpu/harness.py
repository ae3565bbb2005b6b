"""Real SGLang servers for the GPU suite: launched through the project's launch.py as the unit does, in their
own process group (what systemd's control group is to the unit), with output in a log file.

The GPU test host may have no systemd (the H200 test machine has none), so the readiness code's two systemd
readers are replaced by `ProcessUnit`, a named stand-in that answers `systemctl show` from the process and
`journalctl` from the log file. Everything SGLang-side is real.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import ClassVar

from sglang_deploy.launch import profiles
from ansible_collections.sglang.deploy.plugins.module_utils import gpu, readiness, server_http

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "plugins" / "module_utils" / "launch.py"
SGLANG_VERSION = "0.5.16"
API_KEY = "gpu-suite-secret-9f3a1c"  # a test value: the suite checks it never shows in argv or logs
# NVLink multicast stays off on shared hosts (the H200 machines' rule); harmless elsewhere.
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# The tiny model's launch: dummy weights; pytorch sampling and no prefill CUDA graph as in the staging recipe
# (the prefill graph capture crashed on a head_dim 64 config); decode graphs up to the sweep's concurrency.
DENSE_ARGS = {
    "load-format": "dummy",
    "mem-fraction-static": 0.5,
    "sampling-backend": "pytorch",
    "disable-prefill-cuda-graph": True,
    "cuda-graph-max-bs": 64,
    "enable-metrics": True,
}


# NEXTN (MTP) on the small hybrid model: the dense launch plus speculative decoding, graphs up to 16 requests.
NEXTN_ARGS = {
    **DENSE_ARGS,
    "cuda-graph-max-bs": 16,
    "speculative-algorithm": "NEXTN",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
    "speculative-num-draft-tokens": 4,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(
    args: dict,
    model: Path,
    name: str = "tiny",
    port: int | None = None,
    tp: int = 1,
    env: dict | None = None,
) -> profiles.Launch:
    """The project's rendering of a launch for sglang 0.5.16 (a one-profile mapping, the suite's settings)."""
    profile = {"gpu-suite": {"description": "GPU suite launch", "args": args, "env": env or {}}}
    settings = {
        "sglang_model_path": str(model),
        "sglang_served_model_name": name,
        "sglang_tp": tp,
        "sglang_host": "127.0.0.1",
        "sglang_port": port or free_port(),
        "sglang_api_key": API_KEY,
    }
    return profiles.render("gpu-suite", profile, settings, SGLANG_VERSION)


class Server:
    """One `launch.py -m sglang.launch_server ARGV` process group; the API key from the environment."""

    def __init__(
        self,
        launch: profiles.Launch,
        log_dir: Path,
        label: str,
        gpus: str | None = "0",
        api_key: bool = True,
        extra_env: dict | None = None,
    ):
        self.launch = launch
        self.label = label
        self.port = int(launch.args["port"])
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = API_KEY if api_key else None
        self.log = log_dir / f"{label}.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **SAFE_ENV, **launch.env, **(extra_env or {})}
        if api_key:
            env.update(launch.secret_env)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        self.argv = [
            sys.executable,
            str(LAUNCHER),
            "-m",
            "sglang.launch_server",
            *launch.argv,
        ]
        self.started = time.monotonic()
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=log_dir,
            )
        self.pgid = self.proc.pid
        self.exited_at: float | None = None
        threading.Thread(target=self._watch_exit, daemon=True).start()

    def _watch_exit(self) -> None:
        self.proc.wait()
        self.exited_at = time.monotonic()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def group_pids(self) -> list[int]:
        """Every live process of the server's process group or descended from it (what systemd's control
        group would hold: SGLang's scheduler and detokenizer included)."""
        parents: dict[int, int] = {}
        group: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
            if state == "Z":
                continue
            parents[int(entry.name)] = int(ppid)
            if int(pgrp) == self.pgid:
                group.add(int(entry.name))
        grew = True
        while grew:
            more = {pid for pid, ppid in parents.items() if ppid in group and pid not in group}
            group |= more
            grew = bool(more)
        return sorted(group)

    def wait_ready(self, timeout: float = 600.0, sleep: float = 0.25) -> dict:
        """The project's readiness wait, with the process stand-in for the unit."""
        with ProcessUnit(self):
            return readiness.wait_ready(
                self.url,
                timeout=timeout,
                sleep=sleep,
                api_key=self.api_key,
                unit=self.label,
            )

    def request(
        self,
        method: str,
        path: str,
        body=None,
        api_key: str | None | bool = True,
        timeout: float = 60.0,
    ) -> tuple:
        key = self.api_key if api_key is True else (api_key or None)
        resp = server_http.request(server_http.Endpoint.parse(self.url), method, path, body, key, timeout)
        return resp.status, resp.headers, resp.body

    def stop(self, timeout: float = 60.0) -> dict:
        """SIGTERM to the main process, SIGKILL to the group after timeout (the unit's KillMode=mixed stop).
        Returns how long the main process and the whole group took to go."""
        start = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        main_gone = group_gone = None
        killed = False
        while time.monotonic() - start < timeout:
            now = time.monotonic() - start
            if main_gone is None and self.proc.poll() is not None:
                main_gone = now
            if main_gone is not None and not self.group_pids():
                group_gone = now
                break
            time.sleep(0.05)
        else:
            killed = True
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        return {"main_exit_s": main_gone, "group_exit_s": group_gone, "sigkill": killed}


def scrub_key(path: Path) -> Path:
    """Rewrite a file with the API key masked: bench_serving writes /server_info, which SGLang returns with the
    key in clear to an authenticated client, into its result file."""
    text = path.read_text()
    if API_KEY in text:
        path.write_text(text.replace(API_KEY, "***"))
    return path


def assert_key_masked(server: Server) -> dict[int, str]:
    """The API key is in no command line of the server's processes and not in its log, where SGLang's
    server_args line shows it masked. Returns the command lines by pid."""
    cmdlines = {}
    for pid in server.group_pids():
        try:
            cmdlines[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    assert len(cmdlines) >= 3, cmdlines  # launcher (the server), its output filter, SGLang's workers
    assert not [pid for pid, line in cmdlines.items() if API_KEY in line], cmdlines
    log = server.log_text()
    assert API_KEY not in log
    assert "api_key='***'" in log or "api_key=***" in log, "SGLang's server_args line not found"
    return cmdlines


def stop_and_watch_memory(server: Server) -> dict:
    """Server.stop() while watching the GPU's used memory: the stop's timings, when over 1 GiB was freed
    (gpu_memory_freed_s, None if not within 60 s), what nvidia-smi shows after, the exit status."""
    before = used_memory_mib()[0]
    start = time.monotonic()
    freed: dict = {}

    def watch():
        while time.monotonic() - start < 60 and "s" not in freed:
            if used_memory_mib()[0] < before - 1024:
                freed["s"] = round(time.monotonic() - start, 3)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    timing = server.stop()
    watcher.join(60)
    return {
        **timing,
        "gpu_memory_freed_s": freed.get("s"),
        "used_mib_before": before,
        "used_mib_after": used_memory_mib(),
        "compute_apps_after": compute_apps(),
        "exit_status": server.proc.returncode,
        "log_tail": server.log_text().splitlines()[-30:],
    }


class ProcessUnit:
    """Stand-in for systemd on a host without it: `systemctl show UNIT` answered from the server's process
    state, `journalctl -u UNIT` from its log file (the last readiness.JOURNAL_LINES lines), so
    readiness.wait_ready's crash detection runs unchanged. Servers register under their label (the unit name);
    several can be waited on at once."""

    servers: ClassVar[dict[str, Server]] = {}

    @classmethod
    def show(cls, unit: str) -> dict:
        proc = cls.servers[unit].proc
        code = proc.poll()
        return {
            "LoadState": "loaded",
            "ActiveState": "active" if code is None else "failed",
            "SubState": "running" if code is None else "failed",
            "MainPID": str(proc.pid if code is None else 0),
            "NRestarts": "0",
            "ExecMainStatus": str(code if code is not None else 0),
            "ExecMainStartTimestamp": "n/a",
        }

    @classmethod
    def journal(cls, unit: str, since: str) -> list:
        return cls.servers[unit].log_text().splitlines()[-readiness.JOURNAL_LINES :]

    def __init__(self, server: Server):
        self.server = server

    def __enter__(self):
        readiness.run_systemctl_show, readiness.run_journalctl = (
            ProcessUnit.show,
            ProcessUnit.journal,
        )
        ProcessUnit.servers[self.server.label] = self.server
        return self

    def __exit__(self, *exc):
        ProcessUnit.servers.pop(self.server.label, None)


def smi(*args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60, check=True).stdout


def gpu_facts() -> dict:
    """The project's GPU facts from this host's nvidia-smi."""
    return gpu.gpu_facts(smi(*gpu.QUERY_ARGS), smi(*gpu.TOPO_ARGS), smi())


def compute_apps() -> list[dict]:
    return gpu.parse_compute_apps(smi(*gpu.APPS_ARGS))


def used_memory_mib() -> list[int]:
    out = smi("--query-gpu=memory.used", "--format=csv,noheader,nounits")
    return [int(x) for x in out.split()]


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return path
