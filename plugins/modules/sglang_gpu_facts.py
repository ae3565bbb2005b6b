#!/usr/bin/python
"""Ansible module: GPU facts (count, arch, driver, NVLink) from nvidia-smi."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gpu_facts
short_description: Gather NVIDIA GPU facts (count, names, sm arch, driver, CUDA, NVLink) from nvidia-smi
description:
  - Runs C(nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,pci.bus_id --format=csv,noheader),
    C(nvidia-smi topo -m) and plain C(nvidia-smi) (for the CUDA version the driver supports) and returns them
    as the fact C(sglang_gpu).
  - A host without nvidia-smi, or whose nvidia-smi cannot talk to a driver, gets C(count=0) and no failure
    (the second case with a warning carrying nvidia-smi's message).
  - With O(cuda_version), also returns C(driver_check) saying whether the driver branch can run that CUDA
    version (CUDA 13 needs branch 580 or newer).
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  nvidia_smi:
    description: Path or name of the nvidia-smi binary; a name is looked for on PATH, then in /usr/local/nvidia/bin.
    type: str
    default: nvidia-smi
  cuda_version:
    description: CUDA toolkit version (C(13.0)) to check the driver against.
    type: str
notes:
  - Read-only; check mode is fully supported. Stdlib only, Python 3.10+. Parsing lives in plugins/module_utils/gpu.py.
"""

EXAMPLES = r"""
- name: Gather GPU facts
  sglang_gpu_facts:
    cuda_version: "13.0"
  register: __gpu

- name: Show the GPU architecture
  ansible.builtin.debug:
    msg: "{{ sglang_gpu.count }} x {{ sglang_gpu.arch }}, NVLink {{ sglang_gpu.nvlink }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    sglang_gpu:
      description:
        - count, names (per GPU), arch (GPU 0, e.g. sm_120), archs (distinct), driver_version,
          cuda_driver_version (the CUDA version the driver supports), nvlink (any GPU pair on NVLink),
          memory_mib (per GPU), topology (GPU-to-GPU link matrix of topo -m).
      type: dict
      sample:
        count: 2
        names: [NVIDIA H200, NVIDIA H200]
        arch: sm_90
        archs: [sm_90]
        driver_version: 580.159.04
        cuda_driver_version: "13.0"
        nvlink: true
        memory_mib: [143771, 143771]
        topology: {GPU0: {GPU1: NV18}, GPU1: {GPU0: NV18}}
compute_apps:
  description:
    - Processes holding a GPU now (C(nvidia-smi --query-compute-apps)); empty when the GPUs are idle.
    - The sglang_server role compares them with the service's own processes before a restart.
  returned: when GPUs were found
  type: list
  elements: dict
  sample: [{pid: 414, process_name: python3, used_memory_mib: 1030}]
driver_check:
  description: Whether the driver can run O(cuda_version); only with O(cuda_version) and at least one GPU.
  returned: when cuda_version is set and GPUs were found
  type: dict
  sample: {ok: false, required_branch: 580, msg: "NVIDIA driver 550.144.03 (branch 550) is too old for CUDA 13.0 ..."}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.gpu import (
    APPS_ARGS,
    QUERY_ARGS,
    TOPO_ARGS,
    driver_check,
    empty_facts,
    gpu_facts,
    parse_compute_apps,
)


# Searched after PATH: where NVIDIA's container runtime and GPU operator put the driver's tools (the H200 test
# machine has nvidia-smi only there), which a non-login shell's PATH (Ansible over ssh) leaves out.
NVIDIA_SMI_DIRS = ["/usr/local/nvidia/bin"]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "cuda_version": {"type": "str"},
        },
        supports_check_mode=True,
    )
    binary = module.get_bin_path(module.params["nvidia_smi"], opt_dirs=NVIDIA_SMI_DIRS)
    if binary is None:
        module.exit_json(changed=False, ansible_facts={"sglang_gpu": empty_facts()})

    rc, query, err = module.run_command([binary, *QUERY_ARGS])
    if rc != 0:
        module.warn(f"nvidia-smi failed (rc {rc}): {(err or query).strip()}; reporting no GPUs")
        module.exit_json(changed=False, ansible_facts={"sglang_gpu": empty_facts()})
    topo_rc, topo, _unused = module.run_command([binary, *TOPO_ARGS])
    smi_rc, smi, _unused = module.run_command([binary])
    apps_rc, apps, apps_err = module.run_command([binary, *APPS_ARGS])
    try:
        facts = gpu_facts(query, topo if topo_rc == 0 else "", smi if smi_rc == 0 else "")
        compute_apps = parse_compute_apps(apps) if apps_rc == 0 else None
    except ValueError as exc:
        module.fail_json(msg=f"cannot parse nvidia-smi output: {exc}", stdout=query)
    if compute_apps is None:
        module.fail_json(msg=f"nvidia-smi --query-compute-apps failed (rc {apps_rc}): {(apps_err or apps).strip()}")

    result = {"changed": False, "ansible_facts": {"sglang_gpu": facts}, "compute_apps": compute_apps}
    if module.params["cuda_version"] and facts["count"]:
        result["driver_check"] = driver_check(facts["driver_version"], module.params["cuda_version"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
