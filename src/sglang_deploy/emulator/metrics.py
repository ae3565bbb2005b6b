"""Counters the engine keeps and their /metrics text in SGLang's Prometheus names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import BANNER

if TYPE_CHECKING:
    from .engine import Engine


class Histogram:
    def __init__(self, buckets: tuple):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1


class Stats:
    def __init__(self):
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.num_requests = 0
        self.aborted = 0
        self.emitted_tokens = 0  # tokens sent so far, finished or not (for gen_throughput, realtime_tokens decode)
        self.prefilled_tokens = 0  # prompt tokens of every request that got its first token (realtime_tokens prefill)
        self.spec_verify_calls = 0
        self.spec_accepted_tokens = 0
        self.queued = 0
        self.gen_throughput = 0.0
        self.ttft = Histogram((0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 120, 160))
        self.e2e = Histogram((0.1, 0.2, 0.4, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 150, 200, 300))
        self.itl = Histogram((0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2))

    def avg_accept_length(self) -> float | None:
        if not self.spec_verify_calls:
            return None
        return self.spec_accepted_tokens / self.spec_verify_calls


def label_value(text: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped (text exposition format)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(engine: Engine) -> str:
    cfg, st = engine.cfg, engine.stats
    labels = f'model_name="{label_value(cfg.served_model_name)}",tp_rank="0",pp_rank="0"'
    lines = [f"# {BANNER}"]

    def metric(name: str, kind: str, help_text: str, value: float | dict) -> None:
        """One family; a dict ``value`` is one sample per value of the label ``mode``."""
        sample = name + ("_total" if kind == "counter" else "")
        lines.extend([f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} {kind}"])
        for mode, v in value.items() if isinstance(value, dict) else [(None, value)]:
            extra = f',mode="{mode}"' if mode else ""
            lines.append(f"sglang:{sample}{{{labels}{extra}}} {float(v)}")

    def histogram(name: str, help_text: str, h: Histogram) -> None:
        lines.extend([f"# HELP sglang:{name} {help_text}", f"# TYPE sglang:{name} histogram"])
        for edge, count in zip(h.buckets, h.counts):
            lines.append(f'sglang:{name}_bucket{{{labels},le="{float(edge)}"}} {float(count)}')
        lines.append(f'sglang:{name}_bucket{{{labels},le="+Inf"}} {float(h.n)}')
        lines.append(f"sglang:{name}_count{{{labels}}} {float(h.n)}")
        lines.append(f"sglang:{name}_sum{{{labels}}} {h.total}")

    metric("prompt_tokens", "counter", "Number of prefill tokens processed.", st.prompt_tokens)
    metric("generation_tokens", "counter", "Number of generation tokens processed.", st.generation_tokens)
    metric("num_requests", "counter", "Number of requests processed.", st.num_requests)
    metric("cached_tokens", "counter", "Number of cached prompt tokens.", 0)
    if st.aborted:  # a labelled counter: SGLang exports it from the first abort on
        metric("num_aborted_requests", "counter", "Number of requests aborted.", st.aborted)
    metric("num_running_reqs", "gauge", "The number of running requests.", engine.pacer.running)
    metric("num_queue_reqs", "gauge", "The number of requests in the waiting queue.", st.queued)
    metric("gen_throughput", "gauge", "The generation throughput (token/s).", st.gen_throughput)
    metric("token_usage", "gauge", "The token usage.", 0.0)
    metric("cache_hit_rate", "gauge", "The prefix cache hit rate.", 0.0)
    metric("num_retracted_reqs", "gauge", "The number of retracted requests.", 0)
    metric("context_len", "gauge", "The context length.", cfg.context_length)
    metric(
        "realtime_tokens",
        "counter",
        "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
        {"prefill_compute": st.prefilled_tokens, "decode": st.emitted_tokens},
    )
    if cfg.spec:
        accept = st.avg_accept_length() or 0.0
        proposed = cfg.spec_steps
        metric("spec_accept_length", "gauge", "The average acceptance length of speculative decoding.", accept)
        metric(
            "spec_accept_rate",
            "gauge",
            "The average acceptance rate of speculative decoding.",
            (accept - 1) / proposed if accept else 0.0,
        )
        metric("spec_verify_calls", "counter", "Number of speculative verify forwards.", st.spec_verify_calls)
        metric("spec_num_steps", "gauge", "Speculative num steps.", cfg.spec_steps)
        metric("spec_num_draft_tokens", "gauge", "Speculative num draft tokens.", cfg.spec_draft)
    histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", st.ttft)
    histogram("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", st.e2e)
    histogram("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", st.itl)
    return "\n".join(lines) + "\n"
