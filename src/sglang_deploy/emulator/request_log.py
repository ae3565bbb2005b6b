"""SGLang's request logging (--log-requests, --log-requests-level, --log-requests-format, switched at runtime by
POST /configure_logging, sglang/srt/utils/request_logger.py in 0.5.9 to 0.5.23): a line per finished generation
request, in SGLang's JSON form (log_json: timestamp of the line, event "request.finished", rid, obj, out) with
what each level keeps: 0 and 1 no prompt (0 no sampling_params either), 2 prompts cut to 2048 items, 3 all of it.
The emulator's token ids are its words' (one a word, crc32 into a vocabulary)."""

from __future__ import annotations

import json
import time
import uuid
import zlib
from datetime import datetime
from typing import TYPE_CHECKING

from .config import log
from .generation import _content_text
from .protocol import HttpError, Request, Responder

if TYPE_CHECKING:
    from .server import Server

VOCAB = 151936  # Qwen's vocabulary size
LEVELS = (0, 1, 2, 3)
LAUNCH = {"log_requests": False, "log_requests_level": 2, "log_requests_format": "text"}  # ServerArgs' defaults
FORMATS = ("json", "text")
CUT = 2048  # level 2's max_length: longer strings and lists keep their first and last 1024


def token_ids(text: str) -> list:
    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


class RequestLog:
    """The logging switches, from the launch flags (split_argv's ignored flags) and /configure_logging."""

    def __init__(self, flags: dict):
        flags = LAUNCH | flags
        self.on = flags["log_requests"] is True
        self.level = flags["log_requests_level"]
        self.format = flags["log_requests_format"]

    def finished(self, obj: dict, meta: dict) -> None:
        if self.level < 2:
            obj = {k: v for k, v in obj.items() if k not in ("text", "input_ids")}
        if self.level == 0:
            obj.pop("sampling_params", None)
        if self.level == 2:
            obj = {k: v[: CUT // 2] + v[-CUT // 2 :] if len(v) > CUT and k != "rid" else v for k, v in obj.items()}
        if self.format == "json":
            line = {"timestamp": datetime.now().isoformat(), "event": "request.finished", "rid": obj["rid"]}
            log(json.dumps({**line, "obj": obj, "out": {"meta_info": meta}}, ensure_ascii=False))
        else:
            log(f"Finish: obj=GenerateReqInput({', '.join(f'{k}={v!r}' for k, v in obj.items())}), out={meta!r}")


async def configure_logging(server: Server, req: Request, out: Responder) -> None:
    """SGLang's ConfigureLoggingReq: each field optional, the others kept; 200 with an empty body."""
    body = req.json() if req.body else {}
    rl = server.request_log
    checks = {
        "log_requests": lambda v: isinstance(v, bool),
        "log_requests_level": lambda v: v in LEVELS and not isinstance(v, bool),
        "log_requests_format": lambda v: v in FORMATS,
    }
    if not isinstance(body, dict) or any(body.get(k) is not None and not ok(body[k]) for k, ok in checks.items()):
        raise HttpError(
            422, {"detail": "log_requests (bool), log_requests_level (0-3), log_requests_format (json, text)"}
        )
    for attr, key in (("on", "log_requests"), ("level", "log_requests_level"), ("format", "log_requests_format")):
        if body.get(key) is not None:
            setattr(rl, attr, body[key])
    log(f"Config logging: obj=ConfigureLoggingReq(log_requests={rl.on}, log_requests_level={rl.level})")
    await out.send(200, b"", "text/plain")


def _prompt(req: Request) -> tuple:
    """(text, token ids) of a generation request's prompt as the emulator counts it."""
    body = req.json()
    if isinstance(body.get("messages"), list):
        text = " ".join(_content_text(m) for m in body["messages"])
    else:
        text = body.get("text", body.get("prompt"))
    ids = body.get("input_ids", text if isinstance(text, list) else None)
    if isinstance(ids, list) and all(isinstance(t, int) for t in ids):
        return None, ids
    return (text, token_ids(text)) if isinstance(text, str) else (None, [])


class _Watch:
    """The responder, noting the token counts the answer carries (usage, meta_info) and its text chunks."""

    def __init__(self, out: Responder):
        self._out = out
        self.counts: dict = {}
        self.chunks = 0

    def __getattr__(self, name):
        return getattr(self._out, name)

    def _note(self, obj) -> None:
        if isinstance(obj, dict):
            found = obj.get("usage") or obj.get("meta_info")
            if isinstance(found, dict) and "completion_tokens" in found:
                self.counts = found
            self.chunks += bool(obj.get("choices"))

    def add(self, obj) -> None:
        self._note(obj)
        self._out.add(obj)

    async def event(self, obj) -> None:
        self.add(obj)
        await self._out.flush()

    async def send_json(self, status: int, obj) -> None:
        self._note(obj)
        await self._out.send_json(status, obj)


def logged(handler):
    """A generation handler that logs its request once it finished, when request logging is on."""

    async def run(server: Server, req: Request, out: Responder) -> None:
        rl = server.request_log
        if not rl.on:
            return await handler(server, req, out)
        start, watch = time.monotonic(), _Watch(out)
        await handler(server, req, watch)
        if out.status != 200:
            return
        text, ids = _prompt(req)
        body = req.json()
        rid = body["rid"] if isinstance(body.get("rid"), str) else uuid.uuid4().hex  # SGLang takes the client's
        completion = watch.counts.get("completion_tokens", watch.chunks)
        meta = {
            "id": rid,
            "prompt_tokens": watch.counts.get("prompt_tokens", len(ids)),
            "completion_tokens": completion,
        }
        meta |= {"cached_tokens": 0, "e2e_latency": time.monotonic() - start, "emulated": True}
        obj = {"rid": rid, "text": text, "input_ids": ids, "stream": bool(body.get("stream"))}
        obj["sampling_params"] = {k: body[k] for k in ("max_tokens", "ignore_eos", "temperature") if k in body}
        rl.finished(obj, meta)

    return run
