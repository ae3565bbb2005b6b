"""GPU facts from nvidia-smi output: the `sglang_gpu` fact set and the CUDA driver rule.

Runs on target hosts through plugins/module_utils/gpu.py (plugins/module_utils links to the host package): stdlib only,
Python 3.10+.
"""

from __future__ import annotations

import csv
import re

QUERY_FIELDS = ("index", "name", "compute_cap", "driver_version", "memory.total", "pci.bus_id")
QUERY_ARGS = ("--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader")
TOPO_ARGS = ("topo", "-m")
APPS_FIELDS = ("pid", "process_name", "used_memory")
APPS_ARGS = ("--query-compute-apps=" + ",".join(APPS_FIELDS), "--format=csv,noheader,nounits")

# Minimum Linux driver branch per CUDA major version (NVIDIA CUDA toolkit release notes, table 3).
MIN_DRIVER_BRANCH = {11: 450, 12: 525, 13: 580}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_CUDA_VERSION = re.compile(r"CUDA Version\s*:\s*([0-9]+(?:\.[0-9]+)*)")
_GPU_NAME = re.compile(r"^GPU[0-9]+$")
_NVLINK = re.compile(r"^NV[0-9]+$")


def arch_of(compute_cap: str) -> str:
    """Compute capability as nvidia-smi prints it ("12.0") to the sm_ name ("sm_120")."""
    major, _unused, minor = compute_cap.strip().partition(".")
    if not major.isdigit() or not (minor or "0").isdigit():
        raise ValueError(f"not a compute capability: {compute_cap!r}")
    return f"sm_{int(major)}{int(minor or 0)}"


def _mib(text: str) -> int | None:
    number = text.strip().split(" ")[0]
    return int(number) if number.isdigit() else None


def parse_query(text: str) -> list[dict]:
    """Rows of `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader`."""
    gpus = []
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        cells = [cell.strip() for cell in row]
        if len(cells) != len(QUERY_FIELDS):
            raise ValueError(f"expected {len(QUERY_FIELDS)} CSV fields, got {len(cells)}: {row!r}")
        index, name, compute_cap, driver, memory, bus_id = cells
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "compute_cap": compute_cap,
                "arch": arch_of(compute_cap),
                "driver_version": driver,
                "memory_mib": _mib(memory),
                "pci_bus_id": bus_id,
            }
        )
    return sorted(gpus, key=lambda gpu: gpu["index"])


def parse_compute_apps(text: str) -> list[dict]:
    """Processes holding a GPU: rows of `nvidia-smi <APPS_ARGS>` (no output: the GPUs are idle)."""
    apps = []
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        cells = [cell.strip() for cell in row]
        if len(cells) != len(APPS_FIELDS) or not cells[0].isdigit():
            raise ValueError(f"expected pid, process_name, used_memory: {row!r}")
        apps.append({"pid": int(cells[0]), "process_name": cells[1], "used_memory_mib": _mib(cells[2])})
    return apps


def stray_processes(apps: list[dict], own_pids) -> list[dict]:
    """The GPU processes that are not the service's own (own_pids: its control group's pids, as text or ints)."""
    own = {int(pid) for pid in own_pids if str(pid).strip().isdigit()}
    return [app for app in apps if app["pid"] not in own]


def parse_cuda_version(text: str) -> str:
    """The CUDA version the driver supports, from `nvidia-smi` (header) or `nvidia-smi -q`; "" if absent."""
    match = _CUDA_VERSION.search(text)
    return match.group(1) if match else ""


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in (line.split("\t") if "\t" in line else line.split())]


def parse_topology(text: str) -> dict[str, dict[str, str]]:
    """GPU-to-GPU links of `nvidia-smi topo -m`: {"GPU0": {"GPU1": "NV18", ...}, ...} (self and NICs left out)."""
    lines = [_ANSI.sub("", line) for line in text.splitlines()]
    header = next((_cells(line) for line in lines if re.search(r"\bGPU0\b", line) and not line.startswith("GPU")), None)
    if header is None:
        return {}
    if header and header[0] == "":
        header = header[1:]
    columns = [name for name in header if _GPU_NAME.match(name)]
    topology: dict[str, dict[str, str]] = {}
    for line in lines:
        cells = _cells(line)
        if not cells or not _GPU_NAME.match(cells[0]):
            continue
        links = dict(zip(columns, cells[1 : 1 + len(columns)]))
        topology[cells[0]] = {peer: link for peer, link in links.items() if peer != cells[0]}
    return topology


def has_nvlink(topology: dict[str, dict[str, str]]) -> bool:
    """True when any two GPUs are joined by NVLink (NV#); PCIe paths (PIX/PXB/PHB/NODE/SYS) are not."""
    return any(_NVLINK.match(link) for peers in topology.values() for link in peers.values())


def empty_facts() -> dict:
    """Facts of a host without a usable nvidia-smi."""
    return {
        "count": 0,
        "names": [],
        "arch": "",
        "archs": [],
        "driver_version": "",
        "cuda_driver_version": "",
        "nvlink": False,
        "memory_mib": [],
        "topology": {},
    }


def gpu_facts(query_text: str, topo_text: str = "", smi_text: str = "") -> dict:
    """The `sglang_gpu` fact set from the query CSV, `topo -m` and `nvidia-smi` (or `-q`) outputs.

    arch is GPU 0's; archs lists every distinct arch (more than one means a mixed host).
    names and memory_mib are per GPU, in index order.
    """
    gpus = parse_query(query_text)
    if not gpus:
        return empty_facts()
    topology = parse_topology(topo_text)
    archs = sorted({gpu["arch"] for gpu in gpus}, key=lambda arch: int(arch[3:]))
    return {
        "count": len(gpus),
        "names": [gpu["name"] for gpu in gpus],
        "arch": gpus[0]["arch"],
        "archs": archs,
        "driver_version": gpus[0]["driver_version"],
        "cuda_driver_version": parse_cuda_version(smi_text),
        "nvlink": has_nvlink(topology),
        "memory_mib": [gpu["memory_mib"] for gpu in gpus],
        "topology": topology,
    }


def driver_branch(driver_version: str) -> int:
    """580 for "580.159.04"."""
    head = driver_version.strip().split(".")[0]
    if not head.isdigit():
        raise ValueError(f"not a driver version: {driver_version!r}")
    return int(head)


def driver_check(driver_version: str, cuda_version: str) -> dict:
    """Whether a driver can run a CUDA toolkit: {ok, required_branch, msg}."""
    major = int(cuda_version.split(".")[0])
    required = MIN_DRIVER_BRANCH.get(major)
    if required is None:
        return {"ok": False, "required_branch": None, "msg": f"no driver rule for CUDA {cuda_version}"}
    found = driver_branch(driver_version)
    if found >= required:
        return {"ok": True, "required_branch": required, "msg": f"driver {driver_version} supports CUDA {cuda_version}"}
    return {
        "ok": False,
        "required_branch": required,
        "msg": (
            f"NVIDIA driver {driver_version} (branch {found}) is too old for CUDA {cuda_version}: "
            f"it needs driver branch >= {required}. Install a {required}+ driver "
            f"(e.g. apt package nvidia-open or cuda-drivers-{required} from NVIDIA's CUDA repository, "
            "or set cuda_driver_install=true), reboot, and re-run."
        ),
    }
