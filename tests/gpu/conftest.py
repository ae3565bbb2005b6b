"""The GPU suite: real SGLang on a real GPU (marker `gpu`). Skipped unless nvidia-smi lists a GPU and the
`sglang` package imports. Recordings and figures go to --gpu-out (default: a pytest temporary folder).

    python -m pytest tests/gpu --gpu-out results/gpu-$(hostname)
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GPU_DIR = Path(__file__).resolve().parent


def _gpu_count() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"],
            capture_output=True,
            check=False,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def _skip_reason() -> str | None:
    if not _gpu_count():
        return "no NVIDIA GPU (nvidia-smi lists none)"
    if importlib.util.find_spec("sglang") is None:
        return "sglang is not installed in this Python"
    return None


def pytest_addoption(parser):
    parser.addoption(
        "--gpu-out",
        metavar="DIR",
        help="folder for the GPU suite's recordings and figures",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and an installed SGLang (tests/gpu)")


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if GPU_DIR not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.gpu)
        reason = reason or _skip_reason() or "ok"
        if reason != "ok":
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def gpu_count() -> int:
    return _gpu_count()


@pytest.fixture(scope="session")
def out_dir(request, tmp_path_factory) -> Path:
    given = request.config.getoption("--gpu-out")
    path = Path(given) if given else tmp_path_factory.mktemp("gpu-out")
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


@pytest.fixture(scope="session")
def models(out_dir) -> dict:
    """The two small model folders (tools/make_models.py), made once per output folder."""
    root = out_dir / "models"
    if not (root / "hybrid" / "config.json").exists():
        subprocess.run(
            [
                sys.executable,
                str(GPU_DIR.parents[1] / "tools" / "make_models.py"),
                str(root),
            ],
            check=True,
        )
    return {"dense": root / "dense", "hybrid": root / "hybrid"}
