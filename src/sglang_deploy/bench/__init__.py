"""Benchmark engine for an SGLang OpenAI-compatible server (stdlib only, Python 3.10+).

Shared by the `sglang_bench` Ansible module (shipped as module_utils/sglang_deploy/bench, a symlink to this
folder) and the `sglang-deploy bench` command. Parts: metrics (the pure maths and DEFINITIONS), client
(HTTP/1.1 and SSE for the measured streams), workload (prompts, request body, settings and their defaults),
sweep (the run), table (the text table).

API: run_benchmark(url, **settings) -> result dict; check_settings() and check_dest() refuse unusable input
before anything is sent (ValueError); ServerUnusable when the server cannot be benchmarked. A result's
`stopped` is set when the sweep ended early; its levels are then partly `not run`.
"""

from .client import BENCH_VERSION
from .metrics import DEFINITIONS, Timeline, level_metrics
from .sweep import ServerUnusable, check_dest, run_benchmark, run_benchmark_async, write_result
from .table import format_table
from .workload import (
    DEFAULT_CONCURRENCY,
    DEFAULT_INPUT_LEN,
    DEFAULT_OUTPUT_LEN,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WARMUP,
    check_settings,
    default_requests,
    parse_concurrency,
)

__all__ = [
    "BENCH_VERSION",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_INPUT_LEN",
    "DEFAULT_OUTPUT_LEN",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WARMUP",
    "DEFINITIONS",
    "ServerUnusable",
    "Timeline",
    "check_dest",
    "check_settings",
    "default_requests",
    "format_table",
    "level_metrics",
    "parse_concurrency",
    "run_benchmark",
    "run_benchmark_async",
    "write_result",
]
