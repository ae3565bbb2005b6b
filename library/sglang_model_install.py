#!/usr/bin/python
"""Ansible module: verify a partial checkpoint folder against its model lock and rename it into place."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_install
short_description: Verify C(<dest>.partial) against the model lock, then rename it to O(dest)
description:
  - Hashes every file of C(<dest>.partial) and compares it with the lock; each file that is missing, truncated or
    altered is named in the failure and deleted, so the next run copies it again; O(dest) stays as it was.
  - Removes files the lock does not list, runs the checks before a launch (config.json, the safetensors index and
    every shard it names with its locked size), writes the stamp C(.sglang-model.json), moves O(dest) (the previous
    checkpoint, if any) to C(<dest>.previous) and renames the partial folder to O(dest). A server still running on
    the previous checkpoint keeps the files it has open.
version_added: "0.1.0"
author: sglang-deploy
options:
  lock:
    description: The model lock.
    type: dict
    required: true
  dest:
    description: The checkpoint folder the server loads.
    type: path
    required: true
notes:
  - Check mode changes nothing. Stdlib only. The rules live in module_utils/sglang_deploy/model.py.
"""

EXAMPLES = r"""
- name: Verify the fetched checkpoint and rename it into place
  sglang_model_install:
    lock: "{{ __lock }}"
    dest: /data/models/lab-dense
"""

RETURN = r"""
problems:
  description: One sentence per file that does not match, starting with its path.
  returned: always
  type: list
  elements: str
removed:
  description: Files of the partial folder that the lock does not list, removed.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_deploy.model import PARTIAL, finish, usage_problem


def main() -> None:
    module = AnsibleModule(
        argument_spec={"lock": {"type": "dict", "required": True}, "dest": {"type": "path", "required": True}},
        supports_check_mode=True,
    )
    lock, dest = module.params["lock"], module.params["dest"].rstrip("/")
    problem = usage_problem(lock, dest)
    if problem:
        module.fail_json(msg=problem, problems=[problem])
    if module.check_mode:
        module.exit_json(changed=True, problems=[], removed=[])
    result = finish(dest + PARTIAL, dest, lock)
    if result["problems"]:
        module.fail_json(
            msg=f"{len(result['problems'])} files of {dest + PARTIAL} do not match lock {lock['name']}, nothing was "
            f"renamed into {dest}: " + "; ".join(result["problems"]) + ". The files named were removed: fix the source "
            "(or the lock) and run again, which copies only them",
            **result,
        )
    module.exit_json(changed=True, **result)


if __name__ == "__main__":
    main()
