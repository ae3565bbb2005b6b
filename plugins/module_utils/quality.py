"""The quality gate: does a server that is up answer right? (stdlib only; the sglang_quality module runs it on hosts.)

Two checks, both greedy (temperature 0):
- answers: QUESTIONS, short prompts with checkable answers (arithmetic, word problems, facts, format following),
  written for this project; an answer passes when its visible text holds the expected answer as a whole word. The
  score is the share that passes, held to a pass mark. Skipped on dummy weights (random weights know nothing).
- fingerprint: the token ids and top-k logprobs of FINGERPRINT_PROMPTS through /generate. Broken at once: a logprob
  that is NaN, infinite, missing or above 0, no token, or one token repeated throughout. Held against a reference
  (the last good fingerprint of the same model, kept on the controller): token agreement (the share of positions
  before the first different token) and logprob drift (the largest difference of the chosen tokens' logprobs on the
  positions both share) within tolerances; a lossless mode (speculative decoding) must agree fully.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import re

from .server_http import Endpoint, get_json, request

# (id, prompt, expected answer, case-sensitive)
QUESTIONS = (
    ("add", "What is 17 + 25? Reply with the number only.", "42", False),
    ("multiply", "What is 12 * 11? Reply with the number only.", "132", False),
    ("subtract", "What is 100 - 37? Reply with the number only.", "63", False),
    ("eggs", "A carton holds 12 eggs. How many eggs are in 4 cartons? Reply with the number only.", "48", False),
    (
        "train",
        "A train travels 60 km each hour for 3 hours. How many km does it travel? Reply with the number only.",
        "180",
        False,
    ),
    (
        "apples",
        "Anna has 9 apples and gives away 4. How many apples does she have left? Reply with the number only.",
        "5",
        False,
    ),
    ("capital", "What is the capital of France? Reply with one word.", "Paris", False),
    ("planet", "Which planet is known as the Red Planet? Reply with one word.", "Mars", False),
    ("week", "How many days are in a week? Reply with the number only.", "7", False),
    ("water", "What is the chemical formula of water? Reply with the formula only.", "H2O", False),
    ("upper", "Write the word blue in capital letters and nothing else.", "BLUE", True),
    ("list", "List the numbers from 3 to 6 separated by commas, with no spaces, and nothing else.", "3,4,5,6", False),
)
FINGERPRINT_PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "1, 2, 3, 4, 5,",
)
DEFAULTS = {
    "pass_mark": 0.8,  # share of QUESTIONS answered right
    "max_tokens": 64,  # per answer
    "fingerprint_tokens": 24,
    "top_k": 5,
    "min_agreement": 0.75,  # token agreement with the reference
    "max_logprob_drift": 1.0,  # nats, on the positions both share
    "lossless_min_agreement": 1.0,  # the same, for a lossless mode (speculative decoding)
    "timeout": 120.0,  # per request
}
SHARES = ("pass_mark", "min_agreement", "lossless_min_agreement")
# Bounds of what the gate asks for (and so of what a fingerprint holds): a server may answer more, it is cut.
MAX_FINGERPRINT_TOKENS = 256
MAX_TOP_K = 20
MOST = {"max_tokens": 4096, "fingerprint_tokens": MAX_FINGERPRINT_TOKENS, "top_k": MAX_TOP_K, "timeout": 3600}
COUNTS = ("max_tokens", "fingerprint_tokens", "top_k")
REPEAT_MIN = 8  # a fingerprint of at least this many tokens, all one token: a broken backend
SHOWN = 200  # characters of an answer kept in the result


class QualityError(Exception):
    """The server did not answer a quality request (transport, status, shape): the gate cannot judge it."""


def checked_settings(given: dict | None) -> dict:
    """DEFAULTS with ``given`` over them, each a finite number (Ansible may pass "0.8"); ValueError naming the
    setting otherwise, and for a setting the gate does not have."""
    out = dict(DEFAULTS)
    for name, value in (given or {}).items():
        if name not in DEFAULTS:
            raise ValueError(f"unknown quality setting {name!r}: the settings are {', '.join(DEFAULTS)}")
        if value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        most = 1 if name in SHARES else MOST.get(name, math.inf)
        if not math.isfinite(number) or number < 0 or number > most:
            bound = f"from 0 to {most:g}" if math.isfinite(most) else "a finite number, 0 or more"
            raise ValueError(f"quality setting {name} is {value!r}: give {bound}")
        out[name] = int(number) if name in COUNTS else number
    return out


def answered(text: str, expected: str, case_sensitive: bool) -> bool:
    """Whether ``text`` holds ``expected`` as a whole word (no letter or digit on either side)."""
    pattern = r"(?<![A-Za-z0-9])" + re.escape(expected) + r"(?![A-Za-z0-9])"
    return re.search(pattern, text, 0 if case_sensitive else re.IGNORECASE) is not None


def _ask(endpoint: Endpoint, prompt: str, model, api_key, max_tokens: int, timeout: float) -> str:
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0.0,
        "max_tokens": max_tokens,
        "chat_template_kwargs": {"enable_thinking": False},
        **({"model": model} if model else {}),
    }
    resp = request(endpoint, "POST", "/v1/chat/completions", body, api_key, timeout)
    if resp.status != 200:
        raise QualityError(f"POST /v1/chat/completions for {prompt!r}: HTTP {resp.status}")
    try:
        content = json.loads(resp.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise QualityError(f"POST /v1/chat/completions for {prompt!r}: not a chat completion") from exc
    return content if isinstance(content, str) else ""


def check_answers(endpoint: Endpoint, model, api_key, s: dict) -> dict:
    """Ask every question at once; {"score", "pass_mark", "passed", "asked", "wrong": [{id, prompt, expected,
    answer}]}."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(QUESTIONS)) as pool:
        futures = [pool.submit(_ask, endpoint, q[1], model, api_key, s["max_tokens"], s["timeout"]) for q in QUESTIONS]
        answers = [f.result() for f in futures]
    wrong = [
        {"id": qid, "prompt": prompt, "expected": expected, "answer": text[:SHOWN]}
        for (qid, prompt, expected, case), text in zip(QUESTIONS, answers)
        if not answered(text, expected, case)
    ]
    score = round(1 - len(wrong) / len(QUESTIONS), 4)
    return {
        "score": score,
        "pass_mark": s["pass_mark"],
        "passed": score >= s["pass_mark"],
        "asked": len(QUESTIONS),
        "wrong": wrong,
    }


def _one_print(endpoint: Endpoint, prompt: str, api_key, s: dict) -> dict:
    body = {
        "text": prompt,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": s["fingerprint_tokens"]},
        "return_logprob": True,
        "top_logprobs_num": s["top_k"],
    }
    resp = request(endpoint, "POST", "/generate", body, api_key, s["timeout"])
    if resp.status != 200:
        raise QualityError(f"POST /generate for {prompt!r}: HTTP {resp.status}")
    try:
        meta = json.loads(resp.body)["meta_info"]
        n, k = s["fingerprint_tokens"], s["top_k"]
        pairs = meta["output_token_logprobs"][:n]
        ids = [int(p[1]) for p in pairs]
        logprobs = [
            float(p[0]) if isinstance(p[0], (int, float)) and not isinstance(p[0], bool) else None for p in pairs
        ]
        top = [[int(t[1]) for t in (row or [])[:k]] for row in (meta.get("output_top_logprobs") or [])[:n]]
    except (ValueError, KeyError, IndexError, TypeError, OverflowError) as exc:
        raise QualityError(f"POST /generate for {prompt!r}: no output_token_logprobs in its meta_info") from exc
    return {"prompt": prompt, "ids": ids, "logprobs": logprobs, "top": top}


def fingerprint(endpoint: Endpoint, api_key, s: dict) -> list:
    """One entry per FINGERPRINT_PROMPTS, asked one after another (a batch would change the numbers)."""
    return [_one_print(endpoint, prompt, api_key, s) for prompt in FINGERPRINT_PROMPTS]


def broken(prints: list, dummy: bool = False) -> list:
    """What is wrong with a fingerprint on its own: a bad logprob, no token, one token throughout (not on ``dummy``
    weights, whose random output may well be one token)."""
    problems = []
    for p in prints:
        bad = [i for i, lp in enumerate(p["logprobs"]) if not _finite(lp) or lp > 1e-3]
        if bad:
            shown = p["logprobs"][bad[0]]
            problems.append(f"{p['prompt']!r}: logprob {shown!r} at token {bad[0]} (NaN, infinite, missing or > 0)")
        elif not p["ids"]:
            problems.append(f"{p['prompt']!r}: no token came back")
        elif not dummy and len(p["ids"]) >= REPEAT_MIN and len(set(p["ids"])) == 1:
            problems.append(f"{p['prompt']!r}: token {p['ids'][0]} repeated {len(p['ids'])} times")
    return problems


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def drift(prints: list, reference: list) -> dict:
    """Token agreement and logprob drift of ``prints`` against ``reference`` (the same prompts), per prompt and
    overall: {"agreement", "max_logprob_drift", "prompts": [{prompt, agreement, first_difference, drift}]}."""
    rows = []
    ref = {r.get("prompt"): r for r in reference if isinstance(r, dict)}
    for p in prints:
        r = ref.get(p["prompt"])
        if r is None:
            continue
        a, b = p["ids"], list(r.get("ids") or [])
        same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        lps = [
            abs(x - y)
            for x, y in zip(p["logprobs"][:same], (r.get("logprobs") or [])[:same])
            if _finite(x) and _finite(y)
        ]
        rows.append(
            {
                "prompt": p["prompt"],
                "agreement": round(same / max(len(a), len(b)), 4) if a or b else 1.0,  # none on both: broken()
                "first_difference": None if same == max(len(a), len(b)) else same,
                "drift": round(max(lps, default=0.0), 4),
            }
        )
    if not rows:
        return {"agreement": None, "max_logprob_drift": None, "prompts": []}
    return {
        "agreement": round(sum(r["agreement"] for r in rows) / len(rows), 4),
        "max_logprob_drift": max(r["drift"] for r in rows),
        "prompts": rows,
    }


def held(d: dict, s: dict, lossless: bool) -> list:
    """Why a drift report is outside the tolerances ([] when within, or when there was no reference)."""
    if d["agreement"] is None:
        return []
    least = s["lossless_min_agreement"] if lossless else s["min_agreement"]
    problems = []
    if d["agreement"] < least:
        first = next(r for r in d["prompts"] if r["first_difference"] is not None)
        what = "a lossless mode (speculative decoding) changed greedy tokens" if lossless else "greedy tokens moved"
        problems.append(
            f"{what}: token agreement {d['agreement']:.2f} with the reference, under {least:.2f}"
            f" (first at token {first['first_difference']} of {first['prompt']!r})"
        )
    if d["max_logprob_drift"] > s["max_logprob_drift"]:
        problems.append(f"logprob drift {d['max_logprob_drift']:.3f} over {s['max_logprob_drift']:.3f}")
    return problems


def gate(
    url: str,
    model=None,
    api_key=None,
    settings: dict | None = None,
    reference: list | None = None,
    lossless: bool = False,
) -> dict:
    """Run both checks. Returns {"passed", "firm" (failed for a reason that is not numerics), "problems": [text],
    "answers" (None on dummy weights), "fingerprint", "drift", "dummy_weights", "settings"}; QualityError when the
    server does not answer a request."""
    s = checked_settings(settings)
    endpoint = Endpoint.parse(url)
    try:
        info = get_json(endpoint, "/server_info", api_key, s["timeout"])
        dummy = isinstance(info, dict) and info.get("load_format") == "dummy"
        answers = None if dummy else check_answers(endpoint, model, api_key, s)
        prints = fingerprint(endpoint, api_key, s)
    except OSError as exc:
        raise QualityError(f"{type(exc).__name__}: {exc}") from exc
    d = drift(prints, reference or [])
    problems = (
        [
            f"answers: score {answers['score']:.2f} under the pass mark {s['pass_mark']:.2f}; "
            + "; ".join(
                f"{w['prompt']!r} expected {w['expected']!r}, got {w['answer'][:80]!r}" for w in answers["wrong"][:3]
            )
        ]
        if answers and not answers["passed"]
        else []
    )
    off_tolerance = held(d, s, lossless)
    firm = bool(problems or broken(prints, dummy) or (lossless and off_tolerance))
    problems += broken(prints, dummy) + off_tolerance
    return {
        "passed": not problems,
        # Not numerics: wrong answers, a broken fingerprint, a lossless mode that changed tokens (a drift past a
        # tolerance alone may be a kernel's rounding).
        "firm": firm,
        "problems": problems,
        "answers": answers,
        "fingerprint": prints,
        "drift": d,
        "dummy_weights": dummy,
        "settings": s,
    }
