"""The generation endpoints: /v1/chat/completions, /v1/completions and /generate, streamed or not."""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from typing import TYPE_CHECKING

from . import answers, logprobs
from .config import Config
from .engine import EOS_TOKEN_ID, Plan
from .faults import check_generation_fault, move_tokens
from .protocol import HttpError, Request, Responder, openai_error

if TYPE_CHECKING:
    from .server import Server


def prompt_token_count(text: str) -> int:
    return max(1, len(text.split()))


def _content_text(message) -> str:
    """The text of one chat message: a string, or the text parts of a list of parts."""
    if not isinstance(message, dict):
        raise _bad("messages must be objects")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list) or not all(isinstance(p, dict) for p in content):
        raise _bad("message content must be a string or a list of content parts")
    texts = [p.get("text", "") for p in content]
    if not all(isinstance(t, str) for t in texts):
        raise _bad("a content part's text must be a string")
    return " ".join(texts)


def _bad(message: str):
    return openai_error(400, message, "BadRequestError")


# What pydantic (SGLang's request models) reads as a bool besides true and false.
BOOL_WORDS = dict.fromkeys(("1", "on", "t", "true", "y", "yes"), True) | dict.fromkeys(
    ("0", "off", "f", "false", "n", "no"), False
)


def _bool_field(body: dict, name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in BOOL_WORDS:
        return BOOL_WORDS[value.lower()]
    raise _bad(f"{name} must be a boolean")


def _object_field(body: dict, name: str) -> dict:
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"{name} must be an object")
    return value


def _int_field(body: dict, names: tuple, default, minimum: int = 0):
    for name in names:
        if body.get(name) is not None:
            value = body[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise _bad(f"{name} must be an integer >= {minimum}")
            return value
    return default


def _plan(
    server: Server,
    prompt: str,
    prompt_tokens: int,
    max_new,
    min_new: int,
    ignore_eos: bool,
    reasoning: bool,
    openai: bool = True,
    default_new: int | None = None,
) -> Plan:
    """The request's Plan. Without max_new: default_new, else up to the context length. A prompt or an explicit
    token budget over the context length is a 400 with SGLang's messages (TokenizerManager._validate_one_request,
    sglang/srt/managers/tokenizer_manager.py). The OpenAI routes answer the quality gate's questions (answers.py);
    /generate never does."""
    cfg = server.cfg
    context = cfg.context_length
    if prompt_tokens >= context:
        message = f"The input ({prompt_tokens} tokens) is longer than the model's context length ({context} tokens)."
        raise _bad(message) if openai else HttpError(400, {"error": {"message": message}})
    if max_new is None:
        max_new = min(default_new, context - prompt_tokens) if default_new is not None else context - prompt_tokens
    elif prompt_tokens + max_new >= context:
        message = (
            f"Requested token count exceeds the model's maximum context length of {context} tokens. You requested "
            f"a total of {prompt_tokens + max_new} tokens: {prompt_tokens} tokens from the input messages and "
            f"{max_new} tokens for the completion. Please reduce the number of tokens in the input messages or the "
            f"completion to fit within the limit."
        )
        raise _bad(message) if openai else HttpError(400, {"error": {"message": message}})
    share = cfg.wrong_share if cfg.fault == "wrong" else 0.0
    answer = answers.tokens(prompt, share) if openai else ()
    plan = Plan(prompt, prompt_tokens, max_new, min_new, ignore_eos, reasoning, cfg.fault == "garbage", answer)
    server.generations += 1
    move_tokens(plan, cfg.fault, cfg.spec, server.generations)
    return plan


def _usage(cfg: Config, plan: Plan, completion: int) -> dict:
    return {
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": plan.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": 0} if cfg.args.enable_cache_report else None,
        "reasoning_tokens": min(plan.reasoning_tokens, completion),
    }


def _stream_opts(cfg: Config, body: dict) -> tuple:
    opts = _object_field(body, "stream_options")
    include = _bool_field(opts, "include_usage") or cfg.args.stream_response_default_include_usage
    return include, _bool_field(opts, "continuous_usage_stats")


async def chat(server: Server, req: Request, out: Responder) -> None:
    body = req.json()
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        # request validation (pydantic) in SGLang answers type "Bad Request", its own checks "BadRequestError"
        raise openai_error(400, "messages must be a non-empty list", "Bad Request")
    stream, (include_usage, continuous) = _bool_field(body, "stream"), _stream_opts(server.cfg, body)
    check_generation_fault(server.cfg.fault, server.cfg.fault_message, openai=True)
    prompt = " ".join(_content_text(m) for m in messages)
    kwargs = _object_field(body, "chat_template_kwargs")
    reasoning = (
        bool(server.cfg.args.reasoning_parser)
        and kwargs.get("enable_thinking") is not False
        and _bool_field(body, "separate_reasoning", True)
    )
    plan = _plan(
        server,
        prompt,
        prompt_token_count(prompt),
        _int_field(body, ("max_completion_tokens", "max_tokens"), None),
        _int_field(body, ("min_tokens",), 0),
        _bool_field(body, "ignore_eos"),
        reasoning,
    )
    # SGLang answers with the model name the request gave (any name is served by the one model)
    rid, created, model = f"{uuid.uuid4().hex}", int(time.time()), body.get("model") or server.cfg.served_model_name
    if stream:
        await _chat_stream(server, out, plan, (rid, created, model), include_usage, continuous)
    else:
        await _chat_answer(server, out, plan, (rid, created, model), reasoning)


async def _chat_answer(server: Server, out: Responder, plan: Plan, ids: tuple, reasoning: bool) -> None:
    """The whole answer as one chat.completion, once the plan has run. ids: (id, created, model)."""
    rid, created, model = ids
    r = plan.reasoning_tokens
    await server.engine.drain(plan)
    finish, matched = plan.finish_json()
    message = {
        "role": "assistant",
        "content": plan.text(r, plan.n),
        "reasoning_content": plan.text(0, r) if reasoning else None,
        "tool_calls": None,
    }
    await out.send_json(
        200,
        {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
            ],
            "usage": _usage(server.cfg, plan, plan.n),
            "metadata": {"weight_version": "default"},
        },
    )


class _Chunks:
    """The chat.completion.chunk events of one answer. ids: (id, created, model); continuous: each chunk carries the
    usage so far."""

    def __init__(self, cfg: Config, plan: Plan, ids: tuple, continuous: bool):
        self.cfg, self.plan, self.ids, self.continuous = cfg, plan, ids, continuous
        # token chunks are most of the traffic: render them from a prepared frame (same JSON as chunk())
        self.frame = json.dumps(self.chunk({"reasoning_content": "\0R", "content": "\0C"}), separators=(",", ":"))

    def chunk(self, delta: dict, finish=None, matched=None, done: int = 0) -> dict:
        # SGLang 0.5.16's chunks: no "usage" key unless continuous usage stats are asked for
        rid, created, model = self.ids
        out = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
            ],
        }
        if self.continuous:
            out["usage"] = _usage(self.cfg, self.plan, done)
        return out

    def token(self, text: str, reasoning_part: bool, done: int):
        if self.continuous:
            return self.chunk(
                {
                    "reasoning_content": text if reasoning_part else None,
                    "content": None if reasoning_part else text,
                },
                done=done,
            )
        content, thought = ("null", json.dumps(text)) if reasoning_part else (json.dumps(text), "null")
        return self.frame.replace('"\\u0000C"', content, 1).replace('"\\u0000R"', thought, 1)

    def usage(self) -> dict:
        rid, created, model = self.ids
        return {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(self.cfg, self.plan, self.plan.n),
        }


async def _chat_stream(
    server: Server, out: Responder, plan: Plan, ids: tuple, include_usage: bool, continuous: bool
) -> None:
    """The answer as chat.completion.chunk events while the plan runs. ids: (id, created, model)."""
    r = plan.reasoning_tokens
    chunks = _Chunks(server.cfg, plan, ids, continuous)
    role = {"reasoning_content": None, "role": "assistant", "content": ""}
    out.start_sse()
    sent_role = False
    async with contextlib.aclosing(server.engine.run(plan)) as steps:
        async for start, end in steps:
            if not sent_role:
                out.add(chunks.chunk(role))
                sent_role = True
            if start < r:
                out.add(chunks.token(plan.text(start, min(end, r)), True, end))
            if end > r:
                out.add(chunks.token(plan.text(max(start, r), end), False, end))
            await out.flush()
    if not sent_role:
        out.add(chunks.chunk(role))
    finish, matched = plan.finish_json()
    out.add(chunks.chunk({"reasoning_content": None}, finish, matched, done=plan.n))
    if include_usage:
        out.add(chunks.usage())
    await out.end_sse()


async def completions(server: Server, req: Request, out: Responder) -> None:
    body = req.json()
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt_text, prompt_tokens = " ".join(map(str, prompt)), len(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, str) for t in prompt):
        prompt_text = " ".join(prompt)
        prompt_tokens = prompt_token_count(prompt_text)
    elif isinstance(prompt, str):
        prompt_text, prompt_tokens = prompt, prompt_token_count(prompt)
    else:
        raise openai_error(400, "prompt must be a string, a list of strings or token ids", "BadRequestError")
    stream, (include_usage, continuous) = _bool_field(body, "stream"), _stream_opts(server.cfg, body)
    check_generation_fault(server.cfg.fault, server.cfg.fault_message, openai=True)
    plan = _plan(
        server,
        prompt_text,
        prompt_tokens,
        _int_field(body, ("max_tokens",), 16),
        _int_field(body, ("min_tokens",), 0),
        _bool_field(body, "ignore_eos"),
        False,
    )
    rid, created, model = f"cmpl-{uuid.uuid4().hex}", int(time.time()), server.cfg.served_model_name
    finish, matched = plan.finish_json()
    if not stream:
        await server.engine.drain(plan)
        await out.send_json(
            200,
            {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": plan.text(0, plan.n),
                        "logprobs": None,
                        "finish_reason": finish,
                        "matched_stop": matched,
                    }
                ],
                "usage": _usage(server.cfg, plan, plan.n),
            },
        )
        return

    def chunk(text: str, fin=None, mat=None, done: int = 0) -> dict:
        return {
            "id": rid,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": fin, "matched_stop": mat}],
            "usage": _usage(server.cfg, plan, done) if continuous else None,
        }

    out.start_sse()
    async with contextlib.aclosing(server.engine.run(plan)) as steps:
        async for start, end in steps:
            await out.event(chunk(plan.text(start, end), done=end))
    out.add(chunk("", finish, matched, done=plan.n))
    if include_usage:
        out.add(
            {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model,
                "choices": [],
                "usage": _usage(server.cfg, plan, plan.n),
            }
        )
    await out.end_sse()


def _generate_prompt(body: dict) -> tuple:
    """/generate's prompt: (text, token count)."""
    text, input_ids = body.get("text"), body.get("input_ids")
    if isinstance(text, str):
        return text, prompt_token_count(text)
    if isinstance(input_ids, list) and input_ids and all(isinstance(t, int) for t in input_ids):
        return " ".join(map(str, input_ids)), len(input_ids)
    raise HttpError(
        400,
        {"error": {"message": "The emulator takes one prompt: 'text' (a string) or 'input_ids' (a list of ints)"}},
    )


async def generate(server: Server, req: Request, out: Responder) -> None:
    body = req.json()
    prompt_text, prompt_tokens = _generate_prompt(body)
    stream, sp = _bool_field(body, "stream"), _object_field(body, "sampling_params")
    with_logprobs, top_k = _bool_field(body, "return_logprob"), _int_field(body, ("top_logprobs_num",), 0)
    check_generation_fault(server.cfg.fault, server.cfg.fault_message, openai=False)
    plan = _plan(
        server,
        prompt_text,
        prompt_tokens,
        _int_field(sp, ("max_new_tokens",), None),
        _int_field(sp, ("min_new_tokens",), 0),
        _bool_field(sp, "ignore_eos"),
        False,
        openai=False,
        default_new=128,
    )
    rid, cfg = uuid.uuid4().hex, server.cfg
    start_time, received = time.monotonic(), time.time()

    def meta(lo: int, done: int, final: bool) -> dict:
        # the fields of SGLang 0.5.16's meta_info (tests/fixtures/sglang-0.5.16-h200/http_api.json)
        m = {
            "id": rid,
            "finish_reason": None,
            "prompt_tokens": plan.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
            "queue_time": 0.0,
            "reasoning_tokens": 0,
            "completion_tokens": done,
            "cached_tokens": 0,
            "cached_tokens_details": {"device": 0, "host": 0},
            "dp_rank": None,
            "request_received_ts": received,
            "api_server_dispatch_finish_ts": received,
            "emulated": True,
        }
        if with_logprobs:
            m.update(logprobs.fields(plan, plan.ids(lo, done), lo, top_k, cfg.fault == "nan_logprobs"))
        if final:
            if plan.finish == "stop":
                m["finish_reason"] = {"type": "stop", "matched": EOS_TOKEN_ID}
            else:
                m["finish_reason"] = {"type": "length", "length": plan.n}
            m["e2e_latency"] = elapsed = time.monotonic() - start_time
            m["request_finished_ts"] = m["response_sent_to_client_ts"] = received + elapsed
            m["decode_throughput"] = plan.n / elapsed if elapsed > 0 else 0.0
            if cfg.spec:
                verify = max(1, math.ceil((plan.n - 1) / cfg.accept_length)) if plan.n > 1 else 0
                m["spec_verify_ct"] = verify
                m["spec_accept_length"] = plan.n / verify if verify else 0.0
                m["spec_accept_rate"] = ((plan.n / verify - 1) / cfg.spec_steps) if verify else 0.0
        return m

    if not stream:
        await server.engine.drain(plan)
        await out.send_json(
            200, {"text": plan.text(0, plan.n), "output_ids": plan.ids(0, plan.n), "meta_info": meta(0, plan.n, True)}
        )
        return
    incremental = cfg.args.incremental_streaming_output
    out.start_sse()
    last = 0
    async with contextlib.aclosing(server.engine.run(plan)) as steps:
        async for start, end in steps:
            lo = start if incremental else 0
            final = end == plan.n
            await out.event(
                {"text": plan.text(lo, end), "output_ids": plan.ids(lo, end), "meta_info": meta(lo, end, final)}
            )
            last = end
    if last != plan.n or plan.n == 0:
        out.add({"text": "", "output_ids": [], "meta_info": meta(plan.n, plan.n, True)})
    await out.end_sse()
