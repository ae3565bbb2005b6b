"""`sglang-deploy bench`: a concurrency sweep against a running server (engine: sglang_deploy.bench)."""

from __future__ import annotations

import argparse
import os
import sys

from sglang_deploy import bench
from sglang_deploy.bench.client import Target
from sglang_deploy.cli.errors import UsageError


def _levels(text: str) -> list:
    try:
        return bench.parse_concurrency(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark a running SGLang server over a concurrency sweep",
        description="Concurrency sweep against an SGLang OpenAI-compatible server; prints the "
        "table, writes the JSON result (formulas in its `definitions`).",
    )
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.0.5:30000")
    p.add_argument("--concurrency", type=_levels, default=[1, 8, 32], help="comma-separated levels (1,8,32)")
    p.add_argument("--requests", type=int, help="requests per level (default max(8, 2 x concurrency))")
    p.add_argument("--input-len", type=int, default=1024, help="prompt length in tokens, about (1024)")
    p.add_argument("--output-len", type=int, default=512, help="output tokens, forced and verified (512)")
    p.add_argument("--warmup", type=int, default=2, help="uncounted warm-up requests (2)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request (600)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--model", help="served model name (default: from /server_info or /v1/models)")
    p.add_argument("--json", metavar="FILE", help="write the result JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the table, write the JSON when asked. 1 when any request failed."""
    try:
        Target.from_url(args.url)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if args.api_key_env and args.api_key_env not in os.environ:
        raise UsageError(f"environment variable {args.api_key_env} is not set")
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    try:
        result = bench.run_benchmark(
            args.url,
            api_key=api_key,
            model=args.model,
            concurrency=args.concurrency,
            requests=args.requests,
            input_len=args.input_len,
            output_len=args.output_len,
            warmup=args.warmup,
            timeout=args.timeout,
            context={"invoked_by": "sglang-deploy bench"},
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except (OSError, bench.HttpError) as exc:
        print(f"sglang-deploy bench: {exc}", file=sys.stderr)
        return 1
    print(bench.format_table(result))
    if args.json:
        print(f"wrote {bench.write_result(result, args.json)}")
    bad = any(m["failed"] or m["output_len_mismatch"]["count"] for m in result["levels"])
    return 1 if bad else 0
