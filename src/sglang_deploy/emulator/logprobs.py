"""The logprobs of /generate (return_logprob, top_logprobs_num): synthetic, from the prompt's seed and the position."""

from __future__ import annotations

import zlib

from .engine import VOCAB, VOCAB_ID_BASE, Plan

LOWEST = -3.0  # a chosen token's logprob is in [LOWEST, 0)
TOP_STEP = 0.25  # each further top-k entry this much below the one before


def chosen(plan: Plan, j: int) -> float:
    """The logprob of token j: the same for the same prompt and position, in [LOWEST, 0)."""
    h = zlib.crc32(f"{plan.seed}:{j}".encode()) % 10000
    return LOWEST * (h + 1) / 10000


def fields(plan: Plan, ids: list, start: int, top_k: int, nan: bool) -> dict:
    """meta_info's output_token_logprobs and, with top_k > 0, output_top_logprobs for the tokens ``ids`` (from
    position ``start``): [logprob, token id, null] each, as SGLang gives them without return_text_in_logprobs;
    the top-k entries per token are the chosen one first, then other VOCAB words (at most len(VOCAB) in all).
    input_token_logprobs is left out. nan (the fault nan_logprobs): every logprob is null, which is what SGLang's
    orjson writes for a NaN."""
    lps = [None if nan else chosen(plan, start + i) for i in range(len(ids))]
    out = {"output_token_logprobs": [[lp, tid, None] for lp, tid in zip(lps, ids)]}
    if top_k > 0:
        out["output_top_logprobs"] = [
            [[lp, tid, None]]
            + [
                [None if nan else lp - TOP_STEP * k, VOCAB_ID_BASE + (plan.word(start + i) + k) % len(VOCAB), None]
                for k in range(1, min(top_k, len(VOCAB)))
            ]
            for i, (lp, tid) in enumerate(zip(lps, ids))
        ]
    return out
