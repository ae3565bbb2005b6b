#!/usr/bin/python
"""Ansible module: compare a checkpoint folder with its model lock and plan the fetch; changes nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_plan
short_description: Compare a checkpoint folder with its model lock and plan the fetch into its partial folder (read-only)
description:
  - Validates a model lock (C(models/<name>.lock.yml), loaded on the controller) and compares O(dest) with it; a file
    whose size and mtime are those its stamp (C(.sglang-model.json)) recorded for this lock is not hashed again unless
    O(full); any other is hashed.
  - When O(dest) does not match, lists the files missing from C(<dest>.partial) or of another size there (what the
    role copies) and fails when they need more than the free space of the file system (C(<dest>.previous) counted
    as free, since the role removes it before copying) less O(reserve_gb).
  - When O(dest) matches, runs the checks before a launch on its real files (config.json, the safetensors index and
    every shard it names with its locked size) and fails naming the file.
  - Check mode with --diff shows the drift between O(dest) and the lock, one line per file.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  lock:
    description: The model lock (name, repository, revision, files with path, size, sha256).
    type: dict
    required: true
  dest:
    description: The checkpoint folder the server loads (its partial folder is C(<dest>.partial)).
    type: path
    required: true
  full:
    description: Hash every file of O(dest), whatever its stamp says.
    type: bool
    default: false
  reserve_gb:
    description: Gigabytes to leave free on the file system after the copy.
    type: float
    default: 1.0
notes:
  - Read-only; check mode is fully supported. Stdlib only. The rules live in plugins/module_utils/model.py.
"""

EXAMPLES = r"""
- name: Plan the checkpoint
  sglang_model_plan:
    lock: "{{ lookup('file', 'models/lab-dense.lock.yml') | from_yaml }}"
    dest: /data/models/lab-dense
  register: __plan
"""

RETURN = r"""
installed:
  description: O(dest) matches the lock (nothing to copy).
  returned: success
  type: bool
to_copy:
  description: Paths of the lock's files to copy into the partial folder.
  returned: success
  type: list
  elements: str
folders:
  description: Subfolders of the partial folder those files need.
  returned: success
  type: list
  elements: str
partial:
  description: The partial folder, C(<dest>.partial).
  returned: success
  type: str
parent_missing:
  description: The folder that holds O(dest) does not exist yet (the role creates it, 0755).
  returned: success
  type: bool
previous:
  description: Where the checkpoint O(dest) held before goes, C(<dest>.previous).
  returned: success
  type: str
drift:
  description: One line per file of O(dest) that is missing, truncated, altered or not in the lock.
  returned: success
  type: list
  elements: str
lock_id:
  description: First 12 hex digits of the sha256 of what the lock pins.
  returned: success
  type: str
bytes_needed:
  description: Bytes of the files to copy.
  returned: success
  type: int
bytes_free:
  description: Bytes free for them.
  returned: success
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.model import (
    drift,
    launch_problems,
    lock_id,
    plan,
    usage_problem,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "lock": {"type": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "full": {"type": "bool", "default": False},
            "reserve_gb": {"type": "float", "default": 1.0},
        },
        supports_check_mode=True,
    )
    lock, dest = module.params["lock"], module.params["dest"].rstrip("/")
    problem = usage_problem(lock, dest)
    if problem:
        module.fail_json(msg=problem)
    result = plan(dest, lock, full=module.params["full"], reserve=int(module.params["reserve_gb"] * 1e9))
    result["lock_id"] = lock_id(lock)
    result["drift"] = [] if result["installed"] else drift(dest, lock, full=module.params["full"])
    if result["installed"]:
        problems = launch_problems(dest, lock["files"])
        if problems:
            module.fail_json(msg=f"{dest} matches lock {lock['name']} but cannot be launched: " + "; ".join(problems))
    elif result["bytes_needed"] > result["bytes_free"]:
        module.fail_json(
            msg=f"{dest}: lock {lock['name']} needs {result['bytes_needed'] / 1e9:.2f} GB more and the file system has "
            f"{max(result['bytes_free'], 0) / 1e9:.2f} GB free after a reserve of {module.params['reserve_gb']} GB; "
            "nothing was copied: free space there or set sglang_model_dir to a larger disk",
            **result,
        )
    module.exit_json(
        changed=not result["installed"],
        diff={
            "before": "".join(f"{line}\n" for line in result["drift"]),
            "after": f"{dest}: lock {lock['name']} ({result['lock_id']}), {len(lock['files'])} files\n",
        },
        **result,
    )


if __name__ == "__main__":
    main()
