"""The quality gate's fingerprints, kept on the controller (the action plugin sglang_quality reads and writes them).

One file per (model, host, stack, profile): STORE/<model>/<host>/<stack>/<profile>.json, written when that deploy
passed the gate (host/quality.py runs the gate on the host). The reference of a deploy is the newest fingerprint of
the same model on the same host and profile, on any stack (so a candidate stack is held against the one it
replaces), else the newest of the same model on that host; a stack canary names the stack to be held against. A
host is held only against its own history: what one host reports (it may be hostile, or broken) never becomes
another host's reference. A fingerprint file came from a host: it is bounded and validated on read (FingerprintError naming the file and the fix).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.files import check_folder, write_file
from ansible_collections.sglang.deploy.plugins.module_utils.quality import FINGERPRINT_PROMPTS
from .paths import read_bounded

MAX_FILE_BYTES = 1 << 20
MAX_TOKENS = 256  # quality.MAX_FINGERPRINT_TOKENS
MAX_TOP = 20  # quality.MAX_TOP_K


class FingerprintError(ValueError):
    """A stored fingerprint that is not one: names the file and the fix."""


def part(name: object) -> str:
    """A model, host, stack or profile name as one safe path segment; a name that had to change gets a hash of
    itself, so two names never share a segment ('gpu/1' and 'gpu_1')."""
    raw = str(name or "none")
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip(".")[:100] or "none"
    return text if text == raw else f"{text}-{hashlib.sha256(raw.encode()).hexdigest()[:12]}"


def path_for(store: str, model: str, host: str, stack: str, profile: str) -> Path:
    return Path(store) / part(model) / part(host) / part(stack) / f"{part(profile)}.json"


def reference(store: str, model: str, host: str, profile: str, stack: str = "") -> dict | None:
    """The stored entry a deploy of ``profile`` on ``host`` is held against (see the module's docstring), or None.
    ``stack``: that stack's entry of ``profile`` only (a stack canary), or None where it has none."""
    if stack:
        path = path_for(store, model, host, stack, profile)
        return {**load(path), "file": str(path)} if path.is_file() and not path.is_symlink() else None
    folder = Path(store) / part(model) / part(host)
    if not folder.is_dir():
        return None
    files = [p for p in folder.glob("*/*.json") if p.is_file() and not p.is_symlink()]
    same = [p for p in files if p.name == f"{part(profile)}.json"]
    chosen = max(same or files, key=lambda p: (p.stat().st_mtime, str(p)), default=None)
    return None if chosen is None else {**load(chosen), "file": str(chosen)}


def load(path: Path) -> dict:
    """A stored entry, checked: {"model", "stack", "profile", "saved_at", "fingerprint": [...]}."""
    fix = f"remove {path} (the next deploy that passes the gate writes it anew)"
    try:
        data = read_bounded(path, MAX_FILE_BYTES, "a fingerprint")
    except (OSError, ValueError) as exc:
        raise FingerprintError(f"{exc}: {fix}") from None
    try:
        entry = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FingerprintError(f"{path} cannot be read as JSON ({type(exc).__name__}): {fix}") from None
    problem = _problem(entry)
    if problem:
        raise FingerprintError(f"{path}: {problem}: {fix}")
    return entry


def _problem(entry: object) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("fingerprint"), list):
        return "not a fingerprint entry (a mapping with a fingerprint list)"
    prints = entry["fingerprint"]
    if len(prints) > len(FINGERPRINT_PROMPTS):
        return f"over {len(FINGERPRINT_PROMPTS)} prompts"
    for p in prints:
        if not isinstance(p, dict) or p.get("prompt") not in FINGERPRINT_PROMPTS:
            return "a fingerprint entry whose prompt is not one of the gate's"
        ids, lps = p.get("ids"), p.get("logprobs")
        if not isinstance(ids, list) or not isinstance(lps, list) or len(ids) != len(lps) or len(ids) > MAX_TOKENS:
            return f"the ids and logprobs of {p['prompt']!r} are not two lists of one length"
        if not _ids(ids, MAX_TOKENS):
            return f"a token id of {p['prompt']!r} is not a whole number"
        if not all(isinstance(x, float) and math.isfinite(x) for x in lps):
            return f"a logprob of {p['prompt']!r} is not a finite number"
        top = p.get("top")
        if not isinstance(top, list) or len(top) > MAX_TOKENS or not all(_ids(row, MAX_TOP) for row in top):
            return f"the top tokens of {p['prompt']!r} are not at most {MAX_TOKENS} lists of at most {MAX_TOP} ids"
    return None


def _ids(row: object, most: int) -> bool:
    """A list of at most ``most`` token ids (whole numbers from 0 to below 2**31)."""
    ok = isinstance(row, list) and len(row) <= most
    return ok and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in row)


def save(
    store: str, model: str, host: str, stack: str, profile: str, prints: list, sglang_version: str | None = None
) -> str:
    """Keep a fingerprint that passed the gate; returns the file written. A link at the file or a folder on the way
    that is a link: ValueError naming it (nothing is written through a link)."""
    entry = {
        "model": model,
        "host": host,
        "stack": stack,
        "profile": profile,
        "sglang_version": sglang_version,
        "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": [{k: p.get(k) for k in ("prompt", "ids", "logprobs", "top")} for p in prints],
    }
    problem = _problem(entry)
    if problem:
        raise FingerprintError(f"the fingerprint to keep is not one: {problem}")
    dest = path_for(store, model, host, stack, profile)
    for folder in (dest.parents[3], dest.parents[2], dest.parents[1], dest.parent):  # store, model, host, stack
        check_folder(str(folder), [dest.name] if folder == dest.parent else [])
    text = json.dumps(entry, indent=1) + "\n"
    if len(text) > MAX_FILE_BYTES:
        raise FingerprintError(f"the fingerprint to keep is over {MAX_FILE_BYTES} bytes: not kept")
    return write_file(text, str(dest), 0o644)
