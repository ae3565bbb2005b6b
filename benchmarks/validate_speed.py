#!/usr/bin/env python3
"""How fast the seed's failing launches are refused: render + validate, in-process and through the CLI.

    python benchmarks/validate_speed.py

Prints figures (ms); the target is "well under a second".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from sglang_deploy.launch import profiles
from sglang_deploy.rules import rules

SEED = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "seed_launches.yml"
FACTS = {
    "gpu_arch": "sm_120",
    "gpu_count": 8,
    "nvlink": False,
    "model_architecture": "Qwen3_5MoeForConditionalGeneration",
    "model_quantization": "modelopt_fp4",
}
FAILING = ["seed-msg5980", "seed-msg5983", "seed-spec-v2-topk2"]


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    profile_defs = profiles.load_profiles(SEED)
    settings = profiles.load_settings()
    start = time.perf_counter()
    profiles.render(FAILING[0], profile_defs, settings, "0.5.10.post1")  # first call loads the recorded flag list
    print(f"first render (loads flags-0.5.10.post1.json): {(time.perf_counter() - start) * 1000:.1f} ms")
    for name in FAILING:
        times = []
        for _ in range(200):
            t0 = time.perf_counter()
            findings = rules.validate(profiles.render(name, profile_defs, settings, "0.5.10.post1"), FACTS, 32)
            times.append((time.perf_counter() - t0) * 1000)
        refused = sorted({f.rule for f in rules.errors(findings)})
        print(f"{name:20} refused by {refused}: median {statistics.median(times):.2f} ms, max {max(times):.2f} ms")
    for name in FAILING:
        t0 = time.perf_counter()
        rc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sglang_deploy.cli",
                "validate",
                name,
                "--profiles-file",
                str(SEED),
                "--sglang-version",
                "0.5.10.post1",
                "--gpu-arch",
                "sm_120",
                "--gpus",
                "8",
            ],
            capture_output=True,
        ).returncode
        print(
            f"CLI validate {name:20} exit {rc} in {(time.perf_counter() - t0) * 1000:.0f} ms (process start included)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
