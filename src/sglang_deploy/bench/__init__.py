"""Benchmark engine for an SGLang OpenAI-compatible server (stdlib only, Python 3.10+).

Shared by the `sglang_bench` Ansible module (shipped as module_utils/sglang_deploy/bench, a symlink to this
folder) and the `sglang-deploy bench` command. Parts: metrics (the pure maths and DEFINITIONS), client
(HTTP/1.1 and SSE), workload (prompts, request body, defaults), sweep (the run), table (the text table).
"""

from .client import BENCH_VERSION, HttpError
from .metrics import DEFINITIONS, Timeline, level_metrics
from .sweep import run_benchmark, run_benchmark_async, write_result
from .table import format_table
from .workload import parse_concurrency

__all__ = [
    "BENCH_VERSION",
    "DEFINITIONS",
    "HttpError",
    "Timeline",
    "format_table",
    "level_metrics",
    "parse_concurrency",
    "run_benchmark",
    "run_benchmark_async",
    "write_result",
]
