"""Run the real `python -m sglang.bench_serving` once per level in one process (importing sglang takes 20-30 s of
CPU, so once, not per level), and say how much CPU each level took. Run it with a Python that has sglang
(tests/bench_serving-requirements.txt); it imports nothing of this project.
write_sharegpt and write_word_tokenizer make its dataset and tokenizer (the test and benchmarks/client_cpu.py).

    PYTHON tests/bench_serving_run.py [--step] OUT.jsonl '[["--max-concurrency", "4", "--num-prompts", "16"], ...]' \
        -- COMMON BENCH_SERVING FLAGS...

Each level runs as `sglang.bench_serving <common flags> <level flags> --output-file OUT.jsonl` through
bench_serving's own command line (sglang.benchmark.serving.cli_main), so it appends one JSON line to OUT.jsonl.
After each level this prints one line `LEVEL {"cpu_s": ..., "wall_s": ...}`: this process's user + system CPU
seconds and the wall seconds of that level (its warm-up and 1 s pause included). With --step it prints `READY`
and waits for a line on standard input before each level (so another tool can run between the levels).
"""

from __future__ import annotations

import json
import os
import resource
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


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv: list) -> int:
    step = argv[:1] == ["--step"]
    argv = argv[1:] if step else argv
    out, levels, common = argv[0], json.loads(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # sglang.bench_serving is the deprecated name of this module
        from sglang.benchmark import serving
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
