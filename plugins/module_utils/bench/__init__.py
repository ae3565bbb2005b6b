"""Benchmark engine for an SGLang OpenAI-compatible server (stdlib only, Python 3.10+).

Shared by the `sglang_bench` Ansible module (shipped as plugins/module_utils/bench, through the link to the host
folder) and the `sglang-deploy bench` command. Parts: metrics (the pure maths and DEFINITIONS), client
(HTTP/1.1 and SSE for the measured streams), workload (prompts, request body, the table of the workload
settings: WORKLOAD), sweep (the run), table (the text table), dataset (the workloads: random, sharegpt, custom,
generated-shared-prefix).

API: run_benchmark(url, **settings) -> result dict; check_workload() and check_dest() refuse unusable input
before anything is sent (ValueError); ServerUnusable when the server cannot be benchmarked. A result's
`stopped` is set when the sweep ended early; its levels are then partly `not run`.
"""

from .client import BENCH_VERSION
from .metrics import DEFINITIONS, Timeline, level_metrics
from ..files import check_dest
from .sweep import ServerUnusable, check_workload, run_benchmark, run_benchmark_async, write_result
from .table import format_table
from .workload import (
    ARRIVALS,
    DATASETS,
    GSP_DEFAULTS,
    WORKLOAD,
    ansible_options,
    arrivals,
    check_settings,
    default_requests,
    parse_concurrency,
    parse_rates,
    parse_slo,
)

__all__ = [
    "ARRIVALS",
    "BENCH_VERSION",
    "DATASETS",
    "DEFINITIONS",
    "GSP_DEFAULTS",
    "WORKLOAD",
    "ServerUnusable",
    "Timeline",
    "ansible_options",
    "arrivals",
    "check_dest",
    "check_settings",
    "check_workload",
    "default_requests",
    "format_table",
    "level_metrics",
    "parse_concurrency",
    "parse_rates",
    "parse_slo",
    "run_benchmark",
    "run_benchmark_async",
    "write_result",
]
