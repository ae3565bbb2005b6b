"""A small Prometheus exporter of GPU health, for GPU hosts without dcgm-exporter (issue 50): per GPU utilisation,
memory, power, temperature, SM clock, throttle reasons, Xid errors and ECC errors, each with the label gpu="<index>".

It reads NVML through nvidia-ml-py (``import pynvml``) where the Python that runs it has it (the stack's venv has),
else ``nvidia-smi --query-gpu`` as CSV. Xid errors: NVML's critical-error events (counted by a thread from the
exporter's start), else the kernel's ``NVRM: Xid (PCI:...): N`` lines in the journal (journalctl -k) where it may read
them. A value a GPU does not report (``[N/A]``, NVML's NotSupported) is left out, never written as 0.

    python3 -m sglang_watch.gpu_exporter --port 9835 [--bind 127.0.0.1]

Stdlib only (pynvml optional): it runs from the folder the sglang_watch role copies the host modules to.
"""

# A program the roles run on hosts: print and exit are its interface.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import argparse
import http.server
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from .model_share import bounded

DEFAULT_PORT = 9835
# Scrapes served at once (one more is closed as it comes), each dropped after IDLE_S without a request, and one GPU
# read at a time: the port may face a network, and each read runs nvidia-smi and journalctl.
MAX_CLIENTS = 4
IDLE_S = 30
# metric -> (type, help); every sample has the label gpu="<index>".
METRICS = {
    "sglang_gpu_utilization_ratio": ("gauge", "Share of the last sample period a kernel ran on the GPU (0 to 1)."),
    "sglang_gpu_memory_used_bytes": ("gauge", "GPU memory in use."),
    "sglang_gpu_memory_total_bytes": ("gauge", "GPU memory in all."),
    "sglang_gpu_temperature_celsius": ("gauge", "GPU core temperature."),
    "sglang_gpu_power_watts": ("gauge", "Power draw."),
    "sglang_gpu_clock_sm_hz": ("gauge", "SM clock."),
    "sglang_gpu_throttle_reasons": ("gauge", "Active clock throttle reasons, NVML's bitmask (0: none)."),
    "sglang_gpu_xid_errors_total": (
        "counter",
        "Xid errors seen (NVML events since the exporter started, or the kernel log).",
    ),
    "sglang_gpu_ecc_errors_total": ("counter", "Uncorrected ECC errors since the driver loaded (volatile)."),
}
SMI_FIELDS = (
    "index",
    "pci.bus_id",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
    "clocks.sm",
    "clocks_throttle_reasons.active",
    "ecc.errors.uncorrected.volatile.total",
)
MIB = 1 << 20
XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+)")
TIMEOUT_S = 10


@dataclass
class Gpu:
    """One GPU's values by metric name (None: the GPU does not report it)."""

    index: int
    bus_id: str = ""
    values: dict = field(default_factory=dict)


def _number(text: str) -> float | None:
    """A CSV field as a number: hex (0x...) or decimal; None for [N/A], [Not Supported] and the like."""
    text = text.strip()
    try:
        return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
    except ValueError:
        return None


def parse_smi(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits`` as Gpus; ValueError on a line of another
    shape (another nvidia-smi's columns)."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS) or not cells[0].isdigit():
            raise ValueError(f"nvidia-smi gave {line[:120]!r}, not {len(SMI_FIELDS)} fields starting with an index")
        n = dict(zip(SMI_FIELDS, map(_number, cells)))
        scaled = {
            "sglang_gpu_utilization_ratio": (n["utilization.gpu"], 0.01),
            "sglang_gpu_memory_used_bytes": (n["memory.used"], MIB),
            "sglang_gpu_memory_total_bytes": (n["memory.total"], MIB),
            "sglang_gpu_temperature_celsius": (n["temperature.gpu"], 1),
            "sglang_gpu_power_watts": (n["power.draw"], 1),
            "sglang_gpu_clock_sm_hz": (n["clocks.sm"], 1e6),
            "sglang_gpu_throttle_reasons": (n["clocks_throttle_reasons.active"], 1),
            "sglang_gpu_ecc_errors_total": (n["ecc.errors.uncorrected.volatile.total"], 1),
        }
        values = {name: v * k for name, (v, k) in scaled.items() if v is not None}
        gpus.append(Gpu(int(cells[0]), normal_bus_id(cells[1]), values))
    return gpus


def normal_bus_id(bus_id: str) -> str:
    """A PCI address as the kernel's Xid lines write it: domain of 4 hex digits, lower case (nvidia-smi writes
    00000000:01:00.0, the kernel 0000:01:00)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3:
        return bus_id.strip().lower()
    return f"{parts[0][-4:]}:{parts[1]}:{parts[2].split('.')[0]}"


def xid_counts(lines, gpus: list[Gpu]) -> dict[int, int]:
    """Xid errors per GPU index from kernel log lines; a line naming no known GPU is not counted."""
    by_bus = {g.bus_id: g.index for g in gpus}
    counts = {g.index: 0 for g in gpus}
    for line in lines:
        match = XID_LINE.search(line)
        if match and normal_bus_id(match.group(1)) in by_bus:
            counts[by_bus[normal_bus_id(match.group(1))]] += 1
    return counts


def escape_label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(gpus: list[Gpu]) -> str:
    """The Prometheus text format of every metric a GPU reported."""
    out = []
    for name, (kind, text) in METRICS.items():
        samples = [(g.index, g.values[name]) for g in gpus if g.values.get(name) is not None]
        if not samples:
            continue
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        out += [f'{name}{{gpu="{escape_label(i)}"}} {int(v) if float(v).is_integer() else v!r}' for i, v in samples]
    return "\n".join(out) + "\n"


class SmiSource:
    """nvidia-smi's CSV, and the kernel's Xid lines (journalctl -k, this boot) where the exporter may read them."""

    def __init__(self, run=subprocess.run):
        self.run = run

    def read(self) -> list[Gpu]:
        proc = self.run(
            ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise OSError(f"nvidia-smi failed: {proc.stderr.strip()[:300]}")
        gpus = parse_smi(proc.stdout)
        kernel = self.run(
            ["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "--grep", "NVRM: Xid"],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
        if kernel.returncode in (0, 1):  # 1: no line matched
            for index, count in xid_counts(kernel.stdout.splitlines(), gpus).items():
                gpus[[g.index for g in gpus].index(index)].values["sglang_gpu_xid_errors_total"] = count
        return gpus


class NvmlSource:
    """NVML through pynvml (nvidia-ml-py): each value read on its own, one a GPU does not support left out; Xid
    errors counted from NVML's critical-error events by a thread."""

    def __init__(self, nvml):
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        self.xids = {i: 0 for i in range(len(self.handles))}
        self.lock = threading.Lock()
        self.events = self._register()

    def _register(self):
        nvml = self.nvml
        try:
            events = nvml.nvmlEventSetCreate()
            for handle in self.handles:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, events)
        except nvml.NVMLError:
            return None  # no Xid events here (a GPU that does not support them): no Xid metric
        return events

    def wait_events(self, timeout_ms: int = 5000) -> None:
        """Count the Xid events that come within ``timeout_ms`` (the thread calls this in a loop)."""
        try:
            data = self.nvml.nvmlEventSetWait(self.events, timeout_ms)
        except self.nvml.NVMLError:
            return  # a timeout: no event
        for index, handle in enumerate(self.handles):
            if data.device == handle:
                with self.lock:
                    self.xids[index] += 1

    def _value(self, read, scale: float = 1):
        try:
            return read() * scale
        except self.nvml.NVMLError:
            return None

    def read(self) -> list[Gpu]:
        nvml, gpus = self.nvml, []
        # nvidia-ml-py 12.535 renamed throttle reasons to clock event reasons; the old name stays as an alias
        throttle = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        for index, h in enumerate(self.handles):
            values = {
                "sglang_gpu_utilization_ratio": self._value(
                    lambda h=h: nvml.nvmlDeviceGetUtilizationRates(h).gpu, 0.01
                ),
                "sglang_gpu_memory_used_bytes": self._value(lambda h=h: nvml.nvmlDeviceGetMemoryInfo(h).used),
                "sglang_gpu_memory_total_bytes": self._value(lambda h=h: nvml.nvmlDeviceGetMemoryInfo(h).total),
                "sglang_gpu_temperature_celsius": self._value(
                    lambda h=h: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)
                ),
                "sglang_gpu_power_watts": self._value(lambda h=h: nvml.nvmlDeviceGetPowerUsage(h), 0.001),
                "sglang_gpu_clock_sm_hz": self._value(
                    lambda h=h: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM), 1e6
                ),
                "sglang_gpu_throttle_reasons": self._value(lambda h=h: throttle(h)),
                "sglang_gpu_ecc_errors_total": self._value(
                    lambda h=h: nvml.nvmlDeviceGetTotalEccErrors(
                        h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
                    )
                ),
            }
            if self.events is not None:
                with self.lock:
                    values["sglang_gpu_xid_errors_total"] = self.xids[index]
            gpus.append(Gpu(index, "", values))
        return gpus


def open_source():
    """NvmlSource where pynvml imports and NVML starts, else SmiSource."""
    try:
        import pynvml  # noqa: PLC0415 - optional: nvidia-ml-py where the Python that runs this has it

        return NvmlSource(pynvml)
    except Exception as exc:  # noqa: BLE001 - ImportError, or pynvml.NVMLError (no driver): say so, read nvidia-smi
        print(f"NVML not used ({type(exc).__name__}: {exc}): reading nvidia-smi", file=sys.stderr)
    return SmiSource()


def count_xids(source: NvmlSource) -> None:
    while True:
        source.wait_events()


def handler_for(source):
    reading = threading.Lock()

    class Metrics(http.server.BaseHTTPRequestHandler):
        timeout = IDLE_S

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics")
                return
            try:
                with reading:
                    body, status = render(source.read()).encode(), 200
            except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
                body, status = f"# the GPUs could not be read: {exc}\n".encode(), 503
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args) -> None:  # noqa: A002 - quiet: Prometheus scrapes every few seconds
            pass

    return Metrics


def server(bind: str, port: int, source):
    """The exporter's HTTP server of ``source`` on bind:port (an IPv4 or IPv6 address, or a name)."""
    return bounded(bind, port, handler_for(source), MAX_CLIENTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sglang-gpu-exporter", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--bind", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    source = open_source()
    if isinstance(source, NvmlSource) and source.events is not None:
        threading.Thread(target=count_xids, args=(source,), daemon=True).start()
    httpd = server(args.bind, args.port, source)
    print(f"serving GPU metrics on http://{args.bind}:{args.port}/metrics", flush=True)
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
