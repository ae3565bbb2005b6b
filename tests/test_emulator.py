"""The emulated SGLang server, started as a subprocess on 127.0.0.1 and exercised over real HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sim_clock
from emulator_proc import free_port, stop_process

from sglang_deploy.launch.flags import recorded_releases
from sglang_deploy.monitor import metrics as monitor_metrics
from sglang_deploy.monitor import rules

REPO = Path(__file__).resolve().parents[1]
MODULE = ("-m", "sglang_deploy.emulator")
BANNER = "EMULATED SGLang server: numbers are synthetic"
READY_LINE = "The server is fired up and ready to roll!"
MODEL = "Qwen/Qwen3.5-397B-A17B-NVFP4"
SERVED = "qwen"
FAST = {
    "SGLANG_EMU_LOAD_S": "0.2",
    "SGLANG_EMU_WARMUP_S": "0.2",
    "SGLANG_EMU_TTFT_MS": "5",
    "SGLANG_EMU_DECODE_TOK_S": "2000",
}
IGNORED_FLAGS = [
    "--tp-size",
    "8",
    "--trust-remote-code",
    "--cuda-graph-bs",
    "1",
    "2",
    "4",
    "--mamba-scheduler-strategy=extra_buffer",
    "--disable-custom-all-reduce",
    "--chunked-prefill-size",
    "-1",
    "--quantization",
    "modelopt_fp4",
]


class Emu:
    """One emulator process; stdout and stderr are kept in files under tmp."""

    def __init__(
        self, tmp: Path, *flags: str, env: dict | None = None, entry: tuple = MODULE, served: bool = True, preexec=None
    ):
        self.port = free_port()
        self.out, self.err = tmp / f"emu-{self.port}.out", tmp / f"emu-{self.port}.err"
        argv = [
            sys.executable,
            *entry,
            "--model-path",
            MODEL,
            "--port",
            str(self.port),
            *(["--served-model-name", SERVED] if served else []),
            *flags,
        ]
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=err, env={**os.environ, **FAST, **(env or {})}, preexec_fn=preexec
            )

    def port_open(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def wait(self, cond, timeout: float = 30.0, what: str = "condition") -> float:
        """Poll cond() until it holds; an OSError from it (a request timed out on a loaded machine) is "not yet".
        The timeout guards a hang, not speed."""
        end, last = time.monotonic() + timeout, None
        while time.monotonic() < end:
            try:
                if cond():
                    return time.monotonic()
            except OSError as exc:
                last = exc
            assert self.proc.poll() is None, f"emulator exited {self.proc.returncode}: {self.stderr()}"
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last!r})" if last else ""))

    def wait_ready(self) -> "Emu":
        self.wait(self.port_open, what="port")
        self.wait(lambda: self.get("/health")[0] == 200, what="health 200")
        return self

    def request(self, method: str, path: str, body=None, headers: dict | None = None, timeout: float = 10.0):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        payload = resp.read()
        conn.close()
        return resp.status, resp, payload

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, body, **kw):
        return self.request("POST", path, body, **kw)

    def json(self, method: str, path: str, body=None, **kw):
        status, _, payload = self.request(method, path, body, **kw)
        return status, json.loads(payload)

    def stream(self, path: str, body: dict, headers: dict | None = None) -> list:
        """POST a streaming request; the SSE data payloads in order ('[DONE]' kept as a string)."""
        status, resp, payload = self.post(path, {**body, "stream": True}, headers=headers)
        assert status == 200, payload
        assert resp.getheader("content-type").startswith("text/event-stream")
        return sse(payload)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> int:
        return stop_process(self.proc)


def sse(payload: bytes) -> list:
    events = []
    for block in payload.decode().split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            data = block[len("data: ") :]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def chat_body(content: str = "tell me about the emulator", **extra) -> dict:
    return {"model": SERVED, "messages": [{"role": "user", "content": content}], **extra}


def deltas(events: list, field: str) -> list:
    return [c["delta"][field] for e in events if isinstance(e, dict) for c in e["choices"] if c["delta"].get(field)]


@pytest.fixture
def emu(tmp_path):
    started = []

    def start(*flags, **kw):
        started.append(Emu(tmp_path, *flags, **kw))
        return started[-1]

    yield start
    for e in started:
        e.stop()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    e = Emu(tmp_path_factory.mktemp("plain"), "--reasoning-parser", "qwen3", "--enable-metrics", *IGNORED_FLAGS)
    yield e.wait_ready()
    e.stop()


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    e = Emu(
        tmp_path_factory.mktemp("spec"),
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--api-key",
        "s3cret",
        "--enable-metrics",
        env={"SGLANG_EMU_ACCEPT_LENGTH": "2.5"},
    )
    yield e.wait_ready()
    e.stop()


AUTH = {"Authorization": "Bearer s3cret"}


def metrics(e: Emu) -> dict:
    status, resp, payload = e.get("/metrics")
    assert status == 200 and resp.getheader("content-type").startswith("text/plain")
    values = {}
    for line in payload.decode().splitlines():
        if line and not line.startswith("#"):
            name_labels, value = line.rsplit(" ", 1)
            values[name_labels.split("{")[0] + ("{" + name_labels.split("{")[1] if "le=" in name_labels else "")] = (
                float(value)
            )
    return values


# --- startup and readiness -------------------------------------------------------------------------


def test_port_closed_while_loading_then_503_during_warmup_then_ready(emu):
    # 3 s of warm-up, not 0.6: the six requests below must fall inside it, however loaded the machine
    e = emu(env={"SGLANG_EMU_LOAD_S": "0.6", "SGLANG_EMU_WARMUP_S": "3"})
    t0 = time.monotonic()
    assert not e.port_open()
    opened = e.wait(e.port_open, what="port")
    assert opened - t0 >= 0.5
    assert e.get("/health")[0] == 503
    assert e.get("/health_generate")[0] == 503
    assert e.get("/ready")[0] == 503
    assert e.get("/v1/models")[0] == 200
    assert e.get("/model_info")[0] == 200
    assert e.get("/server_info")[0] == 200
    assert READY_LINE not in e.stdout()
    e.wait(lambda: e.get("/health")[0] == 200, what="health 200")
    assert e.get("/health_generate")[0] == 200 and e.get("/ready")[0] == 200
    log = e.stdout()
    assert log.index(BANNER) < log.index("Uvicorn running on http://127.0.0.1") < log.index(READY_LINE)
    assert e.get("/metrics")[0] == 404  # no --enable-metrics
    assert e.stop() == -signal.SIGKILL  # SIGTERM: drained (nothing ran), then SGLang's kill_process_tree


def test_every_response_says_it_is_emulated(plain):
    for method, path, body in [
        ("GET", "/health", None),
        ("GET", "/v1/models", None),
        ("GET", "/nope", None),
        ("POST", "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}}),
        ("POST", "/v1/chat/completions", chat_body(max_tokens=2, stream=True)),
    ]:
        _, resp, _ = plain.request(method, path, body)
        assert resp.getheader("x-sglang-emulated") == "true", path
    assert plain.json("GET", "/model_info")[1]["emulated"] is True
    assert plain.json("GET", "/server_info")[1]["emulated"] is True
    assert "# " + BANNER in plain.get("/metrics")[2].decode()


def test_info_endpoints_reflect_the_launch_flags(plain):
    status, models = plain.json("GET", "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == [SERVED]
    assert models["data"][0]["root"] == SERVED  # as real SGLang 0.5.16 answers
    assert plain.get(f"/v1/models/{SERVED}")[0] == 200
    assert plain.get("/v1/models/other")[0] == 404
    info = plain.json("GET", "/model_info")[1]
    assert (info["model_path"], info["tokenizer_path"]) == (MODEL, MODEL)
    server = plain.json("GET", "/server_info")[1]
    assert server["port"] == plain.port and server["enable_metrics"] is True
    # flags the emulator cannot mean are accepted, with or without a value
    assert server["tp_size"] == 8 and server["trust_remote_code"] is True
    assert server["cuda_graph_bs"] == [1, 2, 4] and server["mamba_scheduler_strategy"] == "extra_buffer"
    assert server["disable_custom_all_reduce"] is True and server["chunked_prefill_size"] == -1
    assert server["quantization"] == "modelopt_fp4"
    assert "avg_spec_accept_length" not in server["internal_states"][0]
    assert plain.get("/get_server_info")[0] == 200 and plain.get("/get_model_info")[0] == 200


# --- generation ---------------------------------------------------------------------------------------


def test_chat_stream_has_role_chunk_reasoning_then_content_usage_and_done(plain):
    events = plain.stream(
        "/v1/chat/completions",
        chat_body("one two three four", max_tokens=40, ignore_eos=True, stream_options={"include_usage": True}),
    )
    assert events[-1] == "[DONE]"
    first = events[0]
    assert first["object"] == "chat.completion.chunk" and first["model"] == SERVED
    assert first["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    reasoning, content = deltas(events, "reasoning_content"), deltas(events, "content")
    assert len(reasoning) == 12 and len(content) == 28  # 30% of 40 tokens are thinking
    idx_last_reasoning = max(
        i for i, e in enumerate(events[:-1]) if e["choices"] and e["choices"][0]["delta"].get("reasoning_content")
    )
    idx_first_content = min(
        i for i, e in enumerate(events[:-1]) if e["choices"] and e["choices"][0]["delta"].get("content")
    )
    assert idx_last_reasoning < idx_first_content
    assert all(t.endswith(" ") and len(t.split()) == 1 for t in reasoning + content)  # one word per token
    finish = events[-3]["choices"][0]
    assert finish["finish_reason"] == "length" and finish["matched_stop"] is None
    usage = events[-2]
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 4
    assert usage["usage"]["completion_tokens"] == 40 and usage["usage"]["total_tokens"] == 44
    assert usage["usage"]["reasoning_tokens"] == 12


def test_chat_stream_without_include_usage_or_thinking(plain):
    events = plain.stream(
        "/v1/chat/completions",
        chat_body(max_tokens=10, ignore_eos=True, chat_template_kwargs={"enable_thinking": False}),
    )
    assert all("usage" not in e for e in events[:-1])  # real 0.5.16 chunks carry no usage key
    assert deltas(events, "reasoning_content") == [] and len(deltas(events, "content")) == 10


def test_eos_is_deterministic_and_never_before_min_tokens(plain):
    def run(**extra):
        body = chat_body("where does it stop", stream_options={"include_usage": True}, **{"max_tokens": 1000, **extra})
        events = plain.stream("/v1/chat/completions", body)
        text = "".join(deltas(events, "reasoning_content") + deltas(events, "content"))
        return events[-3]["choices"][0], events[-2]["usage"]["completion_tokens"], text

    finish, n, text = run()
    assert finish["finish_reason"] == "stop" and finish["matched_stop"] is not None
    assert 32 <= n <= 256
    assert run() == (finish, n, text)
    finish, n_min, _ = run(min_tokens=n + 50)
    assert n_min == n + 50 and finish["finish_reason"] == "stop"
    finish, n_ignore, _ = run(ignore_eos=True, max_tokens=n + 10)
    assert n_ignore == n + 10 and finish["finish_reason"] == "length"


def test_non_streaming_chat_matches_the_stream(plain):
    body = chat_body("same words both ways", max_tokens=20, ignore_eos=True)
    status, resp = plain.json("POST", "/v1/chat/completions", body)
    assert status == 200 and resp["object"] == "chat.completion"
    msg = resp["choices"][0]["message"]
    events = plain.stream("/v1/chat/completions", body)
    assert msg["content"] == "".join(deltas(events, "content"))
    assert msg["reasoning_content"] == "".join(deltas(events, "reasoning_content"))
    assert resp["usage"]["completion_tokens"] == 20 and resp["choices"][0]["finish_reason"] == "length"


def test_completions_stream_and_non_stream(plain):
    events = plain.stream(
        "/v1/completions",
        {"prompt": "a b c", "max_tokens": 12, "ignore_eos": True, "stream_options": {"include_usage": True}},
    )
    assert events[-1] == "[DONE]" and events[0]["object"] == "text_completion"
    texts = [e["choices"][0]["text"] for e in events[:-1] if e["choices"] and e["choices"][0]["text"]]
    assert len(texts) == 12
    assert events[-2]["usage"] == {**events[-2]["usage"], "prompt_tokens": 3, "completion_tokens": 12}
    status, resp = plain.json("POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 12, "ignore_eos": True})
    assert status == 200 and resp["choices"][0]["text"] == "".join(texts)
    assert (
        plain.json("POST", "/v1/completions", {"prompt": [1, 2, 3, 4, 5], "max_tokens": 1})[1]["usage"]["prompt_tokens"]
        == 5
    )


def test_generate_streams_cumulative_text(plain):
    body = {"text": "native api prompt", "sampling_params": {"max_new_tokens": 9, "ignore_eos": True}}
    events = plain.stream("/generate", body)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert [c["meta_info"]["completion_tokens"] for c in chunks] == list(range(1, 10))
    for prev, cur in zip(chunks, chunks[1:]):
        assert cur["text"].startswith(prev["text"]) and cur["output_ids"][:-1] == prev["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 9}
    assert chunks[0]["meta_info"]["finish_reason"] is None and chunks[0]["meta_info"]["prompt_tokens"] == 3
    status, resp = plain.json("POST", "/generate", body)
    assert status == 200 and resp["text"] == chunks[-1]["text"] and len(resp["output_ids"]) == 9


def simulated(settings: dict, scenario, *flags: str):
    """scenario(engine) run on the simulated clock (tests/sim_clock.py) by an Engine of these SGLANG_EMU_ settings:
    the engine's timing exactly, whatever the host's load."""
    from sglang_deploy.emulator.config import Config
    from sglang_deploy.emulator.engine import Engine

    async def main():
        return await scenario(Engine(Config(["--model-path", MODEL, *flags], settings)))

    return sim_clock.run(main())


async def token_times(engine, tokens: int) -> tuple:
    """(arrival, [the time of each step]) of one request for `tokens` tokens, EOS ignored."""
    from sglang_deploy.emulator.engine import Plan

    loop = asyncio.get_running_loop()
    arrival, stamps = loop.time(), []
    async for _ in engine.run(Plan("x", 1, tokens, 0, True, False, False)):
        stamps.append(loop.time())
    return arrival, stamps


def test_decode_is_paced_at_the_configured_rate():
    # 2000 tok/s: the first token after the TTFT, then one token every 0.5 ms
    arrival, stamps = simulated(
        {"SGLANG_EMU_TTFT_MS": "5", "SGLANG_EMU_DECODE_TOK_S": "2000"}, lambda engine: token_times(engine, 201)
    )
    assert stamps[0] - arrival == pytest.approx(0.005)
    assert [b - a for a, b in zip(stamps, stamps[1:])] == pytest.approx([0.0005] * 200)


def test_aggregate_ceiling_and_max_running_requests():
    """A ceiling of 400 tok/s: two streams at once get 200 tok/s each; --max-running-requests 2 queues a third
    until a slot frees, and it then decodes alone at 400 tok/s."""
    settings = {"SGLANG_EMU_TTFT_MS": "5", "SGLANG_EMU_DECODE_TOK_S": "5000", "SGLANG_EMU_AGGREGATE_TOK_S": "400"}

    async def scenario(engine):
        pair = await asyncio.gather(token_times(engine, 41), token_times(engine, 41))
        three = [asyncio.ensure_future(token_times(engine, 301)) for _ in range(3)]
        await asyncio.sleep(0.1)
        gauges = (engine.pacer.running, engine.stats.queued)  # /metrics' num_running_reqs, num_queue_reqs
        return pair, gauges, await asyncio.gather(*three)

    pair, gauges, three = simulated(settings, scenario, "--max-running-requests", "2")
    assert [stamps[-1] - stamps[0] for _, stamps in pair] == pytest.approx([40 / 200] * 2)
    assert gauges == (2, 1)
    took = sorted(stamps[-1] - arrival for arrival, stamps in three)
    assert took == pytest.approx([0.005 + 300 / 200] * 2 + [0.005 + 300 / 200 + 0.005 + 300 / 400])


def decode_speeds(settings: dict, n: int = 8) -> list:
    """Per-request decode speeds (tok/s) of n requests of 100 decode steps in a row, on the simulated clock."""

    async def scenario(engine):
        speeds = []
        for _ in range(n):
            _, stamps = await token_times(engine, 101)
            speeds.append(100 / (stamps[-1] - stamps[0]))
        return speeds

    return simulated(settings, scenario)


def test_the_noise_model_moves_the_speed_from_period_to_period_and_off_it_holds():
    """SGLANG_EMU_NOISE=0.3 with a 50 ms period: requests of 100 ms see speeds far apart, the same ones for the same
    seed; without noise every one is the configured 1000 tok/s."""
    fast = {"SGLANG_EMU_DECODE_TOK_S": "1000", "SGLANG_EMU_TTFT_MS": "1"}
    noisy = {**fast, "SGLANG_EMU_NOISE": "0.3", "SGLANG_EMU_NOISE_PERIOD_S": "0.05", "SGLANG_EMU_NOISE_SEED": "7"}
    speeds = decode_speeds(noisy)
    assert max(speeds) / min(speeds) > 1.3, speeds
    assert decode_speeds(noisy) == speeds
    assert decode_speeds({**noisy, "SGLANG_EMU_NOISE_SEED": "8"}) != speeds
    assert decode_speeds(fast) == pytest.approx([1000.0] * 8)
    assert simulated(noisy, lambda engine: asyncio.sleep(0, engine.cfg.settings()))["noise"] == 0.3  # /server_info


def test_keep_alive_and_http10_close_delimited_stream(plain):
    conn = http.client.HTTPConnection("127.0.0.1", plain.port, timeout=10)
    conn.request("GET", "/v1/models")
    conn.getresponse().read()
    sock = conn.sock
    conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(max_tokens=3, stream=True)))
    resp = conn.getresponse()
    assert resp.getheader("transfer-encoding") == "chunked" and sse(resp.read())[-1] == "[DONE]"
    assert conn.sock is sock  # same connection reused
    conn.close()
    body = json.dumps(chat_body(max_tokens=3, stream=True)).encode()
    with socket.create_connection(("127.0.0.1", plain.port), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    assert b"transfer-encoding" not in head.lower() and sse(payload)[-1] == "[DONE]"


def test_bad_requests(plain):
    status, resp = plain.json("POST", "/v1/chat/completions", "{not json")
    assert status == 400 and resp["object"] == "error" and resp["code"] == 400
    assert plain.json("POST", "/v1/chat/completions", {"messages": []})[0] == 400
    assert plain.json("POST", "/v1/chat/completions", chat_body(max_tokens=-1))[0] == 400
    assert plain.json("POST", "/generate", {"sampling_params": {}})[0] == 400
    assert plain.get("/v1/chat/completions")[0] == 405
    assert plain.get("/does/not/exist")[0] == 404


def test_metrics_count_tokens_and_requests(plain):
    before = metrics(plain)
    plain.post("/generate", {"text": "three word prompt", "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}})
    after = metrics(plain)
    assert after["sglang:prompt_tokens_total"] - before["sglang:prompt_tokens_total"] == 3
    assert after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"] == 7
    assert after["sglang:num_requests_total"] - before["sglang:num_requests_total"] == 1
    assert after["sglang:time_to_first_token_seconds_count"] - before["sglang:time_to_first_token_seconds_count"] == 1
    for name in (
        "num_running_reqs",
        "num_queue_reqs",
        "gen_throughput",
        "cached_tokens_total",
        "e2e_request_latency_seconds_sum",
    ):
        assert f"sglang:{name}" in after
    assert "sglang:spec_accept_length" not in after


def test_metrics_hold_every_series_the_server_rules_read(plain):
    """The monitoring rules of the newest release evaluate on the emulator (molecule/monitoring): every sample they
    read is exposed, and realtime_tokens (the stall rule's) counts prefill and decode tokens by mode."""
    before = plain.get("/metrics")[2].decode()
    plain.post("/generate", {"text": "three word prompt", "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}})
    text = plain.get("/metrics")[2].decode()
    exposed = {line.split("{")[0] for line in text.splitlines() if line and not line.startswith("#")}
    server_group = rules.rule_groups([recorded_releases()[-1]])[0]
    read = set().union(*(monitor_metrics.expr_metrics(r["expr"]) for r in server_group["rules"]))
    records = {r.name for group in rules.RECORDS.values() for r in group}
    assert read - records - monitor_metrics.SCRAPE_SERIES - monitor_metrics.PROBE_SERIES <= exposed

    def tokens(body: str, mode: str) -> float:
        lines = body.splitlines()
        return next(
            float(x.split()[-1])
            for x in lines
            if x.startswith("sglang:realtime_tokens_total{") and f'mode="{mode}"' in x
        )

    assert tokens(text, "prefill_compute") - tokens(before, "prefill_compute") == 3
    assert tokens(text, "decode") - tokens(before, "decode") == 7


# --- speculative decoding and auth ------------------------------------------------------------------


def test_speculative_decoding_sends_several_tokens_per_step(spec):
    events = spec.stream("/v1/chat/completions", chat_body(max_tokens=101, ignore_eos=True), headers=AUTH)
    sizes = [len(t.split()) for t in deltas(events, "content")]
    assert sizes[0] == 1  # the prefill token
    assert set(sizes[1:]) == {2, 3} and sum(sizes[1:]) / len(sizes[1:]) == 2.5
    state = spec.json("GET", "/server_info", headers=AUTH)[1]["internal_states"][0]
    assert 2.0 <= state["avg_spec_accept_length"] <= 3.0
    m = metrics(spec)
    assert 2.0 <= m["sglang:spec_accept_length"] <= 3.0 and m["sglang:spec_verify_calls_total"] >= 40
    status, resp = spec.json(
        "POST", "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 11}}, headers=AUTH
    )
    assert resp["meta_info"]["spec_verify_ct"] == 4 and resp["meta_info"]["spec_accept_length"] == 11 / 4


def test_api_key_protects_all_but_health_and_metrics(spec):
    assert spec.json("GET", "/v1/models")[0] == 401
    assert spec.json("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert spec.json("GET", "/server_info")[0] == 401
    assert spec.json("POST", "/v1/chat/completions", chat_body(max_tokens=1))[0] == 401
    assert spec.json("POST", "/generate", {"text": "x"})[0] == 401
    assert spec.get("/health")[0] == 200 and spec.get("/health_generate")[0] == 200
    assert spec.get("/metrics")[0] == 200
    status, info = spec.json("GET", "/server_info", headers=AUTH)
    assert status == 200 and "s3cret" not in json.dumps(info)
    # Like real SGLang, the startup log carries the key (the deploy's launcher masks it before the journal).
    assert "api_key='s3cret'" in spec.stdout()


def test_eagle_topk_without_num_steps_fails_like_sglang(emu):
    e = emu("--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1")
    assert e.proc.wait(30) == 1
    err = e.stderr()
    assert "Traceback (most recent call last)" in err and err.rstrip().endswith("AssertionError")
    assert "_handle_eagle_family" in err


# --- faults ------------------------------------------------------------------------------------------


def test_crash_on_load(emu):
    e = emu(env={"SGLANG_EMU_LOAD_S": "0.6", "SGLANG_EMU_FAULT": "crash_on_load"})
    t0 = time.monotonic()
    assert e.proc.wait(30) == 1
    assert time.monotonic() - t0 >= 0.25  # after part of the load time
    err = e.stderr()
    assert "Traceback (most recent call last)" in err and "\nAssertionError\n" in err
    assert not e.port_open() and READY_LINE not in e.stdout()


@pytest.mark.parametrize(
    "message, last_line",
    [
        (
            "ValueError: Speculative decoding is not compatible with radix cache",
            "ValueError: Speculative decoding is not compatible with radix cache",
        ),
        ("flashinfer: unsupported architecture sm_120", "RuntimeError: flashinfer: unsupported architecture sm_120"),
    ],
)
def test_crash_on_load_message(emu, message, last_line):
    e = emu("--emu-fault", "crash_on_load", "--emu-fault-message", message)
    assert e.proc.wait(30) == 1
    assert last_line + "\n" in e.stderr()


def test_crash_mid_stream(emu):
    e = emu(env={"SGLANG_EMU_FAULT": "crash_mid_stream", "SGLANG_EMU_DECODE_TOK_S": "200"}).wait_ready()
    conn = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
    conn.request("POST", "/v1/chat/completions", json.dumps(chat_body(max_tokens=40, ignore_eos=True, stream=True)))
    resp = conn.getresponse()
    assert resp.status == 200
    lines = []
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        while True:
            line = resp.readline()
            if not line:
                raise ConnectionError("closed")
            lines.append(line)
    tokens = sum(
        1 for ln in lines if ln.startswith(b"data: {") and json.loads(ln[6:])["choices"][0]["delta"].get("content")
    )
    assert 1 <= tokens < 40 and b"data: [DONE]\n" not in lines
    assert e.proc.wait(30) == 1
    assert "illegal memory access" in e.stderr()


def test_garbage_output(emu):
    e = emu("--emu-fault", "garbage").wait_ready()
    events = e.stream("/v1/chat/completions", chat_body(max_tokens=30, ignore_eos=True))
    text = "".join(deltas(events, "content"))
    assert text == "!" * 30
    status, resp = e.json("POST", "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 5}})
    assert resp["text"] == "!!!!!" and resp["output_ids"] == [0] * 5


def test_never_ready(emu):
    e = emu(env={"SGLANG_EMU_FAULT": "never_ready", "SGLANG_EMU_LOAD_S": "0.1", "SGLANG_EMU_WARMUP_S": "0.1"})
    e.wait(e.port_open, what="port")
    time.sleep(0.8)
    assert e.get("/health")[0] == 503 and e.get("/health_generate")[0] == 503
    assert e.get("/v1/models")[0] == 200
    assert READY_LINE not in e.stdout()


def test_http_500(emu):
    e = emu(env={"SGLANG_EMU_FAULT": "http_500"}).wait_ready()
    for path, body in [
        ("/v1/chat/completions", chat_body(max_tokens=3)),
        ("/v1/completions", {"prompt": "x", "max_tokens": 3, "stream": True}),
    ]:
        status, resp = e.json("POST", path, body)
        assert status == 500 and resp["object"] == "error" and resp["code"] == 500
        assert resp["type"] == "InternalServerError" and resp["message"]
    status, resp = e.json("POST", "/generate", {"text": "x"})
    assert status == 500 and resp["error"]["message"]
    assert e.get("/health")[0] == 200


# --- multi-node groups ------------------------------------------------------------------------------


def group_flags(dist: str, rank: int, *extra: str) -> tuple:
    return ("--tp-size", "2", "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", dist, *extra)


def test_a_node_that_never_joins_times_out_like_torch(emu):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    rank0 = emu(*group_flags(f"127.0.0.1:{free_port()}", 0, "--dist-timeout", "1"))
    rank1 = emu(*group_flags(f"127.0.0.1:{free_port()}", 1, "--dist-timeout", "1"))  # nobody listens there
    busy = emu(*group_flags(f"127.0.0.1:{taken.getsockname()[1]}", 0))
    while rank0.proc.poll() is None or rank1.proc.poll() is None:
        assert not rank0.port_open() and not rank1.port_open()  # still "loading": the group never formed
        time.sleep(0.05)
    assert rank0.proc.returncode == 1 and rank1.proc.returncode == 1
    assert rank0.stderr().splitlines()[-2] == (
        "torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 1/2 clients joined."
    )
    assert "DistNetworkError: The client socket has timed out after 1000ms" in rank1.stderr()
    assert busy.proc.wait(30) == 1 and "failed to listen" in busy.stderr()
    taken.close()


# --- packaging --------------------------------------------------------------------------------------


def test_runs_from_a_copied_package_with_the_stdlib_only_and_flags_override_env(emu, tmp_path):
    # As on a lab host: the files the role installs (the lookup sglang_emulator_sources: the emulator's modules and the
    # collection's sglang_defaults.py) copied next to the launcher, run as `launch.py -m emulator`; -I -S: no
    # site-packages and no sglang_deploy, so an import outside the stdlib fails here.
    from ansible_collections.sglang.deploy.plugins.lookup.sglang_emulator_sources import LookupModule

    opt = tmp_path / "opt"
    (opt / "emulator").mkdir(parents=True)
    for source in LookupModule().run([]):
        shutil.copy(source, opt / "emulator")
    shutil.copy(REPO / "plugins" / "module_utils" / "launch.py", opt / "launch.py")
    run_launcher = (
        "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv[1:2] = []; "
        "runpy.run_path(sys.path[0] + '/launch.py', run_name='__main__')"
    )
    e = emu(
        "--emu-decode-tok-s",
        "3000",
        "--emu-ttft-ms",
        "1",
        entry=("-I", "-S", "-c", run_launcher, str(opt), "-m", "emulator"),
        served=False,
        env={"SGLANG_EMU_DECODE_TOK_S": "1"},
    ).wait_ready()
    settings = e.json("GET", "/server_info")[1]["emulator"]
    assert settings["decode_tok_s"] == 3000 and settings["ttft_ms"] == 1
    assert e.json("GET", "/v1/models")[1]["data"][0]["id"] == MODEL  # served name defaults to the path


def test_module_entry_point_help():
    out = subprocess.run(
        [sys.executable, "-m", "sglang_deploy.emulator", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--emu-decode-tok-s" in out and "--speculative-algorithm" in out


# --- hostile and careless input ------------------------------------------------------------------------

EVIL_NAME = 'evil"} 1\nsglang:forged_total{x="\\'


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    # the launcher appends --api-key and --admin-api-key from SGLANG_API_KEY / SGLANG_ADMIN_API_KEY
    e = Emu(
        tmp_path_factory.mktemp("hostile"),
        "--served-model-name",
        EVIL_NAME,
        "--enable-metrics",
        "--ssl-keyfile-password",
        "pw-s3cret",
        "--api-key",
        "s3cret",
        "--admin-api-key=adm-s3cret",
    )
    yield e.wait_ready()
    e.stop()


def raw(port: int, data: bytes, timeout: float = 3.0) -> bytes:
    """Send bytes on a fresh connection; everything the server answers until it closes (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got


def test_server_info_masks_every_key(hostile):
    status, payload = hostile.get("/server_info", headers=AUTH)[::2]
    assert status == 200
    for secret in (b"s3cret", b"adm-s3cret", b"pw-s3cret"):
        assert secret not in payload
    info = json.loads(payload)
    assert info["api_key"] == info["admin_api_key"] == info["ssl_keyfile_password"] == "***"
    assert "--admin-api-key=*** " in info["launch_command"] + " "
    assert "--ssl-keyfile-password ***" in info["launch_command"]


def test_admin_optional_endpoints_take_only_the_admin_key_once_there_is_one(hostile, plain):
    # SGLang's AuthLevel.ADMIN_OPTIONAL (/flush_cache, /freeze_gc): the admin key, not the API key; GET or POST
    admin = {"Authorization": "Bearer adm-s3cret"}
    for path in ("/flush_cache", "/freeze_gc"):
        assert hostile.get(path, headers=AUTH)[0] == hostile.post(path, {}, headers=AUTH)[0] == 401
        assert hostile.get(path, headers=admin)[0] == hostile.post(path, {}, headers=admin)[0] == 200
        assert hostile.get("/v1/models", headers=admin)[0] == 401  # the admin key is no API key
        assert plain.get(path)[0] == 200  # no key at all: open, as in SGLang
    assert hostile.get("/freeze_gc", headers=admin)[2] == b"Garbage collection frozen.\n"


def test_metrics_escape_the_served_model_name(hostile):
    text = hostile.get("/metrics")[2].decode()
    assert not [line for line in text.splitlines() if line.startswith("sglang:forged")]
    assert 'model_name="evil\\"} 1\\nsglang:forged_total{x=\\"\\\\",tp_rank="0"' in text


def test_auth_is_checked_before_the_body_is_read(hostile):
    # a client that announces a large body and sends none gets its 401 at once (no 100 Continue first)
    # (read first, the body that never comes would end in a 408, not a 401)
    answer = raw(
        hostile.port, b"POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000000\r\n\r\n"
    )
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert b"connection: close" in answer.lower()


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "x"}], "stream_options": "yes"},
        {"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": ["enable_thinking"]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        {"messages": ["hello"]},
        {"messages": [{"role": "user", "content": 7}]},
        {"messages": [{"role": "user", "content": "x"}], "stream": [1]},
        {"messages": [{"role": "user", "content": "x"}], "ignore_eos": {"a": 1}},
    ],
)
def test_wrong_typed_chat_fields_are_400(plain, body):
    status, resp = plain.json("POST", "/v1/chat/completions", body)
    assert status == 400 and resp["object"] == "error", resp


@pytest.mark.parametrize(
    "path, body",
    [
        ("/generate", {"text": "x", "sampling_params": "fast"}),
        ("/generate", {"text": "x", "sampling_params": {"ignore_eos": "perhaps"}}),
        ("/v1/completions", {"prompt": "x", "stream_options": [True]}),
        ("/v1/completions", "[" * 100000 + "]" * 100000),  # nesting deeper than the JSON decoder recurses
    ],
)
def test_wrong_typed_fields_are_400(plain, path, body):
    assert plain.json("POST", path, body)[0] == 400


def test_slow_and_idle_connections_are_closed(plain):
    # SGLang's uvicorn closes a connection idle for 5 s; the emulator also gives a request's head 5 s to arrive
    def closed_after(dribble: bool) -> float:
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", plain.port), timeout=10) as s:
            s.sendall(b"GET /health HTTP/1.1\r\n" if dribble else b"")
            while True:
                try:
                    if dribble:
                        s.sendall(b"x-slow: 1\r\n")
                    s.settimeout(0.5)
                    if s.recv(1024) == b"":
                        return time.monotonic() - t0
                except TimeoutError:
                    assert time.monotonic() - t0 < 60, "connection still open"
                except ConnectionError:
                    return time.monotonic() - t0

    results = {}
    threads = [threading.Thread(target=lambda d=d: results.__setitem__(d, closed_after(d))) for d in (False, True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results[False] >= 4 and results[True] >= 4, results  # closed by the server, not before its 5 s


def test_too_many_open_files_is_one_log_line_and_passes(emu):
    e = emu(preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))).wait_ready()
    socks = [socket.create_connection(("127.0.0.1", e.port)) for _ in range(60)]
    time.sleep(2.5)
    for s in socks:
        s.close()
    e.wait(lambda: e.get("/health", timeout=2)[0] == 200, timeout=30, what="serving again")
    err = e.stderr()
    assert err.count("Too many open files") == 1 and "Traceback" not in err, err


def test_oversized_chunked_framing_is_refused(plain):
    head = b"POST /generate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert raw(plain.port, head + b"1" * 70000 + b"\r\n").startswith(b"HTTP/1.1 400 ")
    assert raw(plain.port, head + b"fffffffffff\r\n").startswith(b"HTTP/1.1 413 ")
    assert raw(plain.port, head.replace(b"Transfer-Encoding: chunked", b"Content-Length: -5")).startswith(
        b"HTTP/1.1 400 "
    )
    assert plain.get("/health")[0] == 200


def test_a_request_with_two_body_lengths_is_refused_at_once(plain):
    """Two Content-Length headers, or one with Transfer-Encoding: the last one read decided, and a request waited
    for a body that its sender had framed otherwise (408 after the body timeout)."""
    head = b"POST /generate HTTP/1.1\r\nConnection: close\r\n"
    for framing in (
        b"Content-Length: 2\r\nContent-Length: 100\r\n",
        b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
    ):
        assert raw(plain.port, head + framing + b"\r\n{}").startswith(b"HTTP/1.1 400 ")
    assert plain.get("/health")[0] == 200


def test_request_lines_cannot_forge_access_log_lines(plain):
    answer = raw(plain.port, b'GET /x\nINFO:     1.2.3.4:5 - "GET /forged HTTP/1.1" 200 OK HTTP/1.1\r\n\r\n')
    assert answer.startswith(b"HTTP/1.1 400 ")
    raw(plain.port, b'GET /\x1b[2J" HTTP/1.1\r\nConnection: close\r\n\r\n')
    log = plain.stdout()
    assert not [line for line in log.splitlines() if "/forged" in line and not line.startswith("INFO:     127.")]
    assert '"GET /\\x1b[2J\\" HTTP/1.1"' in log


@pytest.mark.parametrize(
    "args, env, names",
    [
        ((), {"SGLANG_EMU_DECODE_TOK_S": "inf"}, "SGLANG_EMU_DECODE_TOK_S"),
        ((), {"SGLANG_EMU_LOAD_S": "nan"}, "SGLANG_EMU_LOAD_S"),
        (("--emu-ttft-ms", "inf"), {}, "--emu-ttft-ms"),
        (("--emu-aggregate-tok-s", "nan"), {}, "--emu-aggregate-tok-s"),
        ((), {"SGLANG_EMU_ACCEPT_LENGTH": "nan"}, "SGLANG_EMU_ACCEPT_LENGTH"),
        (("--port", "70000"), {}, "--port"),
        (("--context-length", "1e400k"), {}, "--context-length"),
        (("--max-running-requests", "-1"), {}, "--max-running-requests"),
        (("--dist-init-addr", "10.0.0.1"), {}, "--dist-init-addr needs host:port"),
        (("--nnodes", "0"), {}, "--nnodes"),
        ((), {"SGLANG_EMU_NOISE": "1.5"}, "the noise must be from 0 to below 1"),
        ((), {"SGLANG_EMU_NOISE_PERIOD_S": "0"}, "its period > 0 seconds"),
        ((), {"SGLANG_EMU_NOISE_SEED": "x"}, "SGLANG_EMU_NOISE_SEED"),
    ],
)
def test_bad_settings_are_refused_at_start(args, env, names):
    run = subprocess.run(
        [sys.executable, *MODULE, "--model-path", MODEL, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **FAST, **env},
        timeout=60,  # guards a hang: a refusal takes a Python start and the emulator's imports, slow on a busy host
    )
    assert run.returncode == 2 and names in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_token_budget_over_the_context_length_is_400_like_sglang(plain):
    # TokenizerManager._validate_one_request (sglang/srt/managers/tokenizer_manager.py); context length 32768
    # timeout: 30 s guards a hang (a request generated instead of refused), not speed: a loaded machine is slow
    status, resp = plain.json("POST", "/v1/chat/completions", chat_body("a b c", max_tokens=40000), timeout=30)
    assert status == 400 and resp["message"].startswith(
        "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of "
        "40003 tokens: 3 tokens from the input messages and 40000 tokens for the completion."
    )
    status, resp = plain.json("POST", "/generate", {"input_ids": [1] * 32768}, timeout=30)
    assert status == 400 and resp["error"]["message"] == (
        "The input (32768 tokens) is longer than the model's context length (32768 tokens)."
    )


def test_a_reader_that_stalls_does_not_hold_its_running_slot(plain):
    # SGLang's scheduler finishes a request whether or not its client reads the stream; so does the emulator
    # /generate streams the text so far in every chunk: megabytes that fill the socket buffers within a second
    body = json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 1500, "ignore_eos": True}, "stream": True})

    def finished() -> tuple:  # requests finished, requests running
        m = metrics(plain)
        return m["sglang:num_requests_total"], m["sglang:num_running_reqs"]

    plain.wait(lambda: finished()[1] == 0, what="idle")  # no other test's request left to finish beside this one
    done = finished()[0]
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", plain.port))
        s.sendall(b"POST /generate HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body.encode()))
        # finished while the client reads nothing; not "running, then not": a loaded machine's poll may miss the
        # 0.75 s it runs
        plain.wait(lambda: finished() == (done + 1, 0), what="finished unread")


def test_request_bodies_held_at_once_have_one_budget(monkeypatch):
    """Clients without a key could make the process hold 16 x 57 MB of bodies: past BODIES' limit a body is
    answered 503 while it is read, and the room comes back when the requests end (issue 20 item 10)."""
    import asyncio

    from sglang_deploy.emulator import protocol

    monkeypatch.setattr(protocol, "BODIES", protocol.BodyBudget(1 << 20))
    body = b"x" * (400 << 10)

    async def scenario() -> list[int]:
        release = asyncio.Event()

        async def hold(req, out):  # a long request: its body stays held until it answers
            await release.wait()
            await out.send_json(200, {"bytes": len(req.body)})

        listener = await asyncio.start_server(
            lambda r, w: protocol.serve_connection(r, w, lambda req: hold), "127.0.0.1", 0
        )
        port = listener.sockets[0].getsockname()[1]

        async def post() -> int:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /generate HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            status = int((await reader.readline()).split()[1])
            writer.close()
            return status

        first = [asyncio.create_task(post()) for _ in range(2)]
        while protocol.BODIES.held < 2 * len(body):
            await asyncio.sleep(0.01)
        refused = await post()  # 800 KiB held: 400 more would pass 1 MiB
        release.set()
        statuses = [*await asyncio.gather(*first), refused]
        assert protocol.BODIES.held == 0
        statuses.append(await post())  # the room came back
        listener.close()
        return statuses

    assert asyncio.run(scenario()) == [200, 200, 503, 200]


def test_a_late_first_token_does_not_speed_up_the_decode_after_it():
    """A busy host delays the first token; the steps after it keep the configured rate instead of catching up
    to the due time (what made a CI run read 174 tok/s from a 172 tok/s setting)."""

    async def scenario(engine):
        asyncio.get_running_loop().call_later(0.015, asyncio.get_running_loop().advance, 0.06)  # held past 20 ms
        return await token_times(engine, 41)

    arrival, stamps = simulated({"SGLANG_EMU_TTFT_MS": "20", "SGLANG_EMU_DECODE_TOK_S": "200"}, scenario)
    assert stamps[0] - arrival == pytest.approx(0.075)  # the first token was late
    assert stamps[-1] - stamps[0] == pytest.approx(40 / 200)  # 40 steps at 200 tok/s after it, not fewer
