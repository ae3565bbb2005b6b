#!/usr/bin/python
"""Ansible module: make a partial checkpoint folder, or verify it against its model lock and rename it into place."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_install
short_description: Make C(<dest>.partial), or verify it against the model lock and rename it to O(dest)
description:
  - With O(step=prepare), creates the missing folders above O(dest) (owner root, 0755), C(<dest>.partial) and the
    folders the lock's files need in it (owner root, group O(group), 0550) without following a link, and keeps an existing one (a fetch resumes) once
    links, files owned by
    another user and anything else than plain files and folders are removed from it. Refuses, naming the fix, a
    folder above O(dest) that another user can write (without the sticky bit), and O(dest), C(<dest>.partial) or
    C(<dest>.previous) already there as a link, not a folder, or a folder owned by another user than root (planted
    on a shared models folder, it would make the role copy, chmod and delete where it leads).
  - With O(step=install) (the default), hashes every file of C(<dest>.partial) and compares it with the lock; each
    file that is missing, truncated or altered (or a link, or below one) is named in the failure and deleted (a link
    as the link itself, never followed), so the next run copies it again; O(dest) stays as it was.
  - Removes files the lock does not list, runs the checks before a launch (config.json, the safetensors index and
    every shard it names with its locked size), writes the stamp C(.sglang-model.json), moves O(dest) (the previous
    checkpoint, if any) to C(<dest>.previous) and renames the partial folder to O(dest). A server still running on
    the previous checkpoint keeps the files it has open.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  lock:
    description: The model lock.
    type: dict
    required: true
  dest:
    description: The checkpoint folder the server loads.
    type: path
    required: true
  step:
    description: C(prepare) makes the partial folder; C(install) verifies it and renames it into place.
    type: str
    choices: [prepare, install]
    default: install
  group:
    description: With O(step=prepare), the group of the partial folder and its folders (the server's account).
    type: str
    default: root
notes:
  - Check mode changes nothing. Stdlib only. The rules live in plugins/module_utils/model.py.
"""

EXAMPLES = r"""
- name: Create the partial folder
  sglang_model_install:
    lock: "{{ __lock }}"
    dest: /data/models/lab-dense
    step: prepare
    group: sglang

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
  description: >-
    Files of the partial folder that the lock does not list, removed (with O(step=prepare): links, files owned by
    another user and what is not a plain file or folder).
  returned: always
  type: list
  elements: str
"""

import grp

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.model import PARTIAL, finish, make_partial, usage_problem


def prepare(module: AnsibleModule, lock: dict, dest: str) -> None:
    try:
        gid = grp.getgrnam(module.params["group"]).gr_gid
    except KeyError:
        module.fail_json(msg=f"group {module.params['group']!r} does not exist: create it, or set sglang_model_group")
    try:
        result = make_partial(dest, lock, gid)
    except OSError as exc:
        module.fail_json(msg=f"{dest + PARTIAL} could not be made: {exc}", problems=[str(exc)], removed=[])
    if result["problems"]:
        module.fail_json(msg=f"{dest + PARTIAL} was not made: " + "; ".join(result["problems"]), **result)
    module.exit_json(changed=True, **result)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "lock": {"type": "dict", "required": True},
            "dest": {"type": "path", "required": True},
            "step": {"type": "str", "choices": ["prepare", "install"], "default": "install"},
            "group": {"type": "str", "default": "root"},
        },
        supports_check_mode=True,
    )
    lock, dest = module.params["lock"], module.params["dest"].rstrip("/")
    problem = usage_problem(lock, dest)
    if problem:
        module.fail_json(msg=problem, problems=[problem])
    if module.check_mode:
        module.exit_json(changed=True, problems=[], removed=[])
    if module.params["step"] == "prepare":
        prepare(module, lock, dest)
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
