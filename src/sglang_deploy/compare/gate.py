"""The quality gate's result (the sglang_quality task: docs/quality.md) as compare and tune read it. It comes from a
host, so only what they show is kept, checked and bounded; a profile whose gate failed on any host, in any repeat,
is no measurement (figures.measurement_problem): it is never ranked, whatever its speed."""

from __future__ import annotations

import math

PROBLEMS_KEPT = 5
PROBLEM_CHARS = 300


def summary(raw: object) -> dict | None:
    """{"passed": True, False or None (not checked), "firm" (failed for a reason that is not numerics), "mode",
    "score", "agreement", "drift" (the largest logprob drift, nats), "reference" (the fingerprint file held against),
    "problems": [text]} of a gate result, None when ``raw`` is none."""
    if not isinstance(raw, dict):
        return None
    answers, drift = raw.get("answers"), raw.get("drift")
    problems = raw.get("problems") if isinstance(raw.get("problems"), list) else []
    return {
        "passed": raw.get("passed") if isinstance(raw.get("passed"), bool) else None,
        "firm": raw.get("firm") is True,
        "mode": str(raw.get("mode") or "")[:16],
        "score": _share(answers.get("score")) if isinstance(answers, dict) else None,
        "agreement": _share(drift.get("agreement")) if isinstance(drift, dict) else None,
        "drift": _nats(drift.get("max_logprob_drift")) if isinstance(drift, dict) else None,
        "reference": str(raw["reference"])[:PROBLEM_CHARS] if isinstance(raw.get("reference"), str) else None,
        "problems": [str(p)[:PROBLEM_CHARS] for p in problems[:PROBLEMS_KEPT]],
    }


def _share(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1
    return float(value) if ok else None


def _nats(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return float(value) if ok else None


def problem(gates: dict) -> str | None:
    """Why the runs whose gate results are ``gates`` (host -> summary) do not count: a host where it failed."""
    for host, g in sorted(gates.items()):
        if g and g["passed"] is False:
            first = g["problems"][0] if g["problems"] else "no reason given"
            return f"it does not answer right (quality gate on {host}: {first})"
    return None


def text(g: dict | None) -> str:
    """One cell: passed 1.00 / agreement 1.00, failed (its first problem), or not checked."""
    if not g or g["passed"] is None:
        return "not checked"
    figures = ", ".join(
        f"{name} {g[key]:.2f}" for key, name in (("score", "answers"), ("agreement", "agreement")) if g[key] is not None
    )
    return ("passed" if g["passed"] else "FAILED") + (f" ({figures})" if figures else "")


def of_result(result: object) -> dict | None:
    """The gate's summary kept in a benchmark result (its context's deployed quality); a part that is not a mapping
    (a host's string) counts as absent."""
    for key in ("context", "deployed", "quality"):
        result = result.get(key) if isinstance(result, dict) else None
    return summary(result)


def deployed(runs: list) -> bool | str:
    """What a profile's deploys (api.RunResult) count as: True when every one succeeded and answered right, else why
    not (a failed gate's problem), else False (a deploy failed)."""
    why = next(filter(None, (problem(r.gate) for r in runs)), None)
    return why or all(r.ok for r in runs)


def lines(runs: dict) -> list:
    """A line per profile: the gate's result on each repeat (one cell per host)."""
    out = []
    for name, rs in runs.items():
        cells = [", ".join(f"{h}: {text(g)}" for h, g in sorted(r.gate.items())) or "not checked" for r in rs]
        out.append(f"quality gate {name}: " + " | ".join(f"repeat {i}: {c}" for i, c in enumerate(cells, 1)))
    return out


def leader_line(rows: list, runs: dict) -> str | None:
    """The fastest profile that answers right: the most output tok/s at the last level of the first host, among
    the profiles every deploy of which succeeded and answered right; the others named with why."""
    first = next(((r["host"], r["via"]) for r in rows), None)
    if first is None:
        return None
    level = [r for r in rows if (r["host"], r["via"]) == first][-1]["level"]
    at = {r["profile"]: r["output_tok_s"] for r in rows if (r["host"], r["via"], r["level"]) == (*first, level)}
    fit = {name: deployed(rs) for name, rs in runs.items()}
    right = {n: v for n, v in at.items() if fit.get(n) is True and v is not None}
    left = [f"{n} ({'a deploy failed' if w is False else w})" for n, w in fit.items() if w is not True]
    best = max(right, key=right.get, default=None)
    head = (
        f"fastest that answers right: {best} ({right[best]:.1f} out tok/s at {level} on {first[0]})"
        if best
        else "fastest that answers right: none"
    )
    return head + (f"; not counted: {'; '.join(left)}" if left else "")
