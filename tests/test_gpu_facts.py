"""nvidia-smi parsing (plugins/module_utils/gpu.py) on recorded and hand-written outputs, and the sglang_gpu_facts module."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sglang.deploy.plugins.module_utils import gpu

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"

import sglang_gpu_facts  # noqa: E402

# What each machine is, independently of the parser: (count, arch, nvlink, driver, cuda, memory of GPU 0, link 0-1).
MACHINES = {
    "h200-x2": (2, "sm_90", True, "580.159.04", "13.0", 143771, "NV18"),
    "rtx-pro-6000-x8": (8, "sm_120", False, "580.95.05", "13.0", 97887, "NODE"),
    "b200-x8": (8, "sm_100", True, "580.95.05", "13.0", 183359, "NV18"),
    "rtx-4090-x1-driver550": (1, "sm_89", False, "550.144.03", "12.4", 24564, None),
}


def read(machine: str, name: str) -> str:
    path = FIXTURES / machine / name
    return path.read_text() if path.exists() else ""


def test_every_fixture_folder_is_covered():
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(MACHINES)


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_facts_from_fixture(machine):
    count, arch, nvlink, driver, cuda, memory, link01 = MACHINES[machine]
    facts = gpu.gpu_facts(read(machine, "query.csv"), read(machine, "topo-m.txt"), read(machine, "nvidia-smi.txt"))
    assert facts["count"] == count
    assert facts["arch"] == arch and facts["archs"] == [arch]
    assert facts["nvlink"] is nvlink
    assert facts["driver_version"] == driver
    assert facts["cuda_driver_version"] == cuda
    assert len(facts["names"]) == len(facts["memory_mib"]) == count
    assert facts["memory_mib"][0] == memory
    assert sorted(facts["topology"]) == [f"GPU{i}" for i in range(count)]
    for name, peers in facts["topology"].items():
        assert name not in peers and len(peers) == count - 1
        assert not any(peer.startswith("NIC") for peer in peers)
    if link01:
        assert facts["topology"]["GPU0"]["GPU1"] == facts["topology"]["GPU1"]["GPU0"] == link01


def test_rtx_pro_topology_crosses_sockets_by_sys():
    topo = gpu.parse_topology(read("rtx-pro-6000-x8", "topo-m.txt"))
    assert topo["GPU0"]["GPU3"] == "NODE"
    assert topo["GPU0"]["GPU4"] == "SYS"
    assert set(topo["GPU7"].values()) == {"NODE", "SYS"}


def test_cuda_version_from_nvidia_smi_q_matches_the_table_header():
    assert gpu.parse_cuda_version(read("h200-x2", "nvidia-smi-q.txt")) == "13.0"
    assert gpu.parse_cuda_version("no version here") == ""


@pytest.mark.parametrize(
    ("cap", "arch"), [("12.0", "sm_120"), ("9.0", "sm_90"), ("10.0", "sm_100"), ("8.9", "sm_89"), ("12.1", "sm_121")]
)
def test_arch_of(cap, arch):
    assert gpu.arch_of(cap) == arch


def test_arch_of_rejects_garbage():
    with pytest.raises(ValueError):
        gpu.arch_of("[N/A]")


def test_mixed_host_lists_every_arch_and_reports_gpu0():
    query = (
        "0, NVIDIA H100 80GB HBM3, 9.0, 580.95.05, 81559 MiB, 00000000:18:00.0\n"
        "1, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 580.95.05, 97887 MiB, 00000000:38:00.0\n"
    )
    facts = gpu.gpu_facts(query)
    assert facts["arch"] == "sm_90" and facts["archs"] == ["sm_90", "sm_120"]
    assert facts["topology"] == {} and facts["nvlink"] is False


def test_query_with_wrong_field_count_is_an_error():
    with pytest.raises(ValueError, match="CSV fields"):
        gpu.parse_query("0, NVIDIA H200, 9.0\n")


def test_empty_query_gives_no_gpu_facts():
    assert gpu.gpu_facts("\n") == gpu.empty_facts()


@pytest.mark.parametrize(
    ("driver", "cuda", "ok", "required"),
    [
        ("580.159.04", "13.0", True, 580),
        ("550.144.03", "13.0", False, 580),
        ("550.144.03", "12.4", True, 525),
        ("575.57.08", "13.0", False, 580),
        ("590.10", "13.1", True, 580),
    ],
)
def test_driver_check(driver, cuda, ok, required):
    check = gpu.driver_check(driver, cuda)
    assert check["ok"] is ok and check["required_branch"] == required
    if not ok:
        assert driver in check["msg"] and f">= {required}" in check["msg"]


# --- the module, with a fake nvidia-smi that replays a fixture folder ---


class Exit(Exception):
    def __init__(self, failed: bool, result: dict):
        super().__init__(result)
        self.failed, self.result = failed, result


def run(monkeypatch, args: dict) -> tuple[bool, dict]:
    def exit_json(self, **kw):
        raise Exit(False, kw)

    def fail_json(self, **kw):
        raise Exit(True, kw)

    monkeypatch.setattr(sglang_gpu_facts.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(sglang_gpu_facts.AnsibleModule, "fail_json", fail_json)
    with patch_module_args(args), pytest.raises(Exit) as caught:
        sglang_gpu_facts.main()
    return caught.value.failed, caught.value.result


def fake_smi(tmp_path: Path, machine: str | None, rc: int = 0) -> str:
    script = tmp_path / "nvidia-smi"
    if machine is None:
        body = f'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." ; exit {rc}'
    else:
        folder = FIXTURES / machine
        body = (
            f'case "$1" in --query-gpu=*) cat "{folder}/query.csv";; topo) cat "{folder}/topo-m.txt";; '
            f'--query-compute-apps=*) cat "{folder}/compute-apps-busy.csv" 2>/dev/null || true;; '
            f'"") cat "{folder}/nvidia-smi.txt";; *) exit 9;; esac'
        )
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_module_reports_rtx_pro_box(monkeypatch, tmp_path):
    failed, res = run(monkeypatch, {"nvidia_smi": fake_smi(tmp_path, "rtx-pro-6000-x8"), "cuda_version": "13.0"})
    assert not failed and res["changed"] is False
    facts = res["ansible_facts"]["sglang_gpu"]
    assert (facts["count"], facts["arch"], facts["nvlink"]) == (8, "sm_120", False)
    assert res["driver_check"]["ok"] is True
    json.dumps(res)  # plain data only


def test_module_flags_an_old_driver(monkeypatch, tmp_path):
    failed, res = run(monkeypatch, {"nvidia_smi": fake_smi(tmp_path, "rtx-4090-x1-driver550"), "cuda_version": "13.0"})
    assert not failed
    assert res["driver_check"]["ok"] is False and "580" in res["driver_check"]["msg"]


def test_module_without_nvidia_smi_reports_zero_gpus(monkeypatch, tmp_path):
    failed, res = run(monkeypatch, {"nvidia_smi": str(tmp_path / "absent-nvidia-smi"), "cuda_version": "13.0"})
    assert not failed
    assert res["ansible_facts"]["sglang_gpu"]["count"] == 0 and "driver_check" not in res


def test_module_with_a_broken_driver_reports_zero_gpus_and_warns(monkeypatch, tmp_path):
    warnings = []
    monkeypatch.setattr(sglang_gpu_facts.AnsibleModule, "warn", lambda self, text: warnings.append(text))
    failed, res = run(monkeypatch, {"nvidia_smi": fake_smi(tmp_path, None, rc=9)})
    assert not failed
    assert res["ansible_facts"]["sglang_gpu"]["count"] == 0
    assert any("couldn't communicate" in w for w in warnings)


# --- processes holding the GPUs (recorded on a real H200 with a CUDA context holding 512 MiB, and idle) ---


def test_compute_apps_of_a_busy_and_an_idle_gpu():
    busy = gpu.parse_compute_apps((FIXTURES / "h200-x2" / "compute-apps-busy.csv").read_text())
    assert busy == [{"pid": 414, "process_name": "python3", "used_memory_mib": 1030}]
    assert gpu.parse_compute_apps((FIXTURES / "h200-x2" / "compute-apps-idle.csv").read_text()) == []
    with pytest.raises(ValueError, match="pid, process_name, used_memory"):
        gpu.parse_compute_apps("No running processes found\n")


def test_stray_processes_exclude_the_service_itself():
    apps = [
        {"pid": 414, "process_name": "python3", "used_memory_mib": 1030},
        {"pid": 900, "process_name": "sglang::scheduler_TP0", "used_memory_mib": 80000},
    ]
    assert gpu.stray_processes(apps, ["900", "901", ""]) == apps[:1]
    assert gpu.stray_processes(apps, [414, 900]) == []


def test_module_lists_the_processes_on_the_gpus(monkeypatch, tmp_path):
    failed, res = run(monkeypatch, {"nvidia_smi": fake_smi(tmp_path, "h200-x2")})
    assert not failed and res["compute_apps"] == [{"pid": 414, "process_name": "python3", "used_memory_mib": 1030}]


def test_module_finds_nvidia_smi_where_the_container_runtime_puts_it(monkeypatch, tmp_path):
    """The H200 test machine has nvidia-smi only in /usr/local/nvidia/bin, off a non-login PATH: 0 GPUs were reported."""
    fake_smi(tmp_path, "h200-x2")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sglang_gpu_facts, "NVIDIA_SMI_DIRS", [str(tmp_path)])
    failed, res = run(monkeypatch, {"cuda_version": "13.0"})
    assert not failed and res["ansible_facts"]["sglang_gpu"]["count"] == 2
