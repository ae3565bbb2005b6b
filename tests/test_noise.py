"""sglang_deploy.compare.noise: spreads over repeats, the bootstrap interval of a ratio of medians and the verdict on it."""

from __future__ import annotations

import random

import pytest

from sglang_deploy.compare import noise


def test_spread_is_min_median_max_of_the_values_given():
    assert noise.spread([3.0, None, 1.0, 2.0]) == {"min": 1.0, "median": 2.0, "max": 3.0, "n": 3}
    assert noise.spread([None]) == {"min": None, "median": None, "max": None, "n": 0}


def test_the_interval_brackets_the_ratio_and_is_the_same_for_the_same_runs():
    a, b = [100.0, 102.0, 98.0], [110.0, 108.0, 112.0]
    low, high = noise.ratio_interval(a, b)
    assert low <= 110 / 100 <= high
    # at three runs a side the percentile bootstrap reaches the extremes: about min B / max A .. max B / min A
    assert low == pytest.approx(108 / 102) and high == pytest.approx(112 / 98)
    assert noise.ratio_interval(a, b) == (low, high)


def test_a_clear_difference_is_called_with_its_direction_and_goal():
    a, b = [100.0, 101.0, 99.0], [110.0, 111.0, 109.0]
    assert noise.verdict(a, b)["verdict"] == noise.BETTER
    assert noise.verdict(b, a)["verdict"] == noise.WORSE
    assert noise.verdict(a, b, goal="min")["verdict"] == noise.WORSE  # a time: higher is worse
    assert "better than A" in noise.describe(noise.verdict(a, b))


def test_overlapping_runs_are_no_difference_with_the_repeats_that_would_resolve_it():
    a, b = [100.0, 106.0, 97.0], [103.0, 109.0, 100.0]  # B 3% ahead in its median, the runs overlapping
    v = noise.verdict(a, b)
    assert v["verdict"] == noise.SAME and v["low"] < 1 < v["high"]
    assert v["repeats_needed"] > 3
    text = noise.describe(v, "B", "A")
    assert "no difference at this noise (the interval includes 1)" in text
    assert f"about {v['repeats_needed']} repeats a side would resolve a 3.0% difference" in text


def test_a_difference_under_the_floor_is_no_difference_even_when_the_runs_do_not_overlap():
    a, b = [100.0, 100.1, 100.2], [101.0, 101.1, 101.2]  # 1% apart, every run of B above every run of A
    v = noise.verdict(a, b, floor=0.02)
    assert v["verdict"] == noise.SAME and v["repeats_needed"] is None and "within the 2% floor" in v["why"]
    assert noise.verdict(a, b, floor=0.0)["verdict"] == noise.BETTER


def test_one_run_a_side_gives_no_verdict_and_nothing_measured_says_so():
    v = noise.verdict([100.0], [150.0])
    assert v["verdict"] == noise.SAME and v["why"] == "one run a side: no spread measured"
    assert noise.verdict([], [1.0])["verdict"] == noise.UNKNOWN
    v = noise.verdict([100.0, 101.0], [130.0, 131.0])  # two runs a side: no interval worth the name
    assert v["verdict"] == noise.SAME and v["repeats_needed"] == 3
    assert v["why"] == "too few runs for an interval (2 and 2; 3 a side needed)"
    assert noise.verdict([100.0, 101.0, 99.0], [100.0, 101.0, 99.0])["repeats_needed"] is None  # equal medians


@pytest.mark.parametrize(("base_n", "other_n"), [(3, 1), (1, 3), (5, 2)])
def test_both_sides_need_the_minimum_runs_for_a_verdict(base_n, other_n):
    """The rule checked the larger side only: 3 runs against 1 (one of a profile's deploys failed) got a verdict,
    and identical profiles were called different 47% of the time (issue 48 R6)."""
    rng = random.Random(11)

    def runs(n):
        return [100 * rng.lognormvariate(0, 0.03) for _ in range(n)]

    verdicts = [noise.verdict(runs(base_n), runs(other_n)) for _ in range(50)]
    assert all(v["verdict"] == noise.SAME and v["repeats_needed"] == 3 for v in verdicts)
    assert verdicts[0]["why"] == f"too few runs for an interval ({base_n} and {other_n}; 3 a side needed)"


@pytest.mark.parametrize(("n", "least_found"), [(3, 85), (5, 95)])
def test_on_simulated_runs_a_true_five_percent_is_found_and_no_difference_is_rarely_called(n, least_found):
    """Lognormal run-to-run noise of 1.5%: a true 5% difference is called in nearly every trial, two identical
    profiles almost never (the 2% floor holds back what the coarse interval lets through)."""
    rng = random.Random(7)

    def runs(mean):
        return [mean * rng.lognormvariate(0, 0.015) for _ in range(n)]

    found = sum(noise.verdict(runs(100), runs(105))["verdict"] == noise.BETTER for _ in range(100))
    false = sum(noise.verdict(runs(100), runs(100))["verdict"] != noise.SAME for _ in range(100))
    assert found >= least_found and false <= 5, (found, false)


def test_the_ab_benchmark_runs_and_finds_an_obvious_difference(tmp_path):
    """benchmarks/ab_noise.py end to end on three emulators, kept small: B 50% faster is called better at the
    first verdict (after the third round), every verdict on A2 (alike) is counted, and --help works."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "ab_noise.py"
    assert (
        "LAB: three emulated SGLang servers"
        in subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, check=True).stdout
    )
    out = tmp_path / "ab.json"
    # 8 requests of 32 tokens a run: long enough that a busy host's lag does not rival a 50% difference
    args = ["--trials", "1", "--max-repeats", "3", "--requests", "8", "--output-len", "32", "--effect", "0.5"]
    run = subprocess.run(
        [sys.executable, script, *args, "--noise", "0.01", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "B found in 1 of 1 trials, at 3 / 3 / 3 repeats" in run.stdout, run.stdout
    assert "A2 called different in " in run.stdout and " of 1 verdicts" in run.stdout  # its rate: the simulation above
    assert json.loads(out.read_text())["trials"][0]["found_at"] == 3


def _scripts() -> list:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    paths = [p for d in ("benchmarks", "calibration") for p in (root / d).glob("*.py")]
    # the scripts; a module they share (benchmarks/local_emulator.py) runs nothing
    return sorted(str(p.relative_to(root)) for p in paths if "__main__" in p.read_text())


@pytest.mark.parametrize("script", _scripts())
def test_every_benchmark_and_calibration_script_answers_help_without_running(script):
    """A script's --help prints its usage and runs nothing (validate_speed.py ran its benchmark instead)."""
    import subprocess
    import sys
    from pathlib import Path

    run = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stdout.startswith("usage: "), (run.stdout[:300], run.stderr[-300:])
