"""Run `sglang-deploy bench` and `python -m sglang.bench_serving` on the same server and workload, and put
their figures side by side (a table as JSON rows and a PNG)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import harness
from harness import REPO, Server

# bench_serving and transformers look nothing up on the Hub (the GPU host may be offline).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
# Per level: (our key, our statistic, bench_serving key); bench_serving reports mean and median.
FIGURES = (
    ("output_throughput_tok_s", None, "output_throughput"),
    ("ttft_ms", "mean", "mean_ttft_ms"),
    ("ttft_ms", "p50", "median_ttft_ms"),
    ("tpot_ms", "mean", "mean_tpot_ms"),
    ("itl_ms", "mean", "mean_itl_ms"),
    ("itl_ms", "p50", "median_itl_ms"),
    ("e2e_ms", "mean", "mean_e2e_latency_ms"),
)


def ours(server: Server, levels, out: Path, input_len: int, output_len: int) -> dict:
    """`sglang-deploy bench` (the project's CLI, from this checkout's src: nothing to install) with the API key
    from an environment variable."""
    here = [str(REPO / "src"), str(REPO / "collections")]  # the package, and the collection it imports (its link)
    path = os.pathsep.join(filter(None, [*here, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "GPU_SUITE_KEY": server.api_key or "", "PYTHONPATH": path}
    cmd = [
        sys.executable,
        "-m",
        "sglang_deploy.cli",
        "bench",
        "--url",
        server.url,
        "--concurrency",
        ",".join(map(str, levels)),
        "--input-len",
        str(input_len),
        "--output-len",
        str(output_len),
        "--json",
        str(out),
    ]
    if server.api_key:
        cmd += ["--api-key-env", "GPU_SUITE_KEY"]
    proc = subprocess.run(cmd, capture_output=True, check=False, text=True, env=env, timeout=600)
    out.with_suffix(".txt").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def bench_serving(
    server: Server,
    model: Path,
    levels,
    requests,
    out: Path,
    input_len: int,
    output_len: int,
    extra_body: dict | None = None,
    warmup: int = 2,
) -> dict:
    """`python -m sglang.bench_serving` (sglang-oai-chat backend, random-ids, fixed lengths) per level. --model is
    the model folder (bench_serving loads its chat template from --model: a served name made it query the Hub,
    about 45 s of retries per run offline), --served-model-name the name requests carry."""
    env = {**os.environ, **OFFLINE_ENV, "OPENAI_API_KEY": server.api_key or ""}
    rows = {}
    log = []
    for c in levels:
        jsonl = out.parent / f"{out.stem}-c{c}.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "sglang.bench_serving",
            "--backend",
            "sglang-oai-chat",
            "--base-url",
            server.url,
            "--dataset-name",
            "random-ids",
            "--tokenizer",
            str(model),
            "--model",
            str(model),
            "--served-model-name",
            server.launch.args["served-model-name"],
            "--random-input-len",
            str(input_len),
            "--random-output-len",
            str(output_len),
            "--random-range-ratio",
            "1.0",
            "--num-prompts",
            str(requests[c]),
            "--max-concurrency",
            str(c),
            "--warmup-requests",
            str(warmup),
            "--output-file",
            str(jsonl),
        ]
        if extra_body:
            cmd += ["--extra-request-body", json.dumps(extra_body)]
        proc = subprocess.run(cmd, capture_output=True, check=False, text=True, env=env, timeout=600)
        log.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        rows[str(c)] = json.loads(harness.scrub_key(jsonl).read_text().strip().splitlines()[-1])
    out.with_suffix(".txt").write_text("\n".join(log))
    out.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def side_by_side(our_result: dict, theirs: dict) -> list[dict]:
    rows = []
    for level in our_result["levels"]:
        c = level["concurrency"]
        other = theirs[str(c)]
        row = {
            "concurrency": c,
            "requests_ours": level["completed"],
            "requests_bench_serving": other.get("completed"),
            "decode_tok_s_per_request_p50": (level["decode_tok_s_per_request"] or {}).get("p50"),
        }
        for key, stat, their_key in FIGURES:
            mine = level[key] if stat is None else (level[key] or {}).get(stat)
            label = key if stat is None else f"{key}_{stat}"
            row[f"{label}_ours"] = mine
            row[f"{label}_bench_serving"] = other.get(their_key)
        rows.append(row)
    return rows


def mean_rows(pairs: list[list[dict]]) -> list[dict]:
    """side_by_side rows of several runs -> one row per level, each figure the mean over the runs (None where a run
    lacks it). Every run must have the same levels in the same order."""
    levels = [[row["concurrency"] for row in pair] for pair in pairs]
    assert all(lv == levels[0] for lv in levels), levels
    rows = []
    for level_rows in zip(*pairs):
        row = {}
        for key, value in level_rows[0].items():
            values = [r[key] for r in level_rows]
            numeric = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in values]
            if key == "concurrency" or not any(numeric):
                row[key] = value
            else:
                row[key] = sum(values) / len(values) if all(numeric) else None
        rows.append(row)
    return rows


def plot(rows: list[dict], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("output_throughput_tok_s", "output tok/s"),
        ("ttft_ms_mean", "TTFT mean (ms)"),
        ("tpot_ms_mean", "TPOT mean (ms)"),
        ("itl_ms_mean", "ITL mean (ms)"),
    )
    conc = [r["concurrency"] for r in rows]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
    for ax, (key, label) in zip(axes, panels):
        ax.plot(conc, [r[f"{key}_ours"] for r in rows], "o-", label="sglang-deploy bench")
        ax.plot(
            conc,
            [r[f"{key}_bench_serving"] for r in rows],
            "s--",
            label="sglang.bench_serving",
        )
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc, [str(c) for c in conc])
        ax.set_xlabel("concurrency")
        ax.set_title(label)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
