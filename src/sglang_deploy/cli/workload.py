"""The benchmark's workload flags, defined once for `sglang-deploy bench` (the engine's settings) and for `deploy` and
`compare` (the sglang_benchmark role's variables, as `-e sglang_benchmark_*` sets them), with bench_serving's names
for the shared concepts."""

from __future__ import annotations

import argparse

from sglang_deploy import bench_vars
from sglang_deploy.host import bench
from sglang_deploy.tune import measures as tune_measures
from sglang_deploy.tune import searchfile


def _parsed(parse):
    """An argparse type from a parser that raises ValueError with the fix."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


def parse_bounds(text: str) -> tuple:
    """'1,16' -> (1.0, 16.0): the SLA search's request rates."""
    parts = text.replace(" ", "").split(",")
    try:
        low, high = (float(x) for x in parts)
    except ValueError as exc:
        raise ValueError(f"bad SLA search bounds {text!r}: give two request rates LOW,HIGH, e.g. 1,16") from exc
    return low, high


def add_options(p: argparse.ArgumentParser, *, playbook: bool = False) -> None:
    """The workload flags. playbook: a flag left out sets nothing (the role's defaults, group_vars and -e apply),
    and the defaults shown are the role's (the same values)."""
    keep = argparse.SUPPRESS if playbook else None
    levels = ",".join(str(c) for c in bench.DEFAULT_CONCURRENCY)
    group = p.add_argument_group("workload (bench_serving's names; docs/benchmark.md)")
    add = _adder(group, keep)
    add(
        "--concurrency",
        type=_parsed(bench.parse_concurrency),
        default=list(bench.DEFAULT_CONCURRENCY),
        help=f"closed-loop levels, comma-separated ({levels}); not used with --request-rate or --sla-search",
    )
    add(
        "--request-rate",
        type=_parsed(bench.parse_rates),
        help="requests per second, one level each, comma-separated (Poisson arrivals; inf sends all at once)",
    )
    add(
        "--max-concurrency",
        type=int,
        help="at most this many requests in flight (with --request-rate / --sla-search; alone: one closed-loop level)",
    )
    add(
        "--requests",
        "--num-prompts",
        dest="requests",
        type=int,
        help="requests per level (default max(8, 2 x concurrency); at a rate 10 s of arrivals, 16 to 1000)",
    )
    add(
        "--dataset-name",
        choices=bench.DATASETS,
        default="random",
        help="random (common-word prompts of --input-len), sharegpt (ShareGPT JSON), custom (JSONL of OpenAI chat "
        "messages, optional max_tokens per line), generated-shared-prefix (groups sharing a long system prompt)",
    )
    add(
        "--dataset-path",
        help="the sharegpt or custom file" + (" on the controller (copied to each host)" if playbook else ""),
    )
    add(
        "--input-len",
        "--random-input-len",
        dest="input_len",
        type=int,
        default=bench.DEFAULT_INPUT_LEN,
        help="prompt length in the server's tokens, about (counted with its /v1/tokenize; one per word where it "
        f"has none) ({bench.DEFAULT_INPUT_LEN})",
    )
    add(
        "--output-len",
        "--random-output-len",
        "--gsp-output-len",
        dest="output_len",
        type=int,
        default=bench.DEFAULT_OUTPUT_LEN,
        help=f"output tokens, forced as bench_serving does (ignore_eos and max_tokens) and verified against "
        f"usage; custom lines without max_tokens take it ({bench.DEFAULT_OUTPUT_LEN})",
    )
    add(
        "--random-range-ratio",
        type=float,
        default=bench.DEFAULT_RANGE_RATIO,
        help="lengths drawn uniformly from [length x ratio, length], bench_serving's convention "
        f"({bench.DEFAULT_RANGE_RATIO:g}: fixed; bench_serving's default is 0)",
    )
    add("--seed", type=int, default=bench.DEFAULT_SEED, help=f"prompts, order and arrivals ({bench.DEFAULT_SEED})")
    add("--sharegpt-output-len", type=int, help="sharegpt: this output length instead of the answer's")
    for name, default in bench.dataset.GSP_DEFAULTS.items():
        add(f"--gsp-{name.replace('_', '-')}", type=int, default=default, help=f"({default})")
    add(
        "--slo",
        type=_parsed(bench.parse_slo),
        help="limits each level is judged by, e.g. ttft_p99_ms=2000,tpot_p99_ms=50 (ttft|tpot|itl|e2e, "
        "mean|p50|p90|p95|p99); goodput counts the requests meeting all",
    )
    add(
        "--sla-search",
        type=_parsed(parse_bounds),
        metavar="LOW,HIGH",
        help="find the highest request rate between LOW and HIGH whose level meets every --slo (bisection)",
    )
    add(
        "--sla-search-steps",
        type=int,
        default=bench.DEFAULT_SLA_STEPS,
        help=f"bisections after the two bounds ({bench.DEFAULT_SLA_STEPS})",
    )
    add(
        "--min-tokens",
        action="store_true",
        default=False,
        help="also send min_tokens = output length, for a server that stops early despite ignore_eos (SGLang then "
        "runs its min-new-tokens penalizer on every step: slower decoding, not comparable with bench_serving)",
    )
    add(
        "--warmup",
        type=int,
        default=bench.DEFAULT_WARMUP,
        help=f"uncounted warm-up requests, once before the first level ({bench.DEFAULT_WARMUP})",
    )


def _adder(group, keep):
    def add(*flags, default=None, **kw):
        group.add_argument(*flags, default=keep or default, **kw)

    return add


def settings(args: argparse.Namespace) -> dict:
    """The engine's workload settings the command line gave (bench: all of them, defaults included; deploy and
    compare: those given), min_tokens among them. gsp: the --gsp-* values given, as one mapping."""
    names = [k for k in bench.WORKLOAD_DEFAULTS if k not in ("gsp", "timeout")] + ["min_tokens"]
    out = {k: getattr(args, k) for k in names if hasattr(args, k)}
    gsp = {k: getattr(args, f"gsp_{k}") for k in bench.dataset.GSP_DEFAULTS if hasattr(args, f"gsp_{k}")}
    if gsp:
        out["gsp"] = gsp
    return out


def role_vars(extravars: dict, given: dict) -> dict:
    """The extra variables of a deploy or compare: ``extravars`` (-e) with the workload flags ``given`` (settings())
    as sglang_benchmark_* variables over them. The workload they make together (the engine's defaults for the
    rest) is checked first: ValueError naming the fix (a rate <= 0, --max-concurrency 0, an SLO on an unknown
    metric, a dataset file that is missing or unusable...). A dataset file is on the controller: a relative path is
    made absolute, as the role copies it to each host."""
    merged = bench_vars.settings_of(extravars)
    if "gsp" in given:  # the --gsp-* flags given, over a -e mapping
        given = {**given, "gsp": {**(merged.get("gsp") or {}), **given["gsp"]}}
    merged.update(given)
    check = {k: v for k, v in merged.items() if k != "min_tokens"}
    try:
        bench.check_workload(**check)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"benchmark workload: {exc}") from exc
    out = {**extravars, **bench_vars.role_vars(given)}
    if merged.get("dataset_path"):
        out[bench_vars.ROLE_PREFIX + "dataset_path"] = bench_vars.controller_path(merged["dataset_path"])
    return out


def tune_workload(settings: dict) -> tune_measures.Workload:
    """The engine's workload ``settings`` (bench_vars.settings_of's) as tune's Workload, normalised as a search
    file's workload is (rates as numbers, levels sorted, the dataset path absolute); the engine's defaults for the
    settings not given. searchfile.SearchError naming the fix."""
    raw = {k: v for k, v in settings.items() if k in tune_measures.WORKLOAD_KEYS and v is not None}
    if "concurrency" not in raw and "request_rate" not in raw and "sla_search" not in raw:
        raw["concurrency"] = list(bench.DEFAULT_CONCURRENCY)
    return searchfile._workload(raw, "workload")


def measures(extravars: dict, objectives: list, limits: list) -> tuple[list, list]:
    """compare's --objective and --require texts as tune's Objective and Limit, checked against the workload of
    ``extravars`` (role_vars' result): ValueError naming the fix (an unknown metric, a level the workload does not
    run, goodput or the SLA rate without SLOs, the SLA rate without an SLA search)."""
    if not objectives and not limits:
        return [], []
    try:
        work = tune_workload(bench_vars.settings_of(extravars))
        return (
            [searchfile.objective(tune_measures.parse_measure(t), f"--objective {t}", work) for t in objectives],
            [searchfile.limit(tune_measures.parse_measure(t, bounded=True), f"--require {t}", work) for t in limits],
        )
    except searchfile.SearchError as exc:
        raise ValueError(f"{exc} (the workload's flags: --concurrency, --request-rate, --slo, --sla-search)") from exc
