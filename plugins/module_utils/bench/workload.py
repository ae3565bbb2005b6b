"""What the benchmark sends: deterministic prompts, the forced-length request body, requests per level; the table of
the workload settings (WORKLOAD) and their checks."""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from .metrics import slo_name

SEED_MAX = 2**32 - 1  # numpy's legacy seeding (bench_serving's np.random.seed) takes 0 to 2**32 - 1
MAX_LEN_TOKENS = 1 << 21  # a prompt or an output length: twice the longest context served (1M tokens)
MAX_TIMEOUT_S = 7 * 24 * 3600  # a week; 1e10 s overflowed the socket and asyncio timeouts (an OverflowError)
DATASETS = ("random", "sharegpt", "custom", "generated-shared-prefix", "trace")  # bench_serving's names; trace:
# its mooncake dataset replayed at the trace's timestamps (host/bench/trace.py)


def chat_body(model: str | None, prompt, output_len: int, stream: bool = True, min_tokens: bool = False) -> dict:
    """Request body (prompt: a text or chat messages) forcing output_len tokens at temperature 0 as bench_serving
    does: ignore_eos and the token cap. min_tokens only when asked (for servers that stop early despite
    ignore_eos): SGLang then runs its min-new-tokens penalizer on every decode step, which slows decoding."""
    body = {
        "messages": [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt),
        "max_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
    if min_tokens:
        body["min_tokens"] = output_len
    if stream:
        body["stream_options"] = {"include_usage": True}
    if model:
        body["model"] = model
    return body


_WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book "
    "eye job word business issue side kind head house service friend father power hour game line "
    "end member law car city name team minute idea kid body back parent face others level office "
    "door health person art war history party result change morning reason research girl guy moment "
    "air teacher force education"
).split()


def build_prompt(index: int, input_len: int) -> str:
    """A deterministic prompt of about input_len tokens (one common word ~ one token), unique per index
    at its start so the server's prefix cache cannot serve it from an earlier request."""
    words = [f"Request {index}: write a long essay using these words:"]
    n = max(0, input_len - 10)
    state = (index * 2654435761 + 12345) & 0xFFFFFFFF
    for _unused in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        words.append(_WORDS[state % len(_WORDS)])
    return " ".join(words)


def words(rng, n: int) -> str:
    """n common words drawn with rng (random.Random)."""
    return " ".join(rng.choice(_WORDS) for _unused in range(n))


def default_requests(concurrency: int) -> int:
    """Requests per level when none are given: twice the concurrency, at least 8."""
    return max(8, 2 * concurrency)


def parse_concurrency(text: str) -> list:
    """'1,8,32' -> [1, 8, 32]; ValueError on anything else."""
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise ValueError(f"bad concurrency list {text!r}: give positive integers separated by commas, e.g. 1,8,32")
    return levels


@dataclass(frozen=True)
class Level:
    """One measured level: at most `concurrency` requests in flight (None: no cap), new ones arriving at
    `rate` per second (Poisson; inf: all at once). The closed-loop sweep's level c is Level(c, inf), which is
    what bench_serving runs with --max-concurrency c and the default --request-rate inf."""

    concurrency: int | None
    rate: float = math.inf
    trace: int = 0  # > 0: a trace's replay of this many requests, at its arrival times (the rate is not used)

    @property
    def label(self) -> str:
        if self.trace:
            return "trace" + (f" (c<={self.concurrency})" if self.concurrency else "")
        if math.isinf(self.rate):
            return f"c={self.concurrency}" if self.concurrency else "all at once"
        return f"{self.rate:g} req/s" + (f" (c<={self.concurrency})" if self.concurrency else "")

    def default_requests(self) -> int:
        """Requests when none are given: max(8, 2 x concurrency) closed-loop; 10 s of arrivals (16 to 1000) at a
        rate; 64 all at once; a trace's replay: its requests."""
        if self.trace:
            return self.trace
        if math.isinf(self.rate):
            return default_requests(self.concurrency) if self.concurrency else 64
        return max(16, min(1000, math.ceil(10 * self.rate)))


def parse_rates(text: str) -> list:
    """'1,2.5,inf' -> [1.0, 2.5, inf] (requests per second); ValueError naming the fix for anything else."""
    try:
        rates = [float(x) for x in str(text).replace(" ", "").split(",") if x]
    except ValueError:
        rates = []
    if not rates or not all(r > 0 for r in rates):  # also refuses NaN
        raise ValueError(f"bad request rate {text!r}: give requests per second above 0, e.g. 2 or 1,2,4 or inf")
    named = {}  # results name a level by its rate to 6 significant digits (Level.label, level_key)
    for r in rates:
        label = Level(None, r).label
        if label in named:
            raise ValueError(
                f"request rates {named[label]!r} and {r!r} are one level {label!r} (a level is named by its rate "
                "to 6 significant digits): give each rate once, differing within 6 digits"
            )
        named[label] = r
    return rates


def parse_slo(text: str) -> dict:
    """'ttft_p99_ms=2000,tpot_p99_ms=50' -> {name: limit}; ValueError naming the known metrics or the bad limit."""
    slo = {}
    for item in str(text).replace(" ", "").split(","):
        if item:
            name, sep, value = item.partition("=")
            slo[name] = value if sep else None
    return check_slo(slo)


def check_slo(slo) -> dict:
    """{name: limit ms} with the limits as floats; ValueError naming the known metrics or the bad limit."""
    if not isinstance(slo, dict) or not slo:
        raise ValueError("no SLO given: e.g. ttft_p99_ms=2000,tpot_p99_ms=50")
    out = {}
    for name, value in slo.items():
        slo_name(name)
        try:
            limit = math.nan if isinstance(value, bool) or value is None else float(value)
        except (TypeError, ValueError):
            limit = math.nan
        if not 0 < limit < math.inf:
            raise ValueError(f"SLO {name}: give a positive number of milliseconds, e.g. {name}=2000")
        out[name] = limit
    return out


def parse_bounds(text: str) -> list:
    """'1,16' -> [1.0, 16.0]: the SLA search's request rates LOW,HIGH; ValueError naming the form."""
    try:
        low, high = (float(x) for x in str(text).replace(" ", "").split(","))
    except ValueError as exc:
        raise ValueError(f"bad SLA search bounds {text!r}: give two request rates LOW,HIGH, e.g. 1,16") from exc
    return [low, high]


# How a rate level's arrivals are drawn (results' workload.arrivals; compare refuses to rank other draws).
ARRIVALS = "bench_serving: np.random.seed(seed), np.random.exponential(1 / rate)"


def arrival_gaps(seed: int, rate: float) -> Iterator[float]:
    """The gaps in seconds between a rate level's arrivals, as `sglang.bench_serving --seed SEED --request-rate
    RATE` draws them (np.random.seed(SEED), then np.random.exponential(1 / RATE) per gap): same seed, same arrival
    times, so a level's duration and output tok/s compare with bench_serving's. numpy's legacy seeding of a 32-bit
    seed is MT19937's init_genrand, and its doubles are Python's random() (both genrand_res53), so Python's
    Mersenne Twister set to that state draws the same numbers. (bench_serving's random and generated-shared-prefix
    datasets draw their lengths from numpy first when --random-range-ratio is below 1, which moves its gaps.)"""
    state = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        prev = state[-1]
        state.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, (*state, 624), None))
    scale = 1.0 / rate
    while True:
        yield scale * -math.log(1.0 - rng.random())


def arrivals(rates, sla_search) -> str | None:
    """What a workload records of its arrivals (results' workload.arrivals, tune's run key): ARRIVALS where gaps
    are drawn (a finite rate, an SLA search), None where every level sends all at once or keeps a concurrency."""
    return ARRIVALS if sla_search or any(math.isfinite(float(r)) for r in rates) else None


class Bounds(NamedTuple):
    """The numbers a setting takes: low <= x <= high (None: no bound; above: low < x). A float is finite unless
    high is math.inf."""

    low: float | None = None
    high: float | None = None
    above: bool = False


@dataclass(frozen=True)
class Setting:
    """One workload setting: its value's type (Ansible's names; elements: a list's), its default (None: not set),
    the numbers it takes (bounds) or the values (choices), the sub-settings of a mapping (options: name -> default,
    whole numbers), and its help (the module's documentation, the command line's help, tune's knobs). For the
    command line: parse (its text to the value; default: the type's), metavar and other flags (bench_serving's)."""

    type: str
    default: Any
    help: str
    elements: str | None = None
    bounds: Bounds | None = None
    choices: tuple | None = None
    options: dict | None = None
    parse: Callable | None = None
    metavar: str | None = None
    flags: tuple = ()


GSP_DEFAULTS = {"num_groups": 64, "prompts_per_group": 16, "system_prompt_len": 2048, "question_len": 128}

# The one table of the workload settings: run_benchmark's keyword arguments, the sglang_bench module's `workload`
# (argument spec and documentation), the command line's workload flags, the sglang_benchmark role's
# sglang_benchmark_<name> variables and tune's search-file workload all come from it (a test holds the role to it).
WORKLOAD = {
    "concurrency": Setting(
        "list",
        (1, 8, 32),
        "closed-loop levels, run in this order: at most this many requests in flight, a new one as one ends; not "
        "used with request_rate or sla_search",
        elements="int",
        parse=parse_concurrency,
        metavar="N[,N...]",
    ),
    "request_rate": Setting(
        "list",
        None,
        "request rates per second, one level each, instead of the concurrency levels: Poisson arrivals (bench_serving's "
        "for the same seed), inf sends all at once",
        elements="float",
        parse=parse_rates,
        metavar="RATE[,RATE...]",
    ),
    "max_concurrency": Setting(
        "int",
        None,
        "at most this many requests in flight at a rate or in the SLA search; alone, the one closed-loop level of "
        "that concurrency",
        bounds=Bounds(1),
    ),
    "requests": Setting(
        "int",
        None,
        "requests per level; none: max(8, 2 x concurrency) closed-loop, 10 s of arrivals at a rate (16 to 1000), "
        "64 all at once",
        bounds=Bounds(1),
        flags=("--num-prompts",),
    ),
    "dataset_name": Setting(
        "str",
        "random",
        "the prompts, by bench_serving's names: random (common-word prompts of input_len), sharegpt (the ShareGPT "
        'JSON list at dataset_path), custom (JSONL at dataset_path, one {"messages": [...], "max_tokens": N} '
        "a line, max_tokens optional), generated-shared-prefix (groups sharing a long system prompt: gsp), trace "
        "(bench_serving's Mooncake trace JSONL at dataset_path replayed at its timestamps: trace_time_scale, "
        "trace_loops; requests cuts it)",
        choices=DATASETS,
    ),
    "dataset_path": Setting(
        "path",
        None,
        "the sharegpt, custom or trace file, its sha256 recorded (the role copies it from the controller to each host)",
    ),
    "input_len": Setting(
        "int",
        256,
        "prompt length in the server's tokens, about (counted with its /v1/tokenize, one a word where it has none; "
        "the chat template adds a few)",
        bounds=Bounds(1, MAX_LEN_TOKENS),
        flags=("--random-input-len",),
    ),
    "output_len": Setting(
        "int",
        256,
        "output tokens of each request, forced as bench_serving does (ignore_eos and max_tokens) and verified "
        "against the server's usage; custom lines without max_tokens take it",
        bounds=Bounds(2, MAX_LEN_TOKENS),
        flags=("--random-output-len", "--gsp-output-len"),
    ),
    "random_range_ratio": Setting(
        "float",
        1.0,
        "lengths drawn uniformly from [length x ratio, length], bench_serving's convention (1: fixed; "
        "bench_serving's default is 0)",
        bounds=Bounds(0, 1),
    ),
    "seed": Setting(
        "int",
        42,
        "seed of the prompts, their order and the arrivals (bench_serving's arrival times for the same seed)",
        bounds=Bounds(0, SEED_MAX),
    ),
    "sharegpt_output_len": Setting(
        "int", None, "sharegpt: this output length instead of each answer's", bounds=Bounds(2, MAX_LEN_TOKENS)
    ),
    "gsp": Setting(
        "dict",
        None,
        "generated-shared-prefix: num_groups groups of prompts_per_group prompts, each a system prompt of "
        "system_prompt_len tokens shared in its group and a question of question_len; the output length is "
        "output_len",
        options=GSP_DEFAULTS,
    ),
    "trace_time_scale": Setting(
        "float",
        1.0,
        "trace: its arrival times x this (bench_serving's --mooncake-slowdown-factor: 2 replays twice as slow)",
        bounds=Bounds(0, 1000, above=True),
    ),
    "trace_loops": Setting(
        "int",
        1,
        "trace: replayed this many times in a row, each loop after the last one's span and one mean gap",
        bounds=Bounds(1, 1000),
    ),
    "slo": Setting(
        "dict",
        None,
        "limits in ms by metric (ttft, tpot, itl, e2e x mean, p50, p90, p95, p99), e.g. ttft_p99_ms 2000 and "
        "tpot_p99_ms 50: each level gets its verdict, goodput counts the requests meeting all",
        parse=parse_slo,
        metavar="NAME=MS[,NAME=MS...]",
    ),
    "sla_search": Setting(
        "list",
        None,
        "two request rates LOW and HIGH: the levels are then a search for the highest rate between them whose level "
        "meets every slo (bisection)",
        elements="float",
        parse=parse_bounds,
        metavar="LOW,HIGH",
    ),
    "sla_search_steps": Setting("int", 5, "bisections of the SLA search after its two bounds", bounds=Bounds(1, 20)),
    "min_tokens": Setting(
        "bool",
        False,
        "also send min_tokens = the output length, for a server that stops early despite ignore_eos (SGLang then "
        "runs its min-new-tokens penalizer on every decode step: slower decoding, not comparable with bench_serving)",
    ),
    "warmup": Setting("int", 2, "uncounted warm-up requests, once before the first level", bounds=Bounds(0)),
    "timeout": Setting(
        "float",
        600.0,
        "seconds a request or a probe may wait for the server; the first request past it stops its level and the "
        "sweep (a hung server is noticed within about this time)",
        bounds=Bounds(0, MAX_TIMEOUT_S, above=True),
    ),
}


def check_settings(**settings) -> tuple[dict, list]:
    """(the settings with the table's defaults filled in for those not given or None, numbers of their type (a
    string of digits too, as Ansible's int and float types take it), rates and SLO limits as floats; the levels to
    run (Level list; empty for an SLA search, whose levels depend on what it measures)). ValueError naming the
    setting and the fix for anything unusable. Closed-loop concurrency levels unless request_rate (rates, one
    level each, capped by max_concurrency) or sla_search ((low, high) rates) is given; max_concurrency alone is
    the one closed-loop level of that concurrency."""
    unknown = sorted(set(settings) - set(WORKLOAD), key=str)
    if unknown:
        raise ValueError(f"unknown benchmark setting {unknown[0]!r}: use {', '.join(WORKLOAD)}")
    w = {name: s.default for name, s in WORKLOAD.items()} | {k: v for k, v in settings.items() if v is not None}
    problems = []
    for name, s in WORKLOAD.items():
        try:
            w[name] = _checked(name, s, w[name])
        except ValueError as exc:
            problems.append(str(exc))
    if w["slo"]:
        w["slo"] = check_slo(w["slo"])
    levels = _levels(w["concurrency"], w["request_rate"], w["max_concurrency"])
    if w["dataset_name"] == "trace":  # its one level, of the trace's length, once the file is read
        levels = []
        if w["request_rate"] is not None or w["sla_search"] is not None:
            problems.append("a trace sets its own arrivals: give no request rates nor SLA search with dataset trace")
    elif w["sla_search"] is not None:
        problems += _sla_search_problems(w)
        levels = []
    if problems:
        raise ValueError("; ".join(problems))
    return w, levels


def _checked(name: str, s: Setting, value):
    """A setting's value (None: not set) checked against the table: its choices, its bounds (_number), the keys of
    a mapping with options; ValueError naming the fix."""
    if value is None:
        return None
    if s.choices and value not in s.choices:
        raise ValueError(f"{name} must be one of {', '.join(s.choices)}, got {value!r}")
    if s.options:
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a mapping of {', '.join(s.options)}, got a {type(value).__name__}")
        unknown = sorted(set(value) - set(s.options), key=str)
        if unknown:
            raise ValueError(f"unknown {name} setting {unknown[0]!r}: use {', '.join(s.options)}")
    return _number(name, s, value) if s.bounds else value


def _number(name: str, s: Setting, value):
    """value as the setting's type (a string too, as Ansible's int and float types take it), within its bounds;
    ValueError naming them."""
    low, high, above = s.bounds
    whole = s.type == "int"
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = int(value) if whole else float(value)
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ValueError(f"{name} must be {'a whole number' if whole else 'a number'} {span}, got {value!r}")
    if low is not None and not (low < value or (low == value and not above)):
        raise ValueError(f"{name} must be {'above' if above else 'at least'} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high}, got {value!r}")
    if not whole and high is None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value if whole else float(value)


def _levels(concurrency, request_rate, max_concurrency: int | None) -> list:
    """check_settings' levels before an SLA search: one per rate, the one max_concurrency, or one per concurrency."""
    if request_rate is not None:
        rates = parse_rates(",".join(map(str, request_rate)) if isinstance(request_rate, list) else request_rate)
        return [Level(max_concurrency, r) for r in rates]
    if max_concurrency is not None:
        return [Level(max_concurrency)]
    try:
        levels = [Level(int(c)) for c in concurrency]
    except (TypeError, ValueError):
        levels = []
    if not levels or min(lv.concurrency for lv in levels) < 1:
        raise ValueError(f"concurrency must be a list of positive integers, got {concurrency!r}")
    return levels


def _sla_search_problems(w: dict) -> list[str]:
    problems = []
    if w["request_rate"] is not None:
        problems.append("give either request rates or an SLA search, not both")
    if not w["slo"]:
        problems.append("an SLA search needs SLOs, e.g. --slo ttft_p99_ms=2000,tpot_p99_ms=50")
    try:
        low, high = (float(x) for x in w["sla_search"])
    except (TypeError, ValueError):
        low = high = math.nan
    if not 0 < low < high < math.inf:
        problems.append(
            f"the SLA search needs two finite request rates LOW,HIGH with 0 < LOW < HIGH, got {w['sla_search']!r}"
        )
    return problems


def ansible_options(documented: bool = False) -> dict:
    """WORKLOAD as the suboptions of an Ansible argument spec: the sglang_bench module's `workload` option and,
    documented (with their descriptions), its documentation (plugins/doc_fragments/bench_workload.py)."""
    out = {}
    for name, s in WORKLOAD.items():
        spec = {"type": s.type, "default": list(s.default) if isinstance(s.default, tuple) else s.default}
        if s.elements:
            spec["elements"] = s.elements
        if s.choices:
            spec["choices"] = list(s.choices)
        if s.options:
            spec["options"] = {k: {"type": "int", "default": v} for k, v in s.options.items()}
        if documented:
            spec["description"] = s.help
            for k, sub in spec.get("options", {}).items():
                sub["description"] = f"{name}'s {k}"
            if s.options:
                spec["suboptions"] = spec.pop("options")
        out[name] = spec
    return out
