"""Run the real `python -m sglang.bench_serving` once per level in one process (importing sglang takes 20-30 s of
CPU, so once, not per level), and say how much CPU each level took. Run it with a Python that has sglang
(tests/bench_serving-requirements.txt); it imports nothing of this project.
write_sharegpt and write_word_tokenizer make its dataset and tokenizer, emulator_flags its flags, and Stepped runs
this script with --step for
tests/test_bench_serving_real.py, benchmarks/client_cpu.py and benchmarks/ttft_connect.py.

    PYTHON benchmarks/bench_serving_run.py [--step] [--keepalive] [--mooncake-fix] OUT.jsonl '[["--max-concurrency", "4", ...], ...]' \
        -- COMMON BENCH_SERVING FLAGS...

Each level runs as `sglang.bench_serving <common flags> <level flags> --output-file OUT.jsonl` through
bench_serving's own command line (sglang.benchmark.serving.cli_main), so it appends one JSON line to OUT.jsonl.
After each level this prints one line `LEVEL {"cpu_s": ..., "wall_s": ...}`: this process's user + system CPU
seconds and the wall seconds of that level (its warm-up and 1 s pause included). With --step it prints `READY`
and waits for a line on standard input before each level (so another tool can run between the levels).
--keepalive makes bench_serving reuse one aiohttp session per level, so kept-alive connections as ours, where it
makes a new session per request (before its TTFT clock starts) and so connects inside that clock: a probe of what
that costs (benchmarks/ttft_connect.py, gpu_parity.py --kept-alive), never a way to report bench_serving's figures.
--mooncake-fix applies sglang 0.5.19's fix of `--dataset-name mooncake` to 0.5.13-0.5.16, whose replay stops with
an AttributeError before its first request (mooncake_rows_fix; benchmarks/trace_parity.py).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

# No Hugging Face Hub look-ups: the tokenizer is a local folder (without this, each run waits on the network).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def write_sharegpt(path: Path, prompts: list) -> Path:
    """prompts as a ShareGPT file, one conversation each (the answer is unused when the output length is forced)."""
    rows = [
        {"id": str(i), "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "ok"}]}
        for i, p in enumerate(prompts)
    ]
    path.write_text(json.dumps(rows))
    return path


def write_word_tokenizer(folder: Path, dataset: Path) -> Path:
    """A word-level tokenizer for bench_serving (`--tokenizer FOLDER/tokenizer`): one token per whitespace-separated
    word, as the emulator counts a prompt (sglang_deploy.emulator.generation.prompt_token_count)."""
    rows = json.loads(dataset.read_text())
    words = sorted({w for row in rows for turn in row["conversations"] for w in turn["value"].split()})
    vocab = {"[UNK]": 0} | {w: i + 1 for i, w in enumerate(words)}
    unk = {"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [unk | {"normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    out = folder / "tokenizer"
    out.mkdir(exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 32768}
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def emulator_flags(url: str, model: str, tokenizer: Path, dataset: Path, output_len: int, seed: int) -> list:
    """bench_serving's flags for a streamed chat run against the emulator: the ShareGPT file with the length forced,
    one warm-up request, no progress bar."""
    flags = ["--backend", "sglang-oai-chat", "--base-url", url, "--model", model, "--tokenizer", str(tokenizer)]
    flags += ["--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--sharegpt-output-len", str(output_len)]
    return flags + ["--seed", str(seed), "--warmup-requests", "1", "--disable-tqdm"]


def keep_connections_alive(serving) -> None:
    """Patch bench_serving to reuse one session per run (it looks its session factory and its benchmark coroutine up
    by name): the session is made at the first request of a level's event loop and closed when that level's
    benchmark ends. aiohttp's default pool holds 100 connections: more requests in flight would queue."""
    import asyncio

    make, run, sessions = serving._create_bench_client_session, serving.benchmark, {}

    class Kept:
        async def __aenter__(self):
            loop = asyncio.get_running_loop()
            if loop not in sessions:
                sessions[loop] = make()
            return sessions[loop]

        async def __aexit__(self, *exc) -> bool:
            return False

    async def benchmark(*args, **kwargs):
        try:
            return await run(*args, **kwargs)
        finally:
            session = sessions.pop(asyncio.get_running_loop(), None)
            if session is not None:
                await session.close()

    serving._create_bench_client_session, serving.benchmark = Kept, benchmark


def mooncake_rows_fix(serving) -> None:
    """Make sglang 0.5.13-0.5.16's `--dataset-name mooncake` run, as 0.5.19 fixed it: their benchmark() reads
    `input_requests[0].prompt` of the trace's rows, which are dicts (AttributeError: 'dict' object has no attribute
    'prompt', before any request), and calculate_metrics reads each row's `.prompt_len`. 0.5.19 skips the first read
    for mooncake and gives calculate_metrics the DatasetRows its replay (get_mooncake_request_over_time) yielded, in
    the order sent; so does this: each row a dict whose `.prompt` is "" (not a list: not multi-turn), and
    calculate_metrics given the rows the replay yielded. Its prompts, send times and requests are unchanged, and
    with 0.5.19 or later it changes nothing (the rows it sees there are DatasetRows)."""
    load, replay, metrics, sent = (
        serving.get_dataset,
        serving.get_mooncake_request_over_time,
        serving.calculate_metrics,
        [],
    )

    class Row(dict):
        prompt = ""

    def get_dataset(args, *rest, **kw):
        rows = load(args, *rest, **kw)
        return [Row(r) for r in rows] if args.dataset_name == "mooncake" else rows

    async def over_time(*args, **kw):
        sent.clear()
        async for row in replay(*args, **kw):
            sent.append(row)
            yield row

    def calculate_metrics(*args, **kw):
        if kw.get("input_requests") and isinstance(kw["input_requests"][0], Row):
            kw["input_requests"] = list(sent)
        return metrics(*args, **kw)

    serving.get_dataset, serving.get_mooncake_request_over_time = get_dataset, over_time
    serving.calculate_metrics = calculate_metrics


class Stepped:
    """This script with --step in a child process of `python`: bench_serving imported once, a level per level()."""

    def __init__(
        self,
        python: str,
        out: Path,
        levels: list,
        common: list,
        log: Path,
        keepalive=False,
        preexec_fn=None,
        mooncake_fix=False,
    ):
        self.out = out
        cmd = [
            python,
            str(Path(__file__).resolve()),
            "--step",
            *(["--keepalive"] if keepalive else []),
            *(["--mooncake-fix"] if mooncake_fix else []),
            str(out),
            json.dumps(levels),
        ]
        self.log = open(log, "wb")  # noqa: SIM115  closed in close()
        self.proc = subprocess.Popen(
            [*cmd, "--", *common],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            preexec_fn=preexec_fn,
        )

    def _until(self, marker: str) -> str:
        for line in self.proc.stdout:
            if line.startswith(marker):
                return line
        self.proc.wait(30)
        tail = Path(self.log.name).read_text(errors="replace")[-3000:]
        raise RuntimeError(f"bench_serving exited {self.proc.returncode} before {marker}: {tail}")

    def level(self) -> tuple[dict, dict]:
        """Runs the next level: bench_serving's result line, and the child's {"cpu_s", "wall_s"} for it."""
        self._until("READY")
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        spent = json.loads(self._until("LEVEL")[6:])
        return json.loads(self.out.read_text().splitlines()[-1]), spent

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def parse(argv: list) -> tuple[set, str, list, list]:
    """[--step] [--keepalive] [--mooncake-fix] OUT LEVELS [--] COMMON... -> (the options given, OUT, the levels, the common flags)."""
    argv, options = list(argv), set()
    while argv and argv[0] in ("--step", "--keepalive", "--mooncake-fix"):
        options.add(argv.pop(0))
    if len(argv) < 2:
        raise SystemExit(__doc__)
    return options, argv[0], json.loads(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:]


def main(argv: list) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print("usage: " + __doc__)
        return 0
    options, out, levels, common = parse(argv)
    step, keepalive = "--step" in options, "--keepalive" in options
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # sglang.bench_serving is the deprecated name of this module
        from sglang.benchmark import serving
    if keepalive:
        keep_connections_alive(serving)
    if "--mooncake-fix" in options:
        mooncake_rows_fix(serving)
    print("IMPORTED", json.dumps({"cpu_s": _cpu()}), flush=True)
    for flags in levels:
        if step:
            print("READY", flush=True)
            if not sys.stdin.readline():
                return 1
        sys.argv = ["sglang.bench_serving", *common, *flags, "--output-file", out]
        cpu0, t0 = _cpu(), time.perf_counter()
        serving.cli_main()
        print("LEVEL", json.dumps({"cpu_s": _cpu() - cpu0, "wall_s": time.perf_counter() - t0}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
