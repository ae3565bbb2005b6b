"""The benchmark maths on synthetic timelines (no server, no clock)."""

from __future__ import annotations

import json
import math

import pytest

from ansible_collections.sglang.deploy.plugins.module_utils.bench import client, metrics, table, workload
from ansible_collections.sglang.deploy.plugins.module_utils.bench.metrics import Timeline, level_metrics


def synthetic(
    t_send: float, ttft: float, n_tokens: int, rate: float, per_chunk: int = 1, tail: float = 0.0
) -> Timeline:
    """A request whose token chunks carry `per_chunk` tokens each, one chunk every per_chunk/rate s."""
    n_chunks = math.ceil(n_tokens / per_chunk)
    times = [t_send + ttft + j * per_chunk / rate for j in range(n_chunks)]
    return Timeline(
        t_send=t_send,
        t_end=times[-1] + tail,
        token_times=times,
        t_first_content=times[0],
        content_chunks=n_chunks,
        content_chars=4 * n_tokens,
        completion_tokens=n_tokens,
        prompt_tokens=100,
    )


def test_single_stream_figures_follow_the_definitions():
    tl = synthetic(10.0, 0.080, 257, 172.0, tail=0.002)
    m = level_metrics([tl], 1, 257)
    assert m["completed"] == 1 and m["failed"] == 0
    assert m["decode_tok_s_per_request"]["mean"] == pytest.approx(172.0, rel=1e-9)
    assert m["ttft_ms"]["p50"] == pytest.approx(80.0)
    assert m["itl_ms"]["p99"] == pytest.approx(1000 / 172.0)
    e2e = (tl.t_end - tl.t_send) * 1000
    assert m["e2e_ms"]["mean"] == pytest.approx(e2e)
    assert m["tpot_ms"]["mean"] == pytest.approx((e2e - 80.0) / 256)
    assert m["output_throughput_tok_s"] == pytest.approx(257 / (tl.t_end - tl.t_send))
    assert m["achieved_concurrency"] == pytest.approx(1.0)
    assert m["tokens_per_chunk"] == {"mean": 1.0, "aggregate": 1.0}
    assert m["output_len_mismatch"]["count"] == 0


def test_multi_token_chunks_inflate_itl_but_not_decode_rate():
    n, rate, k = 300, 172.0, 3
    m = level_metrics([synthetic(0.0, 0.08, n, rate, per_chunk=k)], 1, n)
    # chunks every k/rate s; decode = (n-1)/((n/k - 1) * k/rate)
    assert m["itl_ms"]["mean"] == pytest.approx(1000 * k / rate)
    assert m["decode_tok_s_per_request"]["mean"] == pytest.approx(rate * (n - 1) / (n - k))
    assert m["tokens_per_chunk"]["aggregate"] == pytest.approx(3.0)


def test_percentiles_interpolate_linearly():
    values = list(range(1, 101))
    s = metrics.summarize(values)
    assert s == {
        "mean": 50.5,
        "p50": 50.5,
        "p90": pytest.approx(90.1),
        "p95": pytest.approx(95.05),
        "p99": pytest.approx(99.01),
        "std": pytest.approx(28.86607, rel=1e-6),  # population std, as numpy.std
    }
    assert metrics.summarize([]) is None
    assert metrics.percentile([7.0], 99) == 7.0


def _bench_serving_metrics(tls: list, dur_s: float) -> dict:
    """sglang 0.5.16's calculate_metrics (sglang/benchmark/serving.py) on the same requests, as it records them
    with the chat backend: ttft = first non-empty delta, itl = gaps between later non-empty deltas, latency =
    the last SSE line ([DONE]), output_len = usage.completion_tokens, prompt_len = the request's input tokens."""
    np = pytest.importorskip("numpy")
    ok = [t for t in tls if t.ok]
    ttfts = [t.token_times[0] - t.t_send for t in ok]
    itls = [b - a for t in ok for a, b in zip(t.token_times, t.token_times[1:])]
    lat = [t.t_end - t.t_send for t in ok]
    tpots = [(t.t_end - t.t_send - f) / (t.completion_tokens - 1) for t, f in zip(ok, ttfts) if t.completion_tokens > 1]
    out_tokens = sum(t.completion_tokens for t in ok)
    in_tokens = sum(t.prompt_tokens for t in ok)
    out = {
        "request_throughput": len(ok) / dur_s,
        "output_throughput": out_tokens / dur_s,
        "input_throughput": in_tokens / dur_s,
        "total_throughput": (in_tokens + out_tokens) / dur_s,
        "concurrency": np.sum(lat) / dur_s,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e_latency", lat)):
        out[f"mean_{name}_ms"] = np.mean(values) * 1000
        out[f"median_{name}_ms"] = np.median(values) * 1000
        out[f"std_{name}_ms"] = np.std(values) * 1000
        for p in (90, 95, 99):
            out[f"p{p}_{name}_ms"] = np.percentile(values, p) * 1000
    return out


def test_figures_equal_bench_servings_on_the_same_requests():
    """Parity: every figure bench_serving reports is ours under the same name mapping (p50 = its median)."""
    tls = [
        synthetic(0.0, 0.05, 256, 500.0, tail=0.001),
        synthetic(0.01, 0.09, 256, 450.0, per_chunk=3, tail=0.002),
        synthetic(0.3, 0.07, 200, 480.0),
        synthetic(0.35, 0.2, 256, 300.0, per_chunk=2),
        Timeline(t_send=0.4, t_end=0.41, error="HTTP 500: boom"),
    ]
    m = level_metrics(tls, 4, 256)
    theirs = _bench_serving_metrics(tls, m["wall_s"])
    assert m["request_throughput_req_s"] == pytest.approx(theirs["request_throughput"])
    assert m["output_throughput_tok_s"] == pytest.approx(theirs["output_throughput"])
    assert m["input_throughput_tok_s"] == pytest.approx(theirs["input_throughput"])
    assert m["total_throughput_tok_s"] == pytest.approx(theirs["total_throughput"])
    assert m["achieved_concurrency"] == pytest.approx(theirs["concurrency"])
    for ours, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2e_latency")):
        for stat, their_stat in (("mean", "mean"), ("p50", "median"), ("std", "std"), ("p90", "p90"), ("p95", "p95")):
            assert m[ours][stat] == pytest.approx(theirs[f"{their_stat}_{name}_ms"]), (ours, stat)
        assert m[ours]["p99"] == pytest.approx(theirs[f"p99_{name}_ms"]), ours
    assert m["output_len_mismatch"]["count"] == 1  # the 200-token answer, counted as 200 in every figure


def test_the_body_forces_the_length_as_bench_serving_without_min_tokens():
    body = workload.chat_body("m", "hi", 128)
    assert body["ignore_eos"] is True and body["max_tokens"] == 128 and body["temperature"] == 0.0
    assert "min_tokens" not in body  # SGLang's min-new-tokens penalizer slows every decode step
    assert body["stream_options"] == {"include_usage": True}
    assert workload.chat_body("m", "hi", 128, min_tokens=True)["min_tokens"] == 128


def test_aggregate_throughput_uses_the_level_wall_time():
    tls = [synthetic(0.0, 0.1, 100, 100.0), synthetic(0.5, 0.1, 100, 50.0), synthetic(0.2, 0.3, 100, 200.0)]
    m = level_metrics(tls, 2, 100)
    wall = max(t.t_end for t in tls) - 0.0
    assert m["wall_s"] == pytest.approx(wall)
    assert m["output_throughput_tok_s"] == pytest.approx(300 / wall)
    assert m["achieved_concurrency"] == pytest.approx(sum(t.t_end - t.t_send for t in tls) / wall)
    assert sorted([100.0, 50.0, 200.0])[1] == pytest.approx(m["decode_tok_s_per_request"]["p50"])
    assert m["decode_tok_s_per_request"]["mean"] == pytest.approx((100 + 50 + 200) / 3)


def test_failed_requests_are_counted_not_averaged():
    good = synthetic(0.0, 0.05, 64, 100.0)
    bad1 = Timeline(t_send=0.0, t_end=0.01, error="HTTP 500: boom")
    bad2 = Timeline(t_send=0.0, t_end=0.02, error="HTTP 500: boom")
    m = level_metrics([good, bad1, bad2], 3, 64)
    assert (m["completed"], m["failed"]) == (1, 2)
    assert m["errors"] == {"HTTP 500: boom": 2}
    assert m["ttft_ms"]["mean"] == pytest.approx(50.0)
    assert m["output_tokens"] == 64


def test_output_length_mismatch_is_reported_per_request():
    tls = [
        synthetic(0.0, 0.05, 128, 100.0),
        synthetic(0.0, 0.05, 17, 100.0),
        synthetic(0.0, 0.05, 128, 100.0),
        synthetic(0.0, 0.05, 3, 100.0),
    ]
    m = level_metrics(tls, 4, 128)
    mm = m["output_len_mismatch"]
    assert mm["count"] == 2 and mm["expected"] == 128
    assert mm["examples"] == [
        {"request": 1, "completion_tokens": 17, "expected": 128},
        {"request": 3, "completion_tokens": 3, "expected": 128},
    ]
    assert m["output_tokens"] == 128 * 2 + 17 + 3
    per_request = level_metrics(tls, 4, [128, 17, 100, 3])["output_len_mismatch"]  # a dataset's own lengths
    assert per_request["count"] == 1 and per_request["expected"] is None
    assert per_request["examples"] == [{"request": 2, "completion_tokens": 128, "expected": 100}]


def test_reasoning_chunks_count_as_output_and_are_reported_apart():
    tl = synthetic(0.0, 0.1, 50, 100.0)
    tl.reasoning_chunks, tl.reasoning_chars, tl.content_chunks, tl.content_chars = 30, 120, 20, 80
    tl.t_first_content = tl.token_times[30]
    tl.reasoning_tokens = 30
    m = level_metrics([tl], 1, 50)
    assert m["reasoning"] == {
        "reasoning_chunks": 30,
        "reasoning_chars": 120,
        "content_chunks": 20,
        "content_chars": 80,
        "reasoning_tokens": 30,
    }
    assert m["ttft_ms"]["mean"] == pytest.approx(100.0)
    assert m["ttfo_ms"]["mean"] == pytest.approx(100.0 + 300.0)


def test_sse_recorder_is_independent_of_chunk_boundaries():
    events = [
        {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"delta": {"reasoning_content": "hmm"}}]},
        {"choices": [{"delta": {"reasoning": "vLLM's name"}}]},
        {"choices": [{"delta": {"content": "Hi"}}]},
        {"choices": [{"delta": {"content": " there"}, "finish_reason": "length"}]},
        {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "reasoning_tokens": 1}},
    ]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    for step in (1, 7, len(raw)):
        tl = Timeline()
        rec = client._SSERecorder(tl, 3)
        for i in range(0, len(raw), step):
            rec.feed(raw[i : i + step])
        assert rec.done and tl.error is None
        assert len(tl.token_times) == 4
        assert (tl.reasoning_chunks, tl.content_chunks, tl.content_chars) == (2, 2, 8)
        assert (tl.completion_tokens, tl.prompt_tokens, tl.reasoning_tokens) == (3, 9, 1)


def test_spec_accept_length_from_metrics_counter_deltas():
    before = metrics.parse_prometheus(
        "# TYPE sglang:generation_tokens_total counter\n"
        'sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1000\n'
        'sglang:spec_verify_calls_total{model_name="m"} 400\n'
    )
    after = metrics.parse_prometheus(
        'sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1900\n'
        'sglang:generation_tokens_total{model_name="m",tp_rank="1"} 0\n'
        'sglang:spec_verify_calls_total{model_name="m"} 700\n'
    )
    assert metrics.spec_accept_from_counters(before, after) == pytest.approx(3.0)
    assert metrics.spec_accept_from_counters(before, before) is None
    assert metrics.spec_accept_from_counters(None, after) is None
    assert metrics.spec_accept_from_counters({"sglang:generation_tokens_total": 1}, after) is None


def test_server_info_accept_length_reads_both_layouts():
    assert metrics.server_info_accept_length({"internal_states": [{"avg_spec_accept_length": 2.5}]}) == 2.5
    assert (
        metrics.server_info_accept_length({"decode": [{"internal_states": [{"avg_spec_accept_length": 1.75}]}]}) == 1.75
    )
    assert metrics.server_info_accept_length({"internal_states": [{}]}) is None


def test_prompts_are_deterministic_unique_and_sized():
    a, b = workload.build_prompt(3, 512), workload.build_prompt(4, 512)
    assert a == workload.build_prompt(3, 512) and a != b
    assert 480 <= len(a.split()) <= 520


def test_table_marks_emulated_servers_and_mismatches():
    m = level_metrics([synthetic(0.0, 0.05, 128, 100.0), synthetic(0.0, 0.05, 100, 100.0)], 2, 128)
    m["spec_accept_length"] = {"value": 2.9, "source": "metrics_delta"}
    result = {
        "server_emulated": True,
        "model": "m",
        "url": "http://x",
        "levels": [m],
        "workload": {"input_len": 10, "output_len": 128},
    }
    text = table.format_table(result)
    assert text.splitlines()[0] == "EMULATED server: figures are synthetic"
    assert "1 responses not 128 tokens" in text and "2.90" in text
    assert "EMULATED" not in table.format_table(dict(result, server_emulated=False))


def test_concurrency_list_parsing():
    assert workload.parse_concurrency("1, 8,32") == [1, 8, 32]
    for bad in ("", "0", "a"):
        with pytest.raises(ValueError):
            workload.parse_concurrency(bad)


@pytest.mark.parametrize("trailer", [b"", b"X-Trailer: 1\r\n"])
def test_chunked_decoder_handles_any_split(trailer):
    pieces = [b"data: a\n\n", b"data: bb\n\n", b"x" * 300]
    raw = b"".join(b"%x;ext=1\r\n" % len(p) + p + b"\r\n" for p in pieces) + b"0\r\n" + trailer + b"\r\n"
    for step in (1, 2, 5, len(raw)):
        got = []
        dec = client.ChunkedDecoder(got.append)
        for i in range(0, len(raw), step):
            assert not dec.done
            dec.feed(raw[i : i + step])
        assert dec.done and got == pieces


def test_request_details_keep_each_requests_own_figures_in_dispatch_order():
    done = Timeline(t_send=10.5, t_end=11.0, token_times=[10.6, 10.7, 11.0], completion_tokens=3)
    first = Timeline(t_send=10.0, t_end=10.3, token_times=[10.25, 10.3], completion_tokens=2)
    failed = Timeline(t_send=10.2, t_end=10.4, error="HTTP 500: boom")
    never = Timeline(t_send=11.0, t_end=11.0, sent=False, error="cut short: the level stopped at a timeout")
    got = metrics.request_details([done, first, failed, never])
    assert got[0] == {"send_ms": 500.0, "ttft_ms": 100.0, "e2e_ms": 500.0, "completion_tokens": 3, "error": None}
    assert got[1] == {"send_ms": 0.0, "ttft_ms": 250.0, "e2e_ms": 300.0, "completion_tokens": 2, "error": None}
    assert got[2] == {
        "send_ms": 200.0,
        "ttft_ms": None,
        "e2e_ms": None,
        "completion_tokens": None,
        "error": "HTTP 500: boom",
    }
    assert got[3]["send_ms"] is None and got[3]["ttft_ms"] is None and got[3]["error"].startswith("cut short")
    # A clock that starts at 0 (a stand-in's) blanks nothing.
    zero = Timeline(t_send=0.0, t_end=0.2, token_times=[0.1, 0.2], completion_tokens=2)
    assert metrics.request_details([zero])[0] == {
        "send_ms": 0.0,
        "ttft_ms": 100.0,
        "e2e_ms": 200.0,
        "completion_tokens": 2,
        "error": None,
    }
    assert "requests_detail" in metrics.DEFINITIONS
