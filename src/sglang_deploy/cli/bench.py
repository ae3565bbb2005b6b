"""`sglang-deploy bench`: a concurrency sweep against a running server (engine: sglang_deploy.bench)."""

from __future__ import annotations

import argparse
import os
import sys

from ansible_collections.sglang.deploy.plugins.module_utils import bench
from sglang_deploy.cli import workload
from sglang_deploy.cli.errors import UsageError
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import Endpoint, check_api_key


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark a running SGLang server: a concurrency or request-rate sweep, or the highest rate under an SLA",
        description="Benchmark an SGLang OpenAI-compatible server: /health first, a warm-up, then per level a fixed "
        "number of streamed requests, closed-loop at each --concurrency (default) or arriving at each --request-rate "
        "(Poisson), or an SLA search (--slo and --sla-search). Prompts from --dataset-name (bench_serving's names). "
        "Prints the table, writes the JSON result (formulas in its `definitions`). Exit 0 when every request "
        "completed with the forced length and plausible text; 1 when anything failed (the levels measured so far "
        "are still printed and written); 2 for unusable input, before any generation request.",
    )
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.0.5:30000")
    workload.add_options(p)
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--model", help="served model name (default: from /server_info or /v1/models)")
    p.add_argument("--json", metavar="FILE", help="write the result JSON here")
    p.add_argument(
        "--output-details",
        action="store_true",
        help="each level's requests in the JSON too: send time, TTFT, E2E, output tokens, error (bench_serving's "
        "name): where a tail comes from",
    )
    p.set_defaults(func=run)


def _checked(args: argparse.Namespace) -> str | None:
    """The API key; UsageError for anything unusable, before a request is sent."""
    if args.output_details and not args.json:
        raise UsageError("--output-details writes each request into the JSON result: give --json FILE too")
    try:
        Endpoint.parse(args.url)
        bench.check_workload(**workload.settings(args))
        if args.json:
            bench.check_dest(args.json)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if not args.api_key_env:
        return None
    if args.api_key_env not in os.environ:
        raise UsageError(f"environment variable {args.api_key_env} is not set")
    api_key = os.environ[args.api_key_env]
    try:
        check_api_key(api_key)
    except ValueError as exc:
        raise UsageError(f"{args.api_key_env}: {exc}") from exc
    return api_key


def run(args: argparse.Namespace) -> int:
    """Print the table, write the JSON when asked. 1 when the server could not be benchmarked or anything
    failed, 2 for unusable input."""
    api_key = _checked(args)
    try:
        result = bench.run_benchmark(
            args.url,
            api_key=api_key,
            model=args.model,
            output_details=args.output_details,
            **workload.settings(args),
            context={"invoked_by": "sglang-deploy bench"},
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except bench.ServerUnusable as exc:
        print(f"sglang-deploy bench: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # the dataset does not fit the server's context
        raise UsageError(str(exc)) from exc
    print(bench.format_table(result))
    if args.json:
        print(f"wrote {bench.write_result(result, args.json)}")
    bad = result["stopped"] or any(
        m["failed"] or m["output_len_mismatch"]["count"] or m["output_check"]["count"] for m in result["levels"]
    )
    return 1 if bad else 0
