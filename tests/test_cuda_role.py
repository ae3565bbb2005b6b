"""The cuda role's present method: the toolkit an image already has (NGC/DGX-style images, the H200 lab) is used as
it is, checked with its nvcc, and exported like the other methods' toolkits; nothing is installed."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from ansible_json import REPO, needs_playbook, run_playbook


def run_cuda_role(tmp_path: Path, home: Path, *args: str):
    play = [
        {"hosts": "localhost", "gather_facts": False, "tasks": [{"ansible.builtin.include_role": {"name": "cuda"}}]}
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    return run_playbook(
        ["-i", "localhost,", "-c", "local", "play.yml", "-e", f"ansible_python_interpreter={sys.executable}"]
        + ["-e", "cuda_install_method=present", "-e", f"cuda_present_home={home}"]
        + ["-e", f"_cuda_fact_file={tmp_path}/facts.d/sglang_cuda.fact", *args],
        tmp_path,
        {"ANSIBLE_ROLES_PATH": str(REPO / "roles"), "PATH": "/usr/bin:/bin"},  # no nvidia-smi: no GPU checks
    )


def toolkit(tmp_path: Path, release: str) -> Path:
    home = tmp_path / f"cuda-{release}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.88'\n")
    nvcc.chmod(0o755)
    return home


@needs_playbook
def test_present_uses_the_images_toolkit_and_records_its_facts(tmp_path):
    home = toolkit(tmp_path, "13.0")
    out, doc = run_cuda_role(tmp_path, home)
    assert doc["stats"]["localhost"]["failures"] == 0, out.stdout[-3000:]
    fact = yaml.safe_load((tmp_path / "facts.d" / "sglang_cuda.fact").read_text())
    assert fact["method"] == "present" and fact["cuda_home"] == str(home)
    assert fact["path"] == [f"{home}/bin"] and fact["nvcc_version"] == "13.0.88"


@needs_playbook
def test_present_stops_when_the_images_toolkit_is_another_cuda(tmp_path):
    out, doc = run_cuda_role(tmp_path, toolkit(tmp_path, "12.8"))
    assert doc["stats"]["localhost"]["failures"] == 1
    assert "did not report CUDA 13.0" in out.stdout
    assert not (tmp_path / "facts.d" / "sglang_cuda.fact").exists()
