"""What the benchmark sends: deterministic prompts, the forced-length request body, requests per level."""

from __future__ import annotations


def chat_body(model: str | None, prompt: str, output_len: int, stream: bool = True) -> dict:
    """Request body forcing exactly output_len tokens at temperature 0."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": output_len,
        "min_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": stream,
    }
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
    return max(8, 2 * concurrency)


def parse_concurrency(text: str) -> list:
    """'1,8,32' -> [1, 8, 32]; ValueError on anything else."""
    levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    if not levels or min(levels) < 1:
        raise ValueError(f"bad concurrency list {text!r}")
    return levels
