"""The quality gate's fingerprints, kept on the controller (the action plugin sglang_quality reads and writes them).

One file per (model, stack, profile): STORE/<model>/<stack>/<profile>.json, written when that deploy passed the gate
(host/quality.py runs the gate on the host). The reference of a deploy is the newest fingerprint of the same model
and profile, on any stack (so a candidate stack is held against the one it replaces), else the newest of the same
model. A fingerprint file came from a host: it is validated on read (FingerprintError naming the file and the fix).
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from pathlib import Path

from .host.files import check_folder, write_file
from .host.quality import FINGERPRINT_PROMPTS

MAX_FILE_BYTES = 1 << 20
MAX_TOKENS = 4096


class FingerprintError(ValueError):
    """A stored fingerprint that is not one: names the file and the fix."""


def part(name: object) -> str:
    """A model, stack or profile name as one safe path segment."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name or "none")).strip(".") or "none"
    return text[:100]


def path_for(store: str, model: str, stack: str, profile: str) -> Path:
    return Path(store) / part(model) / part(stack) / f"{part(profile)}.json"


def reference(store: str, model: str, profile: str) -> dict | None:
    """The stored entry a deploy of ``profile`` is held against (see the module's docstring), or None."""
    folder = Path(store) / part(model)
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
        if path.stat().st_size > MAX_FILE_BYTES:
            raise FingerprintError(f"{path} is over {MAX_FILE_BYTES} bytes: {fix}")
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        if isinstance(exc, FingerprintError):
            raise
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
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return f"a token id of {p['prompt']!r} is not a whole number"
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in lps):
            return f"a logprob of {p['prompt']!r} is not a finite number"
    return None


def save(store: str, model: str, stack: str, profile: str, prints: list, sglang_version: str | None = None) -> str:
    """Keep a fingerprint that passed the gate; returns the file written. A link at the file or a folder on the way
    that is a link: ValueError naming it (nothing is written through a link)."""
    entry = {
        "model": model,
        "stack": stack,
        "profile": profile,
        "sglang_version": sglang_version,
        "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": [{k: p[k] for k in ("prompt", "ids", "logprobs", "top")} for p in prints],
    }
    problem = _problem(entry)
    if problem:
        raise FingerprintError(f"the fingerprint to keep is not one: {problem}")
    dest = path_for(store, model, stack, profile)
    for folder in (dest.parents[2], dest.parents[1], dest.parent):  # the store, the model's, the stack's
        check_folder(str(folder), [dest.name] if folder == dest.parent else [])
    return write_file(json.dumps(entry, indent=1) + "\n", str(dest), 0o644)
