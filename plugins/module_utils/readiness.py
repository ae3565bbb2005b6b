"""Readiness of an SGLang server, crash detection of its systemd unit, output sanity (stdlib only, 3.10+).

Shipped to hosts as plugins/module_utils/readiness.py (plugins/module_utils links to the host package) for the `sglang_ready`
module. SGLang signals readiness like this: the port is closed while weights load, GET /health answers
503 during warm-up and 200 once the server is up. /v1/models answers before warm-up ends, so it is not
used. While waiting, a thread polls `systemctl show` for the unit; when the process exits or restarts
the wait fails at once with the unit's state and the journal's last lines (the traceback).
"""

# Also run outside a module (the launcher, the CLI): no AnsibleModule for run_command.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import json
import subprocess
import threading
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from .server_http import Endpoint, check_api_key, get_json, request

HEALTH_PATH = "/health"
UNIT_PROPERTIES = (
    "ActiveState",
    "SubState",
    "MainPID",
    "NRestarts",
    "ExecMainStatus",
    "LoadState",
    "ExecMainStartTimestamp",
)
JOURNAL_LINES = 60
PROBE_TIMEOUT_S = 5.0
# wait_ready()'s and the sglang_ready module's defaults (a 397B model load takes tens of minutes).
DEFAULT_TIMEOUT_S = 1800
DEFAULT_DELAY_S = 0
DEFAULT_SLEEP_S = 1

SANITY_PROMPTS = (
    "What is the capital of France? Answer with one word.",
    "Count from 1 to 10, separated by commas.",
    "Write one short sentence about the sea.",
)
SANITY_MAX_TOKENS = 32
SANITY_TIMEOUT_S = 120.0  # per request; the first one past it fails the check
REPEAT_MIN_CHARS = 4
REPEAT_SHARE = 0.9
BAD_CHAR_RATIO = 0.1
NAN_TEXT = "!"


class ServerDied(Exception):
    """The unit's process exited or restarted while we waited."""

    def __init__(self, reason: str, state: dict, journal: list):
        super().__init__(reason)
        self.reason = reason
        self.state = state
        self.journal = journal


class NotReady(Exception):
    """Timed out; `stage` is the last stage seen (closed, warming, error)."""

    def __init__(self, message: str, stage: str, attempts: int, health_status):
        super().__init__(message)
        self.stage = stage
        self.attempts = attempts
        self.health_status = health_status


class SanityError(Exception):
    """A sanity prompt produced output that is not plausible text."""

    def __init__(self, check: str, prompt: str, output: str, detail: str, outputs: list):
        super().__init__(
            f"output sanity check '{check}' failed ({detail}) for prompt {prompt!r}: output {output[:200]!r}"
        )
        self.check = check
        self.prompt = prompt
        self.output = output
        self.outputs = outputs


# --------------------------------------------------------------------------------------------------
# systemd (the two functions tests monkeypatch)


def run_systemctl_show(unit: str, properties: tuple = UNIT_PROPERTIES) -> dict:
    """`systemctl show -p ActiveState,... UNIT` as a dict of strings."""
    proc = subprocess.run(
        ["systemctl", "show", "-p", ",".join(properties), unit],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    out = parse_systemctl_show(proc.stdout)
    if proc.returncode != 0 and not out:
        raise RuntimeError(f"systemctl show {unit} failed: {proc.stderr.strip()}")
    return out


def parse_systemctl_show(text: str) -> dict:
    """`systemctl show` KEY=VALUE lines -> dict of strings."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def run_journalctl(unit: str, since: str) -> list:
    """The last JOURNAL_LINES message lines of the unit since `since`."""
    proc = subprocess.run(
        ["journalctl", "-u", unit, "--since", since, "-n", str(JOURNAL_LINES), "--no-pager", "-o", "cat"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 and not lines:
        return [f"(journalctl failed: {proc.stderr.strip()})"]
    return lines


def whole(value, default: int = 0) -> int:
    """``value`` as an int (systemd's MainPID, NRestarts), ``default`` when it is not one (a host may say anything)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass
class UnitWatch:
    """Decides from successive `systemctl show` readings whether the server process died."""

    unit: str
    started: float = field(default_factory=time.time)
    baseline: dict | None = None
    last: dict | None = None

    def since(self) -> str:
        """Journal start: the current process's start time, else when the wait started."""
        ts = (self.baseline or {}).get("ExecMainStartTimestamp", "").strip()
        if ts and ts != "n/a":
            return ts
        return datetime.fromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S")

    def check(self) -> str | None:
        """Poll once; a reason string when the process died or restarted, else None."""
        st = run_systemctl_show(self.unit)
        self.last = st
        if self.baseline is None:
            self.baseline = dict(st)
        base = self.baseline
        active, sub = st.get("ActiveState", ""), st.get("SubState", "")
        pid, base_pid = whole(st.get("MainPID")), whole(base.get("MainPID"))
        if st.get("LoadState") == "not-found":
            return f"unit {self.unit} not found"
        if active == "failed":
            return f"unit {self.unit} failed ({sub}, exit status {st.get('ExecMainStatus')})"
        if active in ("inactive", "deactivating"):
            return f"unit {self.unit} is {active} ({sub}, exit status {st.get('ExecMainStatus')})"
        if active == "activating" and sub == "auto-restart":
            return f"unit {self.unit} is waiting to restart (exit status {st.get('ExecMainStatus')})"
        if whole(st.get("NRestarts")) > whole(base.get("NRestarts")):
            return f"unit {self.unit} restarted ({base.get('NRestarts')} -> {st.get('NRestarts')} restarts)"
        if base_pid == 0 and pid:
            base["MainPID"] = str(pid)
        elif base_pid and pid != base_pid:
            return f"unit {self.unit} main PID changed {base_pid} -> {pid}"
        return None

    def died(self, reason: str) -> ServerDied:
        return ServerDied(reason, dict(self.last or {}), run_journalctl(self.unit, self.since()))


class _Watcher(threading.Thread):
    """Polls the unit every `interval` seconds in the background; sets `event` when it died."""

    def __init__(self, watch: UnitWatch, interval: float):
        super().__init__(daemon=True, name="sglang-unit-watch")
        self.watch = watch
        self.interval = interval
        self.event = threading.Event()
        self.stop = threading.Event()
        self.reason: str | None = None
        self.unreadable = False

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                reason = self.watch.check()
            except Exception as exc:  # noqa: BLE001 - a broken systemctl must surface, not hang the wait
                reason, self.unreadable = f"cannot read the state of unit {self.watch.unit}: {exc}", True
            if reason:
                self.reason = reason
                self.event.set()
                return
            self.stop.wait(self.interval)


# --------------------------------------------------------------------------------------------------
# HTTP


def probe(url: str, api_key: str | None = None, timeout: float = PROBE_TIMEOUT_S) -> tuple:
    """(stage, health status): closed (connection refused), warming (/health 503), ready (200),
    error (anything else: timeout, other status)."""
    try:
        status = request(Endpoint.parse(url), "GET", HEALTH_PATH, api_key=api_key, timeout=timeout).status
    except ConnectionRefusedError:
        return "closed", None
    except OSError:
        return "error", None
    if status == 200:
        return "ready", status
    if status == 503:
        return "warming", status
    return "error", status


def wait_ready(
    url: str,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    delay: float = DEFAULT_DELAY_S,
    sleep: float = DEFAULT_SLEEP_S,
    api_key: str | None = None,
    unit: str | None = None,
) -> dict:
    """Block until /health is 200. Raises ServerDied (unit process exited/restarted), NotReady (timeout),
    RuntimeError (systemctl unusable), ValueError (a URL or API key that cannot be used)."""
    Endpoint.parse(url)
    check_api_key(api_key)
    start = time.monotonic()
    deadline = start + timeout
    watcher = None
    if unit:
        watcher = _Watcher(UnitWatch(unit), sleep)
        watcher.start()

    attempts, stage, status = 0, "closed", None
    stages: dict = {}
    try:
        if delay > 0:
            _pause(watcher, min(delay, timeout))
        while True:
            attempts += 1
            stage, status = probe(url, api_key, min(PROBE_TIMEOUT_S, max(0.5, deadline - time.monotonic())))
            _raise_if_died(watcher)
            now = time.monotonic()
            stages.setdefault(stage, round(now - start, 3))
            if stage == "ready":
                return {
                    "elapsed": round(now - start, 3),
                    "attempts": attempts,
                    "health_status": status,
                    "first_seen": stages,
                }
            if now >= deadline:
                raise NotReady(
                    f"server at {url} not ready after {timeout:g} s (last stage: {stage}, /health status {status})",
                    stage,
                    attempts,
                    status,
                )
            _pause(watcher, min(sleep, max(0.0, deadline - now)))
    finally:
        if watcher is not None:
            watcher.stop.set()


def _raise_if_died(watcher: _Watcher | None) -> None:
    """ServerDied when the watched unit died, RuntimeError when its state could not be read."""
    if watcher is not None and watcher.event.is_set():
        if watcher.unreadable:
            raise RuntimeError(watcher.reason)
        raise watcher.watch.died(watcher.reason)


def _pause(watcher: _Watcher | None, seconds: float) -> None:
    """Wait, cut short when the watched unit dies (then _raise_if_died raises)."""
    if watcher is not None:
        watcher.event.wait(seconds)
    else:
        time.sleep(seconds)
    _raise_if_died(watcher)


# --------------------------------------------------------------------------------------------------
# Output sanity


def dummy_weights(server_info) -> bool:
    """Whether the server loads random weights (/server_info load_format `dummy`, SGLang's --load-format dummy)."""
    return isinstance(server_info, dict) and server_info.get("load_format") == "dummy"


def check_output(text: str, dummy: bool = False) -> tuple | None:
    """(check, detail) when the text is not what the server's weights produce, else None.

    Real weights: empty (no text), whitespace (white space only), repeated_char (one character makes >= 90% of
    >= 4 visible characters: the "!!!!" of a broken backend), not_text (control, unassigned, private-use,
    surrogate or U+FFFD characters > 10%).
    Dummy weights (`dummy`): random weights write no language (all newlines, one token repeated, nothing), so
    the form says nothing and only the broken-backend signature is refused: visible text that is all NAN_TEXT
    ("!", token id 0 of byte-level BPE vocabularies such as Qwen's and Llama 3's, which argmax picks from NaN
    logits)."""
    visible = [c for c in text if not c.isspace()]
    if dummy:
        if len(visible) >= REPEAT_MIN_CHARS and set(visible) == {NAN_TEXT}:
            return "repeated_char", f"{len(visible)} x {NAN_TEXT!r}: token id 0, what NaN logits produce"
        return None
    if not text:
        return "empty", "no output text"
    if not visible:
        return "whitespace", f"{len(text)} white-space characters and nothing else"
    if len(visible) >= REPEAT_MIN_CHARS:
        char, count = Counter(visible).most_common(1)[0]
        if count / len(visible) >= REPEAT_SHARE:
            return "repeated_char", f"{char!r} is {count} of {len(visible)} visible characters"
    bad = sum(
        1 for c in text if c == "\ufffd" or (c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cs", "Co", "Cn"))
    )
    if bad / len(text) > BAD_CHAR_RATIO:
        return "not_text", f"{bad} of {len(text)} characters are control/replacement/unassigned"
    return None


def sanity_check(
    url: str,
    model: str | None = None,
    api_key: str | None = None,
    prompts=SANITY_PROMPTS,
    max_tokens: int = SANITY_MAX_TOKENS,
    timeout: float = SANITY_TIMEOUT_S,
) -> list:
    """Run the deterministic prompts (temperature 0); returns [{prompt, output, ...}] or raises SanityError.
    The visible answer is `content`; when a reasoning model spent all tokens thinking, `reasoning_content`.
    Answers are judged by check_output, by its dummy-weights rule when /server_info says load_format dummy."""
    endpoint = Endpoint.parse(url)
    try:
        dummy = dummy_weights(get_json(endpoint, "/server_info", api_key, timeout))
    except OSError as exc:
        raise SanityError("request", "GET /server_info", "", f"{type(exc).__name__}: {exc}", []) from exc
    outputs: list = []
    for prompt in prompts:
        entry = _sanity_answer(endpoint, prompt, model, api_key, max_tokens, timeout, outputs)
        if dummy:
            entry["dummy_weights"] = True
        outputs.append(entry)
        problem = check_output(entry["output"], dummy)
        if problem:
            raise SanityError(problem[0], prompt, entry["output"], problem[1], outputs)
    return outputs


def _sanity_answer(endpoint, prompt: str, model, api_key, max_tokens: int, timeout: float, outputs: list) -> dict:
    """One prompt's answer: {prompt, output, field, finish_reason}; SanityError (with the ``outputs`` so far) when
    there is none: no HTTP answer, not 200, not a chat completion, another model's, no text."""
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0.0, "max_tokens": max_tokens}
    body = {**body, "stream": False, **({"model": model} if model else {})}
    try:
        resp = request(endpoint, "POST", "/v1/chat/completions", body, api_key, timeout)
    except OSError as exc:
        raise SanityError("request", prompt, "", f"{type(exc).__name__}: {exc}", outputs) from exc
    status, text = resp.status, resp.body.decode("utf-8", "replace")
    if status != 200:
        raise SanityError("http_status", prompt, text, f"HTTP {status}", outputs)
    try:
        answer = json.loads(text)
        choice = answer["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, RecursionError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise SanityError("response_format", prompt, text, "not a chat completion", outputs) from exc
    named = answer.get("model")
    if model and named is not None and named != model:
        raise SanityError("model", prompt, text, f"the answer names model {str(named)[:80]!r}, not {model!r}", outputs)
    content = message.get("content") or "" if isinstance(message, dict) else None
    field_name = "content"
    if isinstance(content, str) and not content.strip() and message.get("reasoning_content"):
        content, field_name = message["reasoning_content"], "reasoning_content"
    if not isinstance(content, str):
        raise SanityError("response_format", prompt, text, "the message's text is not a string", outputs)
    return {"prompt": prompt, "output": content, "field": field_name, "finish_reason": choice.get("finish_reason")}


def freeze_gc(url: str, api_key: str | None = None, timeout: float = 30.0) -> dict:
    """POST /freeze_gc: SGLang's gc.freeze() in its tokenizer manager (which answers) and its scheduler (told, not
    answering), after warm-up requests, as SGLang's long-GC warning advises (why: docs/gpu.md, "The server's GC").
    Returns {"frozen", "status"} and, when it got no answer, "error"; never raises."""
    try:
        resp = request(Endpoint.parse(url), "POST", "/freeze_gc", None, api_key, timeout)
    except (OSError, ValueError) as exc:  # ValueError: a key that cannot be a header (check_api_key)
        return {"frozen": False, "status": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"frozen": resp.status == 200, "status": resp.status}
