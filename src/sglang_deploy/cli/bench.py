"""`sglang-deploy bench`: a concurrency sweep against a running server (engine: sglang_deploy.bench)."""

from __future__ import annotations

import argparse
import os
import sys

from sglang_deploy.host import bench
from sglang_deploy.cli.errors import UsageError
from sglang_deploy.host.server_http import Endpoint, check_api_key


def _parsed(parse):
    """An argparse type from a parser that raises ValueError with the fix."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


def _bounds(text: str) -> tuple:
    """'1,16' -> (1.0, 16.0): the SLA search's request rates."""
    parts = text.replace(" ", "").split(",")
    try:
        low, high = (float(x) for x in parts)
    except ValueError as exc:
        raise ValueError(f"bad SLA search bounds {text!r}: give two request rates LOW,HIGH, e.g. 1,16") from exc
    return low, high


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
    levels = ",".join(str(c) for c in bench.DEFAULT_CONCURRENCY)
    p.add_argument("--url", required=True, help="server base URL, e.g. http://10.0.0.5:30000")
    p.add_argument(
        "--concurrency",
        type=_parsed(bench.parse_concurrency),
        default=list(bench.DEFAULT_CONCURRENCY),
        help=f"closed-loop levels, comma-separated ({levels}); not used with --request-rate or --sla-search",
    )
    p.add_argument(
        "--request-rate",
        type=_parsed(bench.parse_rates),
        help="requests per second, one level each, comma-separated (Poisson arrivals; inf sends all at once)",
    )
    p.add_argument(
        "--max-concurrency",
        type=int,
        help="at most this many requests in flight (with --request-rate / --sla-search; alone: one closed-loop level)",
    )
    p.add_argument(
        "--requests",
        "--num-prompts",
        dest="requests",
        type=int,
        help="requests per level (default max(8, 2 x concurrency); at a rate 10 s of arrivals, 16 to 1000)",
    )
    p.add_argument(
        "--dataset-name",
        choices=bench.DATASETS,
        default="random",
        help="random (common-word prompts of --input-len), sharegpt (ShareGPT JSON), custom (JSONL of OpenAI chat "
        "messages, optional max_tokens per line), generated-shared-prefix (groups sharing a long system prompt)",
    )
    p.add_argument("--dataset-path", help="the sharegpt or custom file")
    p.add_argument(
        "--input-len",
        "--random-input-len",
        dest="input_len",
        type=int,
        default=bench.DEFAULT_INPUT_LEN,
        help="prompt length in the server's tokens, about (counted with its /v1/tokenize; one per word where it "
        f"has none) ({bench.DEFAULT_INPUT_LEN})",
    )
    p.add_argument(
        "--output-len",
        "--random-output-len",
        "--gsp-output-len",
        dest="output_len",
        type=int,
        default=bench.DEFAULT_OUTPUT_LEN,
        help=f"output tokens, forced as bench_serving does (ignore_eos and max_tokens) and verified against "
        f"usage; custom lines without max_tokens take it ({bench.DEFAULT_OUTPUT_LEN})",
    )
    p.add_argument(
        "--random-range-ratio",
        type=float,
        default=bench.DEFAULT_RANGE_RATIO,
        help="lengths drawn uniformly from [length x ratio, length], bench_serving's convention "
        f"({bench.DEFAULT_RANGE_RATIO:g}: fixed; bench_serving's default is 0)",
    )
    p.add_argument(
        "--seed", type=int, default=bench.DEFAULT_SEED, help=f"prompts, order and arrivals ({bench.DEFAULT_SEED})"
    )
    p.add_argument("--sharegpt-output-len", type=int, help="sharegpt: this output length instead of the answer's")
    for name, default in bench.dataset.GSP_DEFAULTS.items():
        p.add_argument(f"--gsp-{name.replace('_', '-')}", type=int, default=default, help=f"({default})")
    p.add_argument(
        "--slo",
        type=_parsed(bench.parse_slo),
        help="limits each level is judged by, e.g. ttft_p99_ms=2000,tpot_p99_ms=50 (ttft|tpot|itl|e2e, "
        "mean|p50|p90|p95|p99); goodput counts the requests meeting all",
    )
    p.add_argument(
        "--sla-search",
        type=_parsed(_bounds),
        metavar="LOW,HIGH",
        help="find the highest request rate between LOW and HIGH whose level meets every --slo (bisection)",
    )
    p.add_argument(
        "--sla-search-steps",
        type=int,
        default=bench.DEFAULT_SLA_STEPS,
        help=f"bisections after the two bounds ({bench.DEFAULT_SLA_STEPS})",
    )
    p.add_argument(
        "--min-tokens",
        action="store_true",
        help="also send min_tokens = output length, for a server that stops early despite ignore_eos (SGLang then "
        "runs its min-new-tokens penalizer on every step: slower decoding, not comparable with bench_serving)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=bench.DEFAULT_WARMUP,
        help=f"uncounted warm-up requests, once before the first level ({bench.DEFAULT_WARMUP})",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=bench.DEFAULT_TIMEOUT_S,
        help=f"seconds a request or probe may wait for the server; the first request past it stops the "
        f"sweep ({bench.DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    p.add_argument("--model", help="served model name (default: from /server_info or /v1/models)")
    p.add_argument("--json", metavar="FILE", help="write the result JSON here")
    p.set_defaults(func=run)


def _workload(args: argparse.Namespace) -> dict:
    """The engine's workload settings from the command line."""
    return {
        "concurrency": args.concurrency,
        "requests": args.requests,
        "input_len": args.input_len,
        "output_len": args.output_len,
        "warmup": args.warmup,
        "timeout": args.timeout,
        "dataset_name": args.dataset_name,
        "dataset_path": args.dataset_path,
        "random_range_ratio": args.random_range_ratio,
        "seed": args.seed,
        "sharegpt_output_len": args.sharegpt_output_len,
        "gsp": {name: getattr(args, f"gsp_{name}") for name in bench.dataset.GSP_DEFAULTS},
        "request_rate": args.request_rate,
        "max_concurrency": args.max_concurrency,
        "slo": args.slo,
        "sla_search": args.sla_search,
        "sla_search_steps": args.sla_search_steps,
    }


def _checked(args: argparse.Namespace) -> str | None:
    """The API key; UsageError for anything unusable, before a request is sent."""
    try:
        Endpoint.parse(args.url)
        bench.check_workload(**_workload(args))
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
            min_tokens=args.min_tokens,
            **_workload(args),
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
