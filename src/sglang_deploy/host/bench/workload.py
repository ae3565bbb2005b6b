"""What the benchmark sends: deterministic prompts, the forced-length request body, requests per level."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from .metrics import slo_name

# The one source of the sweep's defaults: the module's options, the command line and the role's variables
# take these (tests hold the role's defaults and the module's documentation to them).
DEFAULT_CONCURRENCY = (1, 8, 32)
DEFAULT_INPUT_LEN = 256
DEFAULT_OUTPUT_LEN = 256
DEFAULT_WARMUP = 2  # requests, once before the first level
DEFAULT_TIMEOUT_S = 600.0  # per request
DEFAULT_SEED = 42  # bench_serving's
SEED_MAX = 2**32 - 1  # numpy's legacy seeding (bench_serving's np.random.seed) takes 0 to 2**32 - 1
DEFAULT_RANGE_RATIO = 1.0  # fixed lengths (bench_serving's default 0.0 draws them from [1, L])
DEFAULT_SLA_STEPS = 5  # bisections of the SLA search after its two bounds
MAX_LEN_TOKENS = 1 << 21  # a prompt or an output length: twice the longest context served (1M tokens)


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
    for _ in range(n):
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        words.append(_WORDS[state % len(_WORDS)])
    return " ".join(words)


def words(rng, n: int) -> str:
    """n common words drawn with rng (random.Random)."""
    return " ".join(rng.choice(_WORDS) for _ in range(n))


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


# The workload settings of run_benchmark (and of the command line, the module and the role) and their defaults.
WORKLOAD_DEFAULTS = {
    "concurrency": DEFAULT_CONCURRENCY,
    "requests": None,
    "input_len": DEFAULT_INPUT_LEN,
    "output_len": DEFAULT_OUTPUT_LEN,
    "warmup": DEFAULT_WARMUP,
    "timeout": DEFAULT_TIMEOUT_S,
    "dataset_name": "random",
    "dataset_path": None,
    "random_range_ratio": DEFAULT_RANGE_RATIO,
    "seed": DEFAULT_SEED,
    "sharegpt_output_len": None,
    "gsp": None,
    "request_rate": None,
    "max_concurrency": None,
    "slo": None,
    "sla_search": None,
    "sla_search_steps": DEFAULT_SLA_STEPS,
}


@dataclass(frozen=True)
class Level:
    """One measured level: at most `concurrency` requests in flight (None: no cap), new ones arriving at
    `rate` per second (Poisson; inf: all at once). The closed-loop sweep's level c is Level(c, inf), which is
    what bench_serving runs with --max-concurrency c and the default --request-rate inf."""

    concurrency: int | None
    rate: float = math.inf

    @property
    def label(self) -> str:
        if math.isinf(self.rate):
            return f"c={self.concurrency}" if self.concurrency else "all at once"
        return f"{self.rate:g} req/s" + (f" (c<={self.concurrency})" if self.concurrency else "")

    def default_requests(self) -> int:
        """Requests when none are given: max(8, 2 x concurrency) closed-loop; 10 s of arrivals (16 to 1000) at a
        rate; 64 all at once."""
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
        if not item:
            continue
        name, sep, value = item.partition("=")
        slo_name(name)
        try:
            limit = float(value) if sep else math.nan
        except ValueError:
            limit = math.nan
        if not 0 < limit < math.inf:
            raise ValueError(f"SLO {name}: give a positive number of milliseconds, e.g. {name}=2000")
        slo[name] = limit
    if not slo:
        raise ValueError("no SLO given: e.g. --slo ttft_p99_ms=2000,tpot_p99_ms=50")
    return slo


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


def check_seed(seed) -> int:
    """The seed as an int (a string of digits too, as an INI inventory gives it and Ansible's int type takes it);
    ValueError unless it is one bench_serving takes (its arrivals are drawn the same way: arrival_gaps)."""
    value = int(seed.strip()) if isinstance(seed, str) and seed.strip().isdigit() else seed
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= SEED_MAX:
        raise ValueError(f"seed must be a whole number from 0 to {SEED_MAX} (bench_serving's range), got {seed!r}")
    return value


def check_settings(
    concurrency,
    requests,
    input_len: int,
    output_len: int,
    warmup: int,
    timeout: float,
    *,
    request_rate=None,
    max_concurrency: int | None = None,
    slo: dict | None = None,
    sla_search=None,
    sla_search_steps: int = DEFAULT_SLA_STEPS,
) -> list:
    """The levels to run (Level list; empty for an SLA search, whose levels depend on what it measures);
    ValueError naming the setting and the fix for anything unusable. Closed-loop concurrency levels unless
    request_rate (rates, one level each, capped by max_concurrency) or sla_search ((low, high) rates) is given;
    max_concurrency alone is the one closed-loop level of that concurrency."""
    problems = []
    if max_concurrency is not None and (isinstance(max_concurrency, bool) or max_concurrency < 1):
        problems.append(f"max_concurrency must be at least 1 request in flight, got {max_concurrency}")
    levels = _levels(concurrency, request_rate, max_concurrency)
    for name in slo or {}:
        slo_name(name)
    if sla_search is not None:
        problems += _sla_search_problems(sla_search, sla_search_steps, request_rate, slo)
        levels = []
    problems += _size_problems(requests, input_len, output_len, warmup, timeout)
    if problems:
        raise ValueError("; ".join(problems))
    return levels


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


def _sla_search_problems(sla_search, sla_search_steps: int, request_rate, slo: dict | None) -> list[str]:
    problems = []
    if request_rate is not None:
        problems.append("give either request rates or an SLA search, not both")
    if not slo:
        problems.append("an SLA search needs SLOs, e.g. --slo ttft_p99_ms=2000,tpot_p99_ms=50")
    try:
        low, high = (float(x) for x in sla_search)
    except (TypeError, ValueError):
        low = high = math.nan
    if not 0 < low < high < math.inf:
        problems.append(
            f"the SLA search needs two finite request rates LOW,HIGH with 0 < LOW < HIGH, got {sla_search!r}"
        )
    if not 1 <= sla_search_steps <= 20:
        problems.append(f"sla_search_steps must be within 1 and 20, got {sla_search_steps}")
    return problems


def _size_problems(requests, input_len: int, output_len: int, warmup: int, timeout: float) -> list[str]:
    problems = []
    if requests is not None and requests < 1:
        problems.append(
            f"requests must be at least 1 per level, got {requests} (leave it out for max(8, 2 x concurrency))"
        )
    if input_len < 1:
        problems.append(f"input_len must be at least 1 token, got {input_len}")
    if output_len < 2:
        problems.append(f"output_len must be at least 2 tokens (decode speed needs two), got {output_len}")
    problems += [
        f"{name} must be at most {MAX_LEN_TOKENS} tokens (no server's context holds more), got {n}: give a shorter one"
        for name, n in (("input_len", input_len), ("output_len", output_len))
        if n > MAX_LEN_TOKENS
    ]
    if warmup < 0:
        problems.append(f"warmup must be 0 or more requests, got {warmup}")
    if not 0 < timeout < math.inf:  # also refuses NaN
        problems.append(f"timeout must be a positive number of seconds, got {timeout}: give a finite one, e.g. 600")
    return problems
