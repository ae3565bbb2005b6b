#!/usr/bin/python
"""Ansible module: write a hash-pinned requirements file for every wheel in a wheelhouse folder."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_wheel_lock
short_description: Write a --require-hashes requirements file for a wheelhouse folder
description:
  - Hashes every C(*.whl) in O(wheel_dir) (sha256) and writes C(name==version --hash=sha256:...) lines to O(dest),
    for C(pip install --no-index --find-links <wheel_dir> --require-hashes --no-deps -r <dest>).
  - Checks the bundle's own hashes (O(expected)) against the files and fails on a mismatch or a missing wheel.
version_added: "0.1.0"
author: sglang-deploy
options:
  wheel_dir:
    description: Folder of wheels (one bundle's complete set).
    type: path
    required: true
  dest:
    description: Requirements file to write.
    type: path
    required: true
  expected:
    description: Map of C(name==version) to sha256 hex digest that the wheels must match.
    type: dict
    default: {}
  mode:
    description: File mode of O(dest).
    type: raw
    default: "0644"
notes:
  - Check mode and diff mode are supported. Stdlib only. Lock rules live in module_utils/sglang_deploy/stack.py.
"""

EXAMPLES = r"""
- name: Lock the wheelhouse
  sglang_wheel_lock:
    wheel_dir: /var/cache/sglang/wheelhouse/stable-0.5.23-3f1c2a9b8e7d
    dest: /var/cache/sglang/wheelhouse/stable-0.5.23-3f1c2a9b8e7d/requirements.lock
"""

RETURN = r"""
wheels:
  description: Number of wheels locked.
  returned: success
  type: int
  sample: 207
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_deploy.stack import lock_text


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "wheel_dir": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
            "expected": {"type": "dict", "default": {}},
            "mode": {"type": "raw", "default": "0644"},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        text = lock_text(params["wheel_dir"], params["expected"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    old = ""
    if os.path.exists(params["dest"]):
        with open(params["dest"], encoding="utf-8") as handle:
            old = handle.read()
    changed = old != text
    if changed and not module.check_mode:
        tmp = params["dest"] + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        module.atomic_move(tmp, params["dest"])
    file_args = module.load_file_common_arguments({"path": params["dest"], "mode": params["mode"]})
    if os.path.exists(params["dest"]):
        changed = module.set_fs_attributes_if_different(file_args, changed)
    module.exit_json(
        changed=changed,
        wheels=text.count("\n"),
        diff={"before": old, "after": text} if module._diff else {},
    )


if __name__ == "__main__":
    main()
