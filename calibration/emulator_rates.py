"""Does the SGLang emulator deliver the rates it is configured with? Prints configured vs delivered figures.

Starts the emulator (python -m sglang_deploy.emulator, from src/) on 127.0.0.1 (with --pin: emulator on
CPU 0, this client on CPU 1), then for each concurrency level sends that many streaming
/v1/chat/completions requests at once (connections opened first) and measures, with its own small
asyncio HTTP client:
  - per-stream decode tok/s = (completion_tokens - 1) / (t_last_token - t_first_token), mean/min/max
  - TTFT = t_first_token - t_request_written
  - aggregate decode tok/s = tokens whose chunks arrived inside the window where all streams were
    decoding [max t_first, min t_last], divided by that window
  - tokens per decode chunk (the accept length under speculative decoding)
  - emulator CPU (share of one core, from /proc)
Expected per-stream rate = min(decode, aggregate_ceiling / concurrency). Exit 1 when the mean per-stream
rate or the aggregate misses its configuration by more than the tolerance. TTFT is reported with its
excess over the configured value: the emulator counts TTFT from the moment it has parsed a request, so
the client sees in addition the time the server spends reading the requests that arrived at once.

    python calibration/emulator_rates.py [--levels 1 32 256] [--seconds 8] [--tolerance 0.5] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from local_emulator import free_port, proc_cpu_s  # noqa: E402

HOST = "127.0.0.1"
PIN = False
BASE_ENV = {
    "SGLANG_EMU_LOAD_S": "0.2",
    "SGLANG_EMU_WARMUP_S": "0.2",
    "SGLANG_EMU_TTFT_MS": "80",
    "SGLANG_EMU_DECODE_TOK_S": "172",
    "SGLANG_EMU_AGGREGATE_TOK_S": "2156",
}
VARIANTS = {
    "plain": ([], {}),
    "spec (NEXTN, accept 2.5)": (
        [
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "4",
            "--max-running-requests",
            "512",
        ],
        {"SGLANG_EMU_ACCEPT_LENGTH": "2.5"},
    ),
}


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"emulator exited with {proc.returncode}")
        try:
            if (await http_get(port, "/health"))[0] == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("emulator did not become ready")


class Stream:
    """One streaming chat request over its own connection; records chunk arrival times."""

    def __init__(self, port: int, max_tokens: int):
        self.port = port
        self.body = json.dumps(
            {
                "model": "emu",
                "messages": [{"role": "user", "content": "benchmark the emulator please"}],
                "max_tokens": max_tokens,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        self.sent = 0.0
        self.chunks: list[tuple[float, int]] = []  # (arrival, tokens in chunk)
        self.completion_tokens = 0

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)

    def send(self) -> None:
        self.writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (HOST.encode(), len(self.body), self.body)
        )
        self.sent = time.perf_counter()

    async def receive(self) -> None:
        head = await self.reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0] + b" ":
            raise RuntimeError(head.decode(errors="replace"))
        buf = b""
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                break
            buf += await self.reader.readexactly(size + 2)
            now = time.perf_counter()
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                event = event.strip()
                if not event.startswith(b"data: ") or event == b"data: [DONE]":
                    continue
                obj = json.loads(event[6:])
                if obj.get("usage"):
                    self.completion_tokens = obj["usage"]["completion_tokens"]
                for choice in obj["choices"]:
                    text = (choice["delta"].get("content") or "") + (choice["delta"].get("reasoning_content") or "")
                    if text:
                        self.chunks.append((now, len(text.split())))
        self.writer.close()


async def run_level(port: int, concurrency: int, max_tokens: int) -> list[Stream]:
    streams = [Stream(port, max_tokens) for _ in range(concurrency)]
    await asyncio.gather(*(s.connect() for s in streams))
    for s in streams:
        s.send()
    await asyncio.gather(*(s.receive() for s in streams))
    return streams


def cumulative(stream: Stream, t: float) -> float:
    """Tokens received by time t, linear between chunk arrivals (chunk k's tokens accrue since chunk k-1)."""
    total, prev_t = 0, None
    for arrival, n in stream.chunks:
        if arrival >= t:
            if prev_t is None:
                return 0.0
            return total + n * (t - prev_t) / (arrival - prev_t)
        total, prev_t = total + n, arrival
    return float(total)


def summarise(streams: list[Stream]) -> dict:
    rates = [(s.completion_tokens - 1) / (s.chunks[-1][0] - s.chunks[0][0]) for s in streams]
    ttfts = [s.chunks[0][0] - s.sent for s in streams]
    lo = max(s.chunks[0][0] for s in streams)
    hi = min(s.chunks[-1][0] for s in streams)
    # tokens delivered in [lo, hi], the window where every stream was decoding; each stream's cumulative
    # token count is interpolated between its chunks so the window edges do not quantize it
    in_window = sum(cumulative(s, hi) - cumulative(s, lo) for s in streams)
    decode_chunks = [n for s in streams for _, n in s.chunks[1:]]
    return {
        "rate_mean": statistics.fmean(rates),
        "rate_min": min(rates),
        "rate_max": max(rates),
        "ttft_ms": 1000 * statistics.fmean(ttfts),
        "aggregate": in_window / (hi - lo),
        "tokens_per_chunk": sum(decode_chunks) / len(decode_chunks),
    }


def pct(delivered: float, configured: float) -> float:
    return 100.0 * (delivered - configured) / configured


async def bench_variant(
    name: str, flags: list[str], extra_env: dict, levels: list[int], seconds: float, tolerance: float
) -> bool:
    env = dict(os.environ, **BASE_ENV, **extra_env, PYTHONPATH=SRC)
    decode, ceiling = float(env["SGLANG_EMU_DECODE_TOK_S"]), float(env["SGLANG_EMU_AGGREGATE_TOK_S"])
    ttft_ms = float(env["SGLANG_EMU_TTFT_MS"])
    accept = float(env.get("SGLANG_EMU_ACCEPT_LENGTH", "1"))
    port = free_port()
    pin = (lambda: os.sched_setaffinity(0, {0})) if PIN else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang_deploy.emulator", "--model-path", "emu/model", "--port", str(port), *flags],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=pin,
    )
    ok = True
    try:
        await wait_ready(port, proc)
        print(
            f"\n== {name}: decode {decode:g} tok/s per stream, aggregate ceiling {ceiling:g} tok/s, "
            f"TTFT {ttft_ms:g} ms, accept length {accept:g}"
        )
        print(
            f"{'conc':>5} {'tokens':>6} | {'per-stream tok/s cfg':>20} {'delivered mean':>14} {'dev%':>7} "
            f"{'min..max':>17} | {'TTFT ms cfg':>11} {'got':>7} {'extra':>6} | {'aggregate cfg':>13} {'got':>9} {'dev%':>7} "
            f"| {'tok/chunk':>9} | {'emu CPU':>7}"
        )
        for c in levels:
            expected = min(decode, ceiling / c) if ceiling else decode
            max_tokens = int(expected * seconds) + 1
            cpu0, t0 = proc_cpu_s(proc.pid), time.monotonic()
            streams = await run_level(port, c, max_tokens)
            cpu = (proc_cpu_s(proc.pid) - cpu0) / (time.monotonic() - t0)
            r = summarise(streams)
            dev_rate = pct(r["rate_mean"], expected)
            dev_agg = pct(r["aggregate"], expected * c)
            level_ok = abs(dev_rate) <= tolerance and abs(dev_agg) <= tolerance
            ok &= level_ok
            print(
                f"{c:>5} {max_tokens:>6} | {expected:>20.3f} {r['rate_mean']:>14.3f} {dev_rate:>+7.3f} "
                f"{r['rate_min']:>8.3f}..{r['rate_max']:<8.3f} | {ttft_ms:>11.1f} {r['ttft_ms']:>7.2f} "
                f"{r['ttft_ms'] - ttft_ms:>+6.2f} | "
                f"{expected * c:>13.1f} {r['aggregate']:>9.1f} {dev_agg:>+7.3f} | {r['tokens_per_chunk']:>9.3f} "
                f"| {100 * cpu:>6.1f}% {'' if level_ok else ' <-- OUT OF TOLERANCE'}"
            )
        status, body = await http_get(port, "/server_info")
        state = json.loads(body)["internal_states"][0]
        if "avg_spec_accept_length" in state:
            print(f"/server_info avg_spec_accept_length: {state['avg_spec_accept_length']:.4f} (configured {accept:g})")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return ok


async def main_async(args) -> int:
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (other processes compete for them)")
    ok = True
    for name, (flags, extra_env) in VARIANTS.items():
        ok &= await bench_variant(name, flags, extra_env, args.levels, args.seconds, args.tolerance)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    print(f"all rates within {args.tolerance}%: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--seconds", type=float, default=8.0, help="target decode time per stream")
    parser.add_argument(
        "--pin", action="store_true", help="pin the emulator to CPU 0 and this client to CPU 1 (one core each)"
    )
    parser.add_argument("--tolerance", type=float, default=0.5, help="allowed deviation, percent")
    args = parser.parse_args()
    global PIN
    PIN = args.pin and len(os.sched_getaffinity(0)) >= 2
    if PIN:
        os.sched_setaffinity(0, {1})
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
