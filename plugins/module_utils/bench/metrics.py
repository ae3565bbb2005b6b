"""Benchmark maths (pure: no I/O, no clock): per-request timelines to level figures, Prometheus text,
speculative accept length. Every figure's formula is in DEFINITIONS, which is also written into each result."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

OUTPUT_CHECK_CHARS = 4096  # of each response, for the output check

DEFINITIONS = {
    "parity": "TTFT, ITL, TPOT, E2E, request/output/total throughput and their mean, p50 (= median), std, p95, "
    "p99 follow sglang.bench_serving (calculate_metrics and the chat request function of sglang 0.5.16); "
    "the remaining differences are named in docs/benchmark.md",
    "t_send": "perf_counter right before the request bytes are written to the connection (bench_serving's `st`; "
    "waiting for a concurrency slot is not counted; connections are kept alive and opened before the level, "
    "where bench_serving opens one per request)",
    "token_chunk": "an SSE chunk whose choices[0].delta has non-empty `content` or `reasoning_content` "
    "(`reasoning` when there is no reasoning_content); the role-only first chunk and the usage chunk are not "
    "token chunks",
    "completion_tokens": "server-reported usage.completion_tokens (stream_options.include_usage=true; a "
    "request without usage counts as failed, where bench_serving assumes the requested length); includes "
    "reasoning tokens",
    "ttft_ms": "t_first_token_chunk - t_send",
    "ttfo_ms": "t_first_chunk_with_content - t_send (first non-reasoning output)",
    "e2e_ms": "t_stream_end - t_send, stream end = the `data: [DONE]` line (or the end of the body)",
    "tpot_ms": "(e2e - ttft) / (completion_tokens - 1), per request (requests with completion_tokens > 1)",
    "decode_tok_s_per_request": "(completion_tokens - 1) / (t_last_token_chunk - t_first_token_chunk), "
    "per request; the single-stream decode speed",
    "itl_ms": "gaps between consecutive token chunks of one request (the first token's wait is TTFT, not an "
    "ITL), pooled over the level's requests; with speculative decoding one chunk carries several tokens, so "
    "this is a chunk step latency (bench_serving re-tokenizes each chunk there and splits the gap)",
    "tokens_per_chunk": "mean over requests of completion_tokens / token_chunks; `aggregate` = "
    "sum(completion_tokens) / sum(token_chunks)",
    "output_throughput_tok_s": "sum(completion_tokens of completed requests) / wall_s",
    "input_throughput_tok_s": "sum(usage.prompt_tokens of completed requests) / wall_s (the server's count, "
    "chat template included)",
    "total_throughput_tok_s": "(sum(prompt_tokens) + sum(completion_tokens)) / wall_s",
    "request_throughput_req_s": "completed / wall_s",
    "wall_s": "last request's stream end - first request's t_send, for the level",
    "achieved_concurrency": "sum(e2e) / wall_s (average requests in flight; bench_serving's `concurrency`)",
    "stats": "{mean, p50, p90, p95, p99, std}; percentiles by linear interpolation between closest ranks "
    "(numpy's default, as bench_serving), std is the population standard deviation (numpy.std), over completed "
    "requests",
    "output_len_mismatch": "completed requests whose completion_tokens != the requested output_len: a "
    "count and the first examples, never averaged away (their real counts are what the figures use)",
    "reasoning": "reasoning_content chunks/chars vs content chunks/chars; `reasoning_tokens` = "
    "sum(usage.reasoning_tokens) when the server reports it",
    "spec_accept_length": "source `metrics_delta`: (delta sglang:generation_tokens_total) / (delta "
    "sglang:spec_verify_calls_total) between /metrics scrapes right before and after the level (this "
    "level alone; the prefill token counts, as in SGLang's per-request completion_tokens / spec_verify_ct); "
    "source `server_info_cumulative` (no usable /metrics): /server_info internal_states[0].avg_spec_accept_length "
    "read after the level (`value`) and before it (`before`): averages since server start, including earlier "
    "levels and warm-up",
    "prompt_tokens_mean": "mean usage.prompt_tokens (chat template included)",
    "output_check": f"completed requests whose text (content and reasoning_content, first {OUTPUT_CHECK_CHARS} "
    "characters) is empty, white space only, one character repeated (>= 90% of >= 4 visible characters) or not "
    "text (> 10% control, unassigned or replacement characters): a count and the first examples. When "
    "/server_info says load_format dummy (`dummy_weights`), random weights write no language: only a run of '!' "
    "(token id 0, what NaN logits produce) counts, and `tolerated` counts the answers real weights would fail",
    "level": "closed loop `c=N`: N requests in flight, a new one as soon as one ends (bench_serving's "
    "--max-concurrency N at the default --request-rate inf); rate `R req/s`: arrivals with exponential gaps of "
    "mean 1/R seconds, those bench_serving draws for --seed (its Poisson process: same seed, same arrivals), at most "
    "`concurrency` in flight when capped (--max-concurrency), requests waiting for a slot start their clock "
    "when they get it",
    "goodput_req_s": "completed requests that meet every SLO / wall_s; each request is judged by its own TTFT, "
    "TPOT and E2E, and by its own ITLs' statistic the SLO names (mean or percentile); without SLOs every "
    "completed request counts (= request_throughput_req_s)",
    "slo": "per SLO (e.g. ttft_p99_ms) the level's statistic and its limit; `met` when every statistic is within "
    "its limit and no request failed",
    "sla_search": "the highest request rate whose level meets every SLO: the low bound first (none if it "
    "fails), the high bound next (the answer if it holds), then bisections at the geometric mean of the highest "
    "rate that held and the lowest that did not; each probe is a level of the result",
    "requests_detail": "with --output-details (bench_serving's flag name; its per-request fields are others): each "
    "request of the level in the order it was dispatched: send_ms (its t_send - the level's first t_send; null "
    "when it was never sent), ttft_ms (null without a token chunk), e2e_ms (completed requests only), "
    "completion_tokens and error (null when it completed); absent from a level that sent no request (not run)",
    "stopped": "why the sweep ended early: the first request without an answer within the timeout stops its "
    "level (the requests cut short count as failed), a server that stops answering ends the sweep; later "
    "levels are `not run` (all requests failed)",
}


_PCTS = (50, 90, 95, 99)


@dataclass
class Timeline:
    """What one request recorded. Times are perf_counter seconds."""

    t_send: float = 0.0
    sent: bool = True  # False: never sent (its level stopped first); t_send is then the stop's time
    t_end: float = 0.0
    token_times: array = field(default_factory=lambda: array("d"))  # time of each token chunk (8 bytes each)
    t_first_content: float | None = None
    content_chunks: int = 0
    content_chars: int = 0
    reasoning_chunks: int = 0
    reasoning_chars: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    error: str | None = None
    timed_out: bool = False
    text: str = ""  # the first OUTPUT_CHECK_CHARS characters of content and reasoning_content, in order

    @property
    def ok(self) -> bool:
        return self.error is None

    def keep_text(self, piece: str) -> None:
        """Add a piece of the answer to `text`, up to OUTPUT_CHECK_CHARS: the output check reads no more, and an
        answer near its byte cap (client.answer_bounds) would otherwise be kept whole."""
        room = OUTPUT_CHECK_CHARS - len(self.text)
        if room > 0:
            self.text += piece[:room]


def percentile(sorted_values: list, pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) on an already sorted list."""
    if not sorted_values:
        return math.nan
    k = (len(sorted_values) - 1) * pct / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summarize(values: list) -> dict | None:
    """{mean, p50, p90, p95, p99, std} of the values (std: population, as numpy.std), None when there are none."""
    if not values:
        return None
    s = sorted(values)
    mean = sum(s) / len(s)
    out = {"mean": mean}
    for p in _PCTS:
        out[f"p{p}"] = percentile(s, p)
    out["std"] = math.sqrt(sum((x - mean) ** 2 for x in s) / len(s))
    return out


def _request_figures(t: Timeline) -> tuple:
    """(ttft_ms, tpot_ms or None, e2e_ms, itl_ms list) of a completed request with token chunks."""
    first = t.token_times[0]
    n = t.completion_tokens
    itl = [(b - a) * 1000.0 for a, b in zip(t.token_times, t.token_times[1:])]
    tpot = (t.t_end - first) * 1000.0 / (n - 1) if n > 1 else None
    return (first - t.t_send) * 1000.0, tpot, (t.t_end - t.t_send) * 1000.0, itl


def request_details(timelines: list) -> list:
    """Each request's own figures in dispatch order (DEFINITIONS["requests_detail"]): where a tail comes from."""
    t0 = min((t.t_send for t in timelines if t.sent), default=0.0)

    def ms(a: float, b: float) -> float:
        return round((b - a) * 1000.0, 3)

    return [
        {
            "send_ms": ms(t0, t.t_send) if t.sent else None,
            "ttft_ms": ms(t.t_send, t.token_times[0]) if t.sent and t.token_times else None,
            "e2e_ms": ms(t.t_send, t.t_end) if t.ok else None,
            "completion_tokens": t.completion_tokens,
            "error": t.error,
        }
        for t in timelines
    ]


def level_metrics(
    timelines: list, concurrency: int | None, output_len=None, mismatch_examples: int = 3, slo: dict | None = None
) -> dict:
    """Per-level figures from recorded timelines (see DEFINITIONS); output_len is the requested length, one for
    all or a list per request. Pure: no I/O, no clock."""
    done = [t for t in timelines if t.ok]
    failed = [t for t in timelines if not t.ok]
    errors: dict = {}
    for t in failed:
        errors[t.error] = errors.get(t.error, 0) + 1
    out: dict = {
        "concurrency": concurrency,
        "requests": len(timelines),
        "completed": len(done),
        "failed": len(failed),
        "errors": errors,
    }
    if timelines:
        wall = max(t.t_end for t in timelines) - min(t.t_send for t in timelines)
    else:
        wall = 0.0
    tokens = sum(t.completion_tokens for t in done)
    prompts = [t.prompt_tokens for t in done if t.prompt_tokens is not None]
    out["wall_s"] = wall
    out["output_tokens"] = tokens
    out["input_tokens"] = sum(prompts)
    out["output_throughput_tok_s"] = tokens / wall if wall > 0 else None
    out["input_throughput_tok_s"] = sum(prompts) / wall if wall > 0 else None
    out["total_throughput_tok_s"] = (sum(prompts) + tokens) / wall if wall > 0 else None
    out["request_throughput_req_s"] = len(done) / wall if wall > 0 else None
    out["achieved_concurrency"] = sum(t.t_end - t.t_send for t in done) / wall if wall > 0 else None

    ttft, ttfo, e2e, tpot, decode, itl, tpc = [], [], [], [], [], [], []
    per_request = []
    chunks_total = 0
    for t in done:
        n = t.completion_tokens
        if t.token_times:
            figures = _request_figures(t)
            per_request.append(figures)
            ttft.append(figures[0])
            if figures[1] is not None:
                tpot.append(figures[1])
            itl += figures[3]
            chunks_total += len(t.token_times)
            tpc.append(n / len(t.token_times))
            first, last = t.token_times[0], t.token_times[-1]
            if n > 1 and last > first:
                decode.append((n - 1) / (last - first))
        e2e.append((t.t_end - t.t_send) * 1000.0)
        if t.t_first_content is not None:
            ttfo.append((t.t_first_content - t.t_send) * 1000.0)
    out["decode_tok_s_per_request"] = summarize(decode)
    out["ttft_ms"] = summarize(ttft)
    out["ttfo_ms"] = summarize(ttfo)
    out["tpot_ms"] = summarize(tpot)
    out["itl_ms"] = summarize(itl)
    out["e2e_ms"] = summarize(e2e)
    out["tokens_per_chunk"] = {
        "mean": sum(tpc) / len(tpc) if tpc else None,
        "aggregate": tokens / chunks_total if chunks_total else None,
    }
    out["prompt_tokens_mean"] = sum(prompts) / len(prompts) if prompts else None

    expected = output_len if isinstance(output_len, list) else [output_len] * len(timelines)
    bad = [
        (i, t, want)
        for i, (t, want) in enumerate(zip(timelines, expected))
        if t.ok and want is not None and t.completion_tokens != want
    ]
    out["output_len_mismatch"] = {
        "count": len(bad),
        "expected": None if isinstance(output_len, list) else output_len,
        "examples": [
            {"request": i, "completion_tokens": t.completion_tokens, "expected": want}
            for i, t, want in bad[:mismatch_examples]
        ],
    }
    reasoning_tokens = [t.reasoning_tokens for t in done if t.reasoning_tokens is not None]
    out["reasoning"] = {
        "reasoning_chunks": sum(t.reasoning_chunks for t in done),
        "reasoning_chars": sum(t.reasoning_chars for t in done),
        "content_chunks": sum(t.content_chunks for t in done),
        "content_chars": sum(t.content_chars for t in done),
        "reasoning_tokens": sum(reasoning_tokens) if reasoning_tokens else None,
    }
    out["slo"] = slo_verdict(out, slo) if slo else None
    good = sum(1 for f in per_request if request_meets(f, slo or {}))
    out["goodput_req_s"] = good / wall if wall > 0 else None
    return out


SLO_METRICS = ("ttft", "tpot", "itl", "e2e")
SLO_STATS = ("mean", "p50", "p90", "p95", "p99")


def slo_name(name: str) -> tuple:
    """'ttft_p99_ms' -> ('ttft', 'p99'); ValueError naming the known names for anything else."""
    parts = name.split("_")
    if len(parts) != 3 or parts[0] not in SLO_METRICS or parts[1] not in SLO_STATS or parts[2] != "ms":
        known = ", ".join(f"{m}_{s}_ms" for m in SLO_METRICS for s in ("p50", "p99"))
        raise ValueError(
            f"unknown SLO metric {name!r}: use <{'|'.join(SLO_METRICS)}>_<{'|'.join(SLO_STATS)}>_ms, e.g. {known}"
        )
    return parts[0], parts[1]


def request_meets(figures: tuple, slo: dict) -> bool:
    """Whether one completed request meets every SLO: its own TTFT, TPOT and E2E against the limits, and its
    own ITLs' statistic (mean or percentile, as the SLO names) against the ITL limit."""
    ttft, tpot, e2e, itl = figures
    for name, limit in slo.items():
        metric, stat = slo_name(name)
        if metric == "itl":
            value = (summarize(itl) or {}).get(stat)
        else:
            value = {"ttft": ttft, "tpot": tpot, "e2e": e2e}[metric]
        if value is not None and value > limit:
            return False
    return True


def slo_verdict(level: dict, slo: dict) -> dict:
    """The level against the SLOs: each statistic's value, and `met` when all are within their limits and no
    request failed."""
    checks = {}
    for name, limit in slo.items():
        metric, stat = slo_name(name)
        value = (level.get(f"{metric}_ms") or {}).get(stat)
        checks[name] = {"limit": limit, "value": value, "met": value is not None and value <= limit}
    return {"checks": checks, "met": level["failed"] == 0 and all(c["met"] for c in checks.values())}


def parse_prometheus(text: str) -> dict:
    """Sum of every sample per metric name (labels folded) from Prometheus text exposition."""
    out: dict = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name_end = len(line)
        for i, ch in enumerate(line):
            if ch in "{ ":
                name_end = i
                break
        name = line[:name_end]
        rest = line[name_end:]
        if rest.startswith("{"):
            close = rest.rfind("}")
            rest = rest[close + 1 :]
        parts = rest.split()
        if not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        out[name] = out.get(name, 0.0) + value
    return out


SPEC_TOKENS_COUNTER = "sglang:generation_tokens_total"
SPEC_VERIFY_COUNTER = "sglang:spec_verify_calls_total"


def spec_accept_from_counters(before: dict | None, after: dict | None) -> float | None:
    """Accept length of the interval between two /metrics scrapes, None when not measurable."""
    if not before or not after:
        return None
    try:
        d_tok = after[SPEC_TOKENS_COUNTER] - before[SPEC_TOKENS_COUNTER]
        d_ver = after[SPEC_VERIFY_COUNTER] - before[SPEC_VERIFY_COUNTER]
    except KeyError:
        return None
    if d_ver <= 0 or d_tok < 0:
        return None
    return d_tok / d_ver


def server_info_accept_length(info: dict | None) -> float | None:
    """internal_states[0].avg_spec_accept_length (PD-disaggregated layout: decode[0]...)."""
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        if isinstance(value, (int, float)):
            return float(value)
    return None
