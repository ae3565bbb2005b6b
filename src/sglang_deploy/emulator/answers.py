"""Answers to the quality gate's questions (ansible_collections.sglang.deploy.plugins.module_utils.quality.QUESTIONS), as a good model gives them.

A TEST DOUBLE, not a model: it recognises the few prompt forms the gate asks (sums, three word problems, a tiny
facts table, two format prompts) by pattern and computes the answer, so the gate can pass against the emulator;
the fault ``wrong`` answers a fixed share of them fluently but wrongly, so it can fail. Any other prompt gets no
answer (the request produces the vocabulary words of engine.Plan).
"""

from __future__ import annotations

import re
import zlib

MAX_LIST = 100  # "list the numbers from A to B": longer lists are not recognised, nor numbers of over 9 digits
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _number(value: int) -> tuple:
    return str(value), str(value + 1)


def _arithmetic(m: re.Match) -> tuple:
    return _number(OPS[m[2]](int(m[1]), int(m[3])))


def _numbers(m: re.Match) -> tuple | None:
    first, last = int(m[1]), int(m[2])
    if not 0 <= last - first < MAX_LIST:
        return None
    nums = [str(n) for n in range(first, last + 1)]
    wrong = nums[:1] + nums[2:] if len(nums) > 1 else [str(first + 1)]
    return ",".join(nums), ",".join(wrong)


FORMS = (  # (pattern, answer(match) -> (right, wrong) or None)
    (r"what is (\d{1,9}) ([-+*]) (\d{1,9})\?", _arithmetic),
    (r"holds (\d{1,9}) \w+\. how many \w+ are in (\d{1,9}) \w+\?", lambda m: _number(int(m[1]) * int(m[2]))),
    (r"travels (\d{1,9}) km each hour for (\d{1,9}) hours\.", lambda m: _number(int(m[1]) * int(m[2]))),
    (r"has (\d{1,9}) \w+ and gives away (\d{1,9})\.", lambda m: _number(int(m[1]) - int(m[2]))),
    (r"write the word (\w+) in capital letters", lambda m: (m[1].upper(), m[1].lower())),
    (r"list the numbers from (\d{1,9}) to (\d{1,9}) separated by commas", _numbers),
    # the facts a good model knows, each with a fluent wrong answer
    (r"what is the capital of france\?", lambda _m: ("Paris", "Lyon")),
    (r"which planet is known as the red planet\?", lambda _m: ("Mars", "Venus")),
    (r"how many days are in a week\?", lambda _m: _number(7)),
    (r"what is the chemical formula of water\?", lambda _m: ("H2O", "CO2")),
)


def answer(prompt: str) -> tuple | None:
    """(right, wrong) for a recognised question, else None."""
    for pattern, make in FORMS:
        m = re.search(pattern, prompt, re.IGNORECASE)
        if m:
            return make(m)
    return None


def is_wrong(prompt: str, share: float) -> bool:
    """Whether the fault ``wrong`` answers this prompt wrongly: the same prompts every time (its crc32)."""
    return zlib.crc32(prompt.encode("utf-8", "replace")) / 2**32 < share


def tokens(prompt: str, wrong_share: float) -> tuple:
    """The answer as tokens (a word, a digit or a sign each), () for a prompt that is not recognised."""
    found = answer(prompt)
    if found is None:
        return ()
    text = found[1] if is_wrong(prompt, wrong_share) else found[0]
    return tuple(re.findall(r"[A-Za-z]+|\d|\S", text))
