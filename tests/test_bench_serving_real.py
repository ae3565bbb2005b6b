"""Ours against the real `python -m sglang.bench_serving` (sglang 0.5.16) on the emulator, side by side (issue 22
item 6): the same ShareGPT file, seed, request counts and output length, level by level in alternating order.

The emulator's timing is deterministic: every stream gets its first token TTFT_MS after the request arrives and
then one token every 1/RATE s on a virtual clock shared by all streams (no aggregate limit, so no stream slows
another), whatever the prompt or the client. Both tools see the same token schedule; what differs is how each
client reads it, on a machine shared with other work. Measured here on 2026-12-01 (2 cores, a CI run beside it,
load average 7-10): per token (TPOT, ITL mean and median) the two agreed within 2% but for one scheduling hiccup
of ~50 ms in 66 gaps (+2.1% on a mean), so 4%; per request bench_serving starts its clock before it makes a new
aiohttp session and connection (ours: right before the request is written on a kept-alive connection), which
added 7-50 ms to its TTFT (up to +25% of 200 ms at c=4) and up to 13% to a level's duration, so TTFT mean and
output tok/s get 30%. (On a quiet GPU host the goal is 2%, and 5% or 3 ms: issue 22 item 5.) A difference in
the definitions is larger or exact: a TPOT over n instead of n - 1 tokens is 1/11 = 9% at 12 tokens; output
and input token counts must be equal.

At a request rate the arrivals are the same: ours draws bench_serving's gaps for the seed (workload.arrival_gaps,
checked here against the numpy beside bench_serving), so the level's duration and output tok/s compare too.

Token counts: the emulator counts one token per whitespace-separated word; bench_serving counts the dataset's
prompts with a tokenizer; this test gives it a word-level tokenizer (tokenizer.json written here) so both count
the same (checked: its total input tokens equal the emulator's usage counts).

bench_serving runs from a Python with sglang: SGLANG_DEPLOY_BENCH_SERVING_PYTHON, else this interpreter
(tests/bench_serving-requirements.txt says how to install it). Without it the test skips, naming the install;
with SGLANG_DEPLOY_CI=1 (CI) it fails instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_serving_run import Stepped, emulator_flags, write_sharegpt, write_word_tokenizer
from emulator_proc import Emulator

from ansible_collections.sglang.deploy.plugins.module_utils import bench
from ansible_collections.sglang.deploy.plugins.module_utils.bench import workload
from ansible_collections.sglang.deploy.plugins.module_utils.bench.workload import build_prompt

PYTHON_ENV = "SGLANG_DEPLOY_BENCH_SERVING_PYTHON"
REQUIREMENTS = "tests/bench_serving-requirements.txt"
RATE, TTFT_MS, OUTPUT_LEN, INPUT_LEN, SEED = 25.0, 200.0, 12, 64, 42
# (label, our arguments, bench_serving's flags): two concurrency levels and one request rate.
LEVELS = (
    ("c=1", {"concurrency": [1], "requests": 2}, ["--max-concurrency", "1", "--num-prompts", "2"]),
    ("c=4", {"concurrency": [4], "requests": 4}, ["--max-concurrency", "4", "--num-prompts", "4"]),
    ("4 req/s", {"request_rate": [4.0], "requests": 6}, ["--request-rate", "4", "--num-prompts", "6"]),
)
# (label, our level key, statistic, bench_serving key, relative tolerance, absolute tolerance ms)
FIGURES = (
    ("output tok/s", "output_throughput_tok_s", None, "output_throughput", 0.30, None),
    ("TPOT mean ms", "tpot_ms", "mean", "mean_tpot_ms", 0.04, None),
    ("TPOT median ms", "tpot_ms", "p50", "median_tpot_ms", 0.04, None),
    ("ITL mean ms", "itl_ms", "mean", "mean_itl_ms", 0.04, None),
    ("ITL median ms", "itl_ms", "p50", "median_itl_ms", 0.04, None),
    ("TTFT mean ms", "ttft_ms", "mean", "mean_ttft_ms", 0.30, 3.0),
)
FAVOUR_NICE = -10


def bench_serving_python() -> str:
    """The Python that runs bench_serving; skips (fails under SGLANG_DEPLOY_CI=1) when sglang's is not there."""
    python = os.environ.get(PYTHON_ENV) or sys.executable
    probe = (
        "import importlib.util, pathlib; s = importlib.util.find_spec('sglang'); "
        "print(s is not None and (pathlib.Path(s.origin).parent / 'benchmark' / 'serving.py').is_file())"
    )
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError as exc:
        found = f"cannot run {python}: {exc}"
    if found != "True":
        reason = (
            f"sglang.bench_serving is not importable from {python} ({found or 'no answer'}): make a Python 3.12 venv, "
            f"`VENV/bin/pip install --no-deps -r {REQUIREMENTS}` and set {PYTHON_ENV}=VENV/bin/python"
        )
        if os.environ.get("SGLANG_DEPLOY_CI") == "1":
            pytest.fail("CI (SGLANG_DEPLOY_CI=1) must run the bench_serving parity test: " + reason)
        pytest.skip(reason)
    return python


def bench_serving(python: str, tmp_path: Path, url: str, dataset: Path, tokenizer: Path) -> Stepped:
    """bench_serving imported once in a child process, one of LEVELS per level()."""
    common = emulator_flags(url, "qwen", tokenizer, dataset, OUTPUT_LEN, SEED) + ["--ready-check-timeout-sec", "10"]
    levels = [flags for _, _, flags in LEVELS]
    return Stepped(python, tmp_path / "bench_serving.jsonl", levels, common, tmp_path / "bench_serving.log")


def favour(*pids: int) -> None:
    """Raise the scheduling priority of the processes that measure and serve (root only; else unchanged)."""
    for pid in pids:
        try:
            os.setpriority(os.PRIO_PROCESS, pid, FAVOUR_NICE)
        except OSError:
            pass


def ours(url: str, dataset: Path, settings: dict) -> dict:
    result = bench.run_benchmark(
        url,
        dataset_name="sharegpt",
        dataset_path=str(dataset),
        sharegpt_output_len=OUTPUT_LEN,
        seed=SEED,
        warmup=1,
        timeout=60,
        model="qwen",
        **settings,
    )
    return result["levels"][0]


def differences(figures, mine: dict, theirs: dict) -> list:
    out = []
    for label, key, stat, their_key, rel, abs_ms in figures:
        a = mine[key] if stat is None else mine[key][stat]
        b = theirs[their_key]
        limit = max(rel * abs(b), abs_ms or 0.0)
        if not abs(a - b) <= limit:
            out.append(f"{label}: ours {a:.3f}, bench_serving {b:.3f} (limit +-{limit:.3f})")
    return out


def test_our_figures_equal_bench_servings_on_the_emulator(tmp_path):
    python = bench_serving_python()
    dataset = write_sharegpt(tmp_path / "sharegpt.json", [build_prompt(i, INPUT_LEN) for i in range(64)])
    tokenizer = write_word_tokenizer(tmp_path, dataset)
    emu = Emulator(tmp_path, decode_tok_s=RATE, ttft_ms=TTFT_MS).wait_ready()
    theirs_run = bench_serving(python, tmp_path, emu.url, dataset, tokenizer)
    own_nice = os.getpriority(os.PRIO_PROCESS, 0)
    favour(0, emu.proc.pid, theirs_run.proc.pid)
    try:
        problems, table = [], []
        for label, settings, _ in LEVELS:
            theirs = theirs_run.level()[0]
            mine = ours(emu.url, dataset, settings)
            assert mine["failed"] == 0 and theirs["completed"] == settings["requests"], (mine["errors"], theirs)
            assert mine["output_len_mismatch"]["count"] == 0, mine["output_len_mismatch"]
            # the same token counts: output from usage, input by the emulator (ours) and the word tokenizer (theirs)
            assert theirs["total_output_tokens"] == mine["output_tokens"] == settings["requests"] * OUTPUT_LEN
            assert theirs["total_input_tokens"] == mine["input_tokens"], (
                theirs["total_input_tokens"],
                mine["input_tokens"],
            )
            found = differences(FIGURES, mine, theirs)
            problems += [f"{label} {p}" for p in found]
            table.append((label, mine, theirs))
    finally:
        theirs_run.close()
        emu.stop()
        try:  # the tests after this one run at this process's own priority again
            os.setpriority(os.PRIO_PROCESS, 0, own_nice)
        except OSError:
            pass
    for label, mine, theirs in table:
        print(
            label,
            {
                f[0]: (round(mine[f[1]] if f[2] is None else mine[f[1]][f[2]], 3), round(theirs[f[3]], 3))
                for f in FIGURES
            },
        )
    assert not problems, problems


def test_our_arrival_gaps_are_bench_servings_numpy_draws():
    """1000 gaps per seed and rate, bit for bit, against the numpy of the Python that runs bench_serving (its
    get_request: np.random.seed(seed), then np.random.exponential(1 / rate) per gap)."""
    cases = [(42, 4.0), (1, 16.0), (0, 0.5), (2**32 - 1, 25.0)]
    code = (
        "import json, sys, numpy as np\n"
        "out = []\n"
        "for seed, rate in json.loads(sys.argv[1]):\n"
        "    np.random.seed(seed)\n"
        "    out.append([float(np.random.exponential(1.0 / rate)) for _ in range(1000)])\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [bench_serving_python(), "-c", code, json.dumps(cases)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for (seed, rate), theirs in zip(cases, json.loads(done.stdout), strict=True):
        gaps = workload.arrival_gaps(seed, rate)
        assert [next(gaps) for _ in theirs] == theirs, (seed, rate)
