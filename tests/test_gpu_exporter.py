"""The GPU health exporter (host/gpu_exporter.py, issue 50) against test doubles of NVML (FakeNvml, pynvml's
calls) and of nvidia-smi (a fake subprocess.run): the metric names the alert rules use, each with gpu="<index>"."""

from __future__ import annotations

import http.client
import http.server
import subprocess
import threading
from types import SimpleNamespace

import pytest

from ansible_collections.sglang.deploy.plugins.module_utils import gpu_exporter

NAMES = {
    "sglang_gpu_utilization_ratio", "sglang_gpu_memory_used_bytes", "sglang_gpu_memory_total_bytes",
    "sglang_gpu_temperature_celsius", "sglang_gpu_power_watts", "sglang_gpu_clock_sm_hz", "sglang_gpu_throttle_reasons",
    "sglang_gpu_xid_errors_total", "sglang_gpu_ecc_errors_total",
}  # fmt: skip
SMI = (
    "0, 00000000:18:00.0, 87, 81000, 97871, 412.50, 71, 1980, 0x0000000000000004, 0\n"
    "1, 00000000:2A:00.0, [N/A], 10, 97871, [N/A], 40, 345, 0x0000000000000000, [N/A]\n"
)
KERNEL = (
    "NVRM: Xid (PCI:0000:2a:00): 79, pid=1234, GPU has fallen off the bus.\n"
    "NVRM: Xid (PCI:0000:2a:00): 8, pid=1234, Channel 00000010\n"
    "NVRM: Xid (PCI:0000:99:00): 13, pid=1, another device\n"
)


class FakeNvml:
    """A test double of pynvml: two GPUs, the second without power readings and without ECC (NotSupported)."""

    class NVMLError(Exception):
        pass

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM = 0, 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC = 1, 0
    nvmlEventTypeXidCriticalError = 8

    def __init__(self):
        self.pending = [SimpleNamespace(device="gpu1", eventData=79)]

    def nvmlInit(self):
        pass

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"gpu{i}"

    def nvmlEventSetCreate(self):
        return "events"

    def nvmlDeviceRegisterEvents(self, handle, kind, events):
        assert kind == self.nvmlEventTypeXidCriticalError

    def nvmlEventSetWait(self, events, timeout_ms):
        if not self.pending:
            raise self.NVMLError("Timeout")
        return self.pending.pop()

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=87 if h == "gpu0" else 3)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=81000 << 20, total=97871 << 20)

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 71

    def nvmlDeviceGetPowerUsage(self, h):
        if h == "gpu1":
            raise self.NVMLError("Not Supported")
        return 412500

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 1980

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 4

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        if h == "gpu1":
            raise self.NVMLError("Not Supported")
        return 2


def samples(text: str) -> dict:
    """{(name, gpu): value} of the exporter's text."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            name, gpu = head.split("{gpu=")
            out[(name, gpu.strip('"}'))] = float(value)
    return out


def test_nvml_gives_every_metric_and_leaves_out_what_a_gpu_does_not_support():
    source = gpu_exporter.NvmlSource(FakeNvml())
    source.wait_events(), source.wait_events()  # one Xid event on GPU 1, then a timeout
    text = gpu_exporter.render(source.read())
    got = samples(text)
    assert {name for name, _ in got} == NAMES
    assert got[("sglang_gpu_utilization_ratio", "0")] == 0.87 and got[("sglang_gpu_power_watts", "0")] == 412.5
    assert got[("sglang_gpu_clock_sm_hz", "0")] == 1.98e9 and got[("sglang_gpu_throttle_reasons", "0")] == 4
    assert got[("sglang_gpu_memory_total_bytes", "1")] == 97871 * 2**20
    assert (got[("sglang_gpu_xid_errors_total", "1")], got[("sglang_gpu_xid_errors_total", "0")]) == (1, 0)
    assert ("sglang_gpu_power_watts", "1") not in got and ("sglang_gpu_ecc_errors_total", "1") not in got
    assert "# TYPE sglang_gpu_xid_errors_total counter" in text


def fake_run(smi: str = SMI, kernel: str = KERNEL, kernel_rc: int = 0):
    """A test double of subprocess.run for nvidia-smi and journalctl -k."""

    def run(argv, **kw):
        if argv[0] == "nvidia-smi":
            assert argv[1] == "--query-gpu=" + ",".join(gpu_exporter.SMI_FIELDS)
            return subprocess.CompletedProcess(argv, 0, smi, "")
        return subprocess.CompletedProcess(argv, kernel_rc, kernel, "")

    return run


def test_nvidia_smi_gives_every_metric_and_counts_xids_from_the_kernel_log():
    got = samples(gpu_exporter.render(gpu_exporter.SmiSource(fake_run()).read()))
    assert {name for name, _ in got} == NAMES
    assert got[("sglang_gpu_memory_used_bytes", "0")] == 81000 * 2**20
    assert got[("sglang_gpu_throttle_reasons", "0")] == 4 and got[("sglang_gpu_clock_sm_hz", "1")] == 345e6
    assert (got[("sglang_gpu_xid_errors_total", "0")], got[("sglang_gpu_xid_errors_total", "1")]) == (0, 2)
    assert ("sglang_gpu_utilization_ratio", "1") not in got and ("sglang_gpu_power_watts", "1") not in got


def test_an_unreadable_kernel_log_leaves_xid_out():
    got = samples(gpu_exporter.render(gpu_exporter.SmiSource(fake_run(kernel="", kernel_rc=4)).read()))
    assert not any(name == "sglang_gpu_xid_errors_total" for name, _ in got)


def test_nvidia_smi_output_of_another_shape_is_an_error_naming_it():
    with pytest.raises(ValueError, match="not 10 fields"):
        gpu_exporter.parse_smi("0, 87, 81000\n")


def test_the_server_answers_metrics_and_503_when_the_gpus_cannot_be_read():
    class Broken:
        def read(self):
            raise OSError("nvidia-smi failed: NVIDIA-SMI has failed")

    for source, status in ((gpu_exporter.SmiSource(fake_run()), 200), (Broken(), 503)):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), gpu_exporter.handler_for(source))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            assert resp.status == status and (b'sglang_gpu_power_watts{gpu="0"} 412.5' in resp.read()) == (
                status == 200
            )
        finally:
            server.shutdown()
            server.server_close()


def test_idle_and_concurrent_scrapes_hold_bounded_threads_and_one_gpu_read(monkeypatch):
    """Red team (2026-12-06, MEDIUM): the exporter (on a network address where Prometheus is remote) took every
    connection on a thread of its own, kept idle ones forever and ran one nvidia-smi per scrape at once: 200 idle
    sockets held 200 threads. Now MAX_CLIENTS at once (one more closed as it comes), idle ones dropped after IDLE_S,
    one GPU read at a time."""
    import socket
    import time

    reads, most = [], []

    class Slow:
        def read(self):
            reads.append(1)
            most.append(len(reads))
            time.sleep(0.2)
            reads.pop()
            return []

    monkeypatch.setattr(gpu_exporter, "IDLE_S", 0.5)
    server = gpu_exporter.server("127.0.0.1", 0, Slow())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    before = threading.active_count()
    try:
        # 20 s guards a hang, not speed: under the exporter's own IDLE_S (30 s), a connection the 0.5 s does not
        # drop raises TimeoutError in recv, however slow the machine
        idle = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(gpu_exporter.MAX_CLIENTS)]
        time.sleep(0.2)
        for _ in range(20):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as extra:
                assert extra.recv(1) == b""  # closed at once, not held
        assert threading.active_count() <= before + gpu_exporter.MAX_CLIENTS
        assert all(sock.recv(1) == b"" for sock in idle)  # dropped after the idle time
        for sock in idle:
            sock.close()
        deadline = time.monotonic() + 60  # guards a hang: a loaded machine may take its time to end the threads
        while threading.active_count() > before:  # the dropped clients' threads end and give their slots back
            assert time.monotonic() < deadline, "the dropped clients' threads never ended"
            time.sleep(0.05)
        statuses = []

        def scrape():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", "/metrics")
            statuses.append(conn.getresponse().status)

        scrapes = [threading.Thread(target=scrape) for _ in range(gpu_exporter.MAX_CLIENTS)]
        for t in scrapes:
            t.start()
        for t in scrapes:
            t.join()
        assert statuses == [200] * gpu_exporter.MAX_CLIENTS and max(most) == 1  # each served, one nvidia-smi at once
    finally:
        server.shutdown()
        server.server_close()
