"""What the benchmark sends: deterministic prompts, the forced-length request body, requests per level."""

from __future__ import annotations

# The one source of the sweep's defaults: the module's options, the command line and the role's variables
# take these (tests hold the role's defaults and the module's documentation to them).
DEFAULT_CONCURRENCY = (1, 8, 32)
DEFAULT_INPUT_LEN = 256
DEFAULT_OUTPUT_LEN = 256
DEFAULT_WARMUP = 2  # requests, once before the first level
DEFAULT_TIMEOUT_S = 600.0  # per request


def chat_body(model: str | None, prompt: str, output_len: int, stream: bool = True, min_tokens: bool = False) -> dict:
    """Request body forcing output_len tokens at temperature 0 as bench_serving does: ignore_eos and the token
    cap. min_tokens only when asked (for servers that stop early despite ignore_eos): SGLang then runs its
    min-new-tokens penalizer on every decode step, which slows decoding."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
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


def check_settings(concurrency, requests, input_len: int, output_len: int, warmup: int, timeout: float) -> list:
    """The concurrency levels as ints; ValueError naming the setting and the fix for anything unusable."""
    try:
        levels = [int(c) for c in concurrency]
    except (TypeError, ValueError):
        levels = []
    if not levels or min(levels) < 1:
        raise ValueError(f"concurrency must be a list of positive integers, got {concurrency!r}")
    problems = []
    if requests is not None and requests < 1:
        problems.append(
            f"requests must be at least 1 per level, got {requests} (leave it out for max(8, 2 x concurrency))"
        )
    if input_len < 1:
        problems.append(f"input_len must be at least 1 token, got {input_len}")
    if output_len < 2:
        problems.append(f"output_len must be at least 2 tokens (decode speed needs two), got {output_len}")
    if warmup < 0:
        problems.append(f"warmup must be 0 or more requests, got {warmup}")
    if not timeout > 0:  # also refuses NaN
        problems.append(f"timeout must be a positive number of seconds, got {timeout}")
    if problems:
        raise ValueError("; ".join(problems))
    return levels
