"""tools/gpu_stage.py plan: the transfer plan names each part by its path from the repository root, whatever the
parts folder, and refuses a folder that would not travel or would travel with every call."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_stage", REPO / "tools" / "gpu_stage.py")
gpu_stage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_stage)


def _repo(tmp_path: Path, ignore: str | None) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    if ignore:
        (repo / ".gitignore").write_text(ignore + "\n")
    return repo


def _parts(folder: Path, count: int = 2) -> Path:
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"part{i:02d}").write_bytes(b"x" * 10)
    (folder / "wheels.sha256").write_text("0" * 64 + "  wheels.tar\n")
    return folder


def test_plan_names_parts_from_the_repository_root_wherever_run(tmp_path, monkeypatch):
    repo = _repo(tmp_path, "/build/")
    parts = _parts(repo / "build" / "stage" / "parts")
    monkeypatch.chdir(tmp_path)  # not the repository root: the printed paths must not depend on it
    lines = gpu_stage.plan(Path("checkout/build/stage/parts"))
    steps = [line for line in lines if not line.startswith("#")]
    assert steps == [
        "carry=build/stage/parts/part00  command: mkdir -p /root/stage && mv build/stage/parts/part00 /root/stage/",
        "carry=build/stage/parts/part01,build/stage/parts/wheels.sha256  command: mkdir -p /root/stage && "
        "mv build/stage/parts/part01 build/stage/parts/wheels.sha256 /root/stage/",
    ]
    assert "git-ignored" in lines[0] and str(repo) in lines[0]
    assert parts.is_dir()


def test_plan_refuses_parts_that_are_not_git_ignored(tmp_path):
    repo = _repo(tmp_path, None)
    _parts(repo / "parts")
    with pytest.raises(gpu_stage.PlanError, match=r"not git-ignored.*\.git/info/exclude"):
        gpu_stage.plan(repo / "parts")


def test_plan_refuses_parts_outside_a_checkout(tmp_path):
    parts = _parts(tmp_path / "parts")
    with pytest.raises(gpu_stage.PlanError, match="inside a git checkout"):
        gpu_stage.plan(parts)


def test_plan_refuses_a_part_that_does_not_fit_one_call(tmp_path, monkeypatch):
    repo = _repo(tmp_path, "/build/")
    _parts(repo / "build" / "parts")
    monkeypatch.setattr(gpu_stage, "TRANSFER_BYTES", 15)
    with pytest.raises(gpu_stage.PlanError, match="--part-bytes"):
        gpu_stage.plan(repo / "build" / "parts")


def test_plan_command_exits_2_with_the_fix(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gpu_stage.py"), "plan", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "git-ignored folder" in proc.stderr


def test_install_exits_with_the_reason_for_a_sha256_file_linked_to_a_device(tmp_path):
    # It was read whole (/dev/zero: until memory ran out) and a missing one gave a traceback.
    stage = _parts(tmp_path / "stage")
    (stage / "wheels.sha256").unlink()
    with pytest.raises(SystemExit, match="gpu_stage install: .*wheels.sha256 is missing"):
        gpu_stage.install(stage, tmp_path / "site")
    (stage / "wheels.sha256").symlink_to("/dev/zero")
    with pytest.raises(SystemExit, match="gpu_stage install: .*wheels.sha256 is not a regular file"):
        gpu_stage.install(stage, tmp_path / "site")
