"""SYNTHETIC performance model of the emulated server: which launch flags and environment variables change its
rates, and which combinations crash at start or print "!!!!". The numbers are invented so that a flag search
(`sglang-deploy tune`) has something to find in the lab; they say nothing about any GPU.

SGLANG_EMU_PERF_MODEL holds a JSON list of rules (the lab sets it from `sglang_lab_perf_model` in
group_vars/lab.yml)::

    {"when": {"moe-runner-backend": "triton", "env:SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1", "enable-mscclpp": true},
     "decode": 0.8, "aggregate": 0.75, "ttft": 1.1,        # multipliers, default 1
     "fault": "crash_on_load", "message": "RuntimeError: ..."}   # optional: a SGLANG_EMU_FAULT behaviour

A rule applies when every condition holds: a launch flag (its name without dashes) whose value, as text, equals
the given one, or for ``true`` that is given at all; ``env:NAME`` compares an environment variable of the server.
The multipliers of every matching rule multiply the SGLANG_EMU_DECODE_TOK_S / _AGGREGATE_TOK_S / _TTFT_MS settings;
the first matching fault applies unless SGLANG_EMU_FAULT is set.
"""

from __future__ import annotations

import json

ENV = "SGLANG_EMU_PERF_MODEL"
RULE_KEYS = {"when", "decode", "aggregate", "ttft", "fault", "message"}
FACTORS = ("decode", "aggregate", "ttft")


class ModelError(ValueError):
    """A malformed SGLANG_EMU_PERF_MODEL."""


def parse(text: str, faults: tuple) -> list:
    """The rules of a SGLANG_EMU_PERF_MODEL value; ModelError says what is wrong."""
    try:
        rules = json.loads(text)
    except ValueError as exc:
        raise ModelError(f"{ENV} is not JSON: {exc}") from exc
    if not isinstance(rules, list):
        raise ModelError(f"{ENV} must be a JSON list of rules")
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict) or not isinstance(rule.get("when"), dict) or not rule["when"]:
            raise ModelError(f"{ENV} rule {i}: needs a non-empty mapping 'when'")
        unknown = set(rule) - RULE_KEYS
        if unknown:
            raise ModelError(f"{ENV} rule {i}: unknown keys {sorted(unknown)}; allowed {sorted(RULE_KEYS)}")
        for key in FACTORS:
            if key in rule and not (isinstance(rule[key], (int, float)) and rule[key] > 0):
                raise ModelError(f"{ENV} rule {i}: {key} must be a positive multiplier")
        if "fault" in rule and rule["fault"] not in faults:
            raise ModelError(f"{ENV} rule {i}: fault must be one of {', '.join(faults)}")
    return rules


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def matches(rule: dict, flags: dict, environ: dict) -> bool:
    """flags: launch flag dest (speculative_algorithm) -> value as parsed; environ: the server's environment."""
    for key, wanted in rule["when"].items():
        if key.startswith("env:"):
            have = environ.get(key[4:])
        else:
            have = flags.get(key.replace("-", "_"))
            have = None if have is False else have
        if wanted is True:
            if have is None:
                return False
        elif have is None or _text(have) != _text(wanted):
            return False
    return True


def apply(rules: list, flags: dict, environ: dict) -> dict:
    """{decode, aggregate, ttft: multiplier, fault, message, matched: [rule index]} for this launch."""
    out = {"decode": 1.0, "aggregate": 1.0, "ttft": 1.0, "fault": None, "message": None, "matched": []}
    for i, rule in enumerate(rules):
        if not matches(rule, flags, environ):
            continue
        out["matched"].append(i)
        for key in FACTORS:
            out[key] *= float(rule.get(key, 1.0))
        if rule.get("fault") and out["fault"] is None:
            out["fault"], out["message"] = rule["fault"], rule.get("message")
    return out
