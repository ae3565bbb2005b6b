"""Repeated measurements and their noise: the spread of a figure over repeats, the bootstrap interval of the ratio
of two medians, and the verdict compare and tune give on it.

The rule, one for both: B differs from A only where the 95% interval of median(B) / median(A) excludes 1 and the
medians differ by more than ``floor`` (a difference too small to act on, tune's `noise`); otherwise "no difference
at this noise", with an estimate of the repeats that would resolve a difference of the observed size. The interval
is a percentile bootstrap (each side resampled with replacement, seeded: the same runs give the same interval).
With few repeats it is coarse: at 3 runs a side it is about [min B / max A, max B / min A], and two identical
profiles come out "different" in about 1 compare of 10 where the floor does not hold them (docs/benchmark.md); with
fewer than 3 runs on either side there is no verdict.
"""

from __future__ import annotations

import math
import random
import statistics

LEVEL = 0.95
DRAWS = 4000
DEFAULT_FLOOR = 0.02  # tune's default `noise`
MOST_REPEATS = 1000  # an estimate above this is given as "more than"
# Fewer runs than this on either side (a failed deploy leaves one side short): no verdict. Two runs a side give every run of one above every run of the
# other in 1 compare of 3 when nothing differs; three, in 1 of 10 (the floor holds most of those back).
MIN_RUNS = 3
MAX_REPEATS = 50  # compare's and tune's --repeats at most


def valid_repeats(value) -> bool:
    """A number of repeats compare and tune take: a whole number from 1 to MAX_REPEATS (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_REPEATS


BETTER, WORSE, SAME, UNKNOWN = "better", "worse", "no difference", "not measured"


def spread(values: list) -> dict:
    """min / median / max and the count of the values (None where there are none)."""
    values = [v for v in values if v is not None]
    if not values:
        return {"min": None, "median": None, "max": None, "n": 0}
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def ratio_interval(base: list, other: list, level: float = LEVEL, draws: int = DRAWS) -> tuple[float, float]:
    """The percentile-bootstrap interval of median(other) / median(base); both lists of positive numbers."""
    rng = random.Random(0x5EED)
    ratios = sorted(
        statistics.median(rng.choices(other, k=len(other))) / statistics.median(rng.choices(base, k=len(base)))
        for _unused in range(draws)
    )
    tail = (1 - level) / 2
    return ratios[int(tail * (draws - 1))], ratios[math.ceil((1 - tail) * (draws - 1))]


def repeats_to_resolve(n: int, ratio: float, low: float, high: float) -> int | None:
    """Repeats a side that would bring the interval's half-width (on a log scale) under the observed difference,
    taking the width to shrink as 1/sqrt(repeats); None when the medians are equal (no size to resolve)."""
    diff = abs(math.log(ratio))
    if diff == 0:
        return None
    half = max(math.log(high / ratio), math.log(ratio / low))
    return max(n + 1, min(MOST_REPEATS + 1, math.ceil(n * (half / diff) ** 2)))


def verdict(base: list, other: list, goal: str = "max", floor: float = DEFAULT_FLOOR) -> dict:
    """`other` against `base` (the values of one figure over repeats; goal max: higher is better): ratio of the
    medians, its interval, the verdict (better / worse / no difference / not measured) and, for no difference,
    repeats_needed (a side) to resolve a difference of the observed size (None: the medians are equal, or the
    difference is under the floor)."""
    base = [v for v in base if v is not None and v > 0]
    other = [v for v in other if v is not None and v > 0]
    out = {"ratio": None, "low": None, "high": None, "n": min(len(base), len(other)), "floor": floor}
    if not base or not other:
        return {**out, "verdict": UNKNOWN, "repeats_needed": None}
    ratio = statistics.median(other) / statistics.median(base)
    low, high = ratio_interval(base, other)
    out.update(ratio=ratio, low=low, high=high)
    if out["n"] < MIN_RUNS:  # each side needs them: at 3 runs against 1 identical profiles were called different 47%
        if len(base) == len(other) == 1:
            why = "one run a side: no spread measured"
        else:
            why = f"too few runs for an interval ({len(base)} and {len(other)}; {MIN_RUNS} a side needed)"
        return {**out, "verdict": SAME, "repeats_needed": MIN_RUNS, "why": why}
    clear = (low > 1 or high < 1) and abs(ratio - 1) > floor
    if clear:
        faster = ratio > 1
        return {**out, "verdict": BETTER if faster == (goal == "max") else WORSE, "repeats_needed": None}
    if abs(ratio - 1) <= floor:
        why = f"the medians differ by {abs(ratio - 1):.1%}, within the {floor:.0%} floor"
        return {**out, "verdict": SAME, "repeats_needed": None, "why": why}
    need = repeats_to_resolve(out["n"], ratio, low, high)
    return {**out, "verdict": SAME, "repeats_needed": need, "why": "the interval includes 1"}


def describe(v: dict, name: str = "B", base_name: str = "A") -> str:
    """One line: 'B x1.04 [1.01, 1.07] over 3 repeats: better than A', or why there is no verdict."""
    if v["verdict"] == UNKNOWN:
        return f"{name}: not measured against {base_name}"
    head = f"{name} x{v['ratio']:.3f} [{v['low']:.3f}, {v['high']:.3f}] over {v['n']} repeat{'s' * (v['n'] != 1)}"
    if v["verdict"] in (BETTER, WORSE):
        return f"{head}: {v['verdict']} than {base_name}"
    text = f"{head}: no difference at this noise ({v.get('why')})"
    need = v.get("repeats_needed")
    if need is not None:
        more = f"more than {MOST_REPEATS}" if need > MOST_REPEATS else f"about {need}"
        text += f"; {more} repeats a side would resolve a {abs(v['ratio'] - 1):.1%} difference"
    return text
