#!/usr/bin/python
"""Ansible module: read a locked checkpoint's files into the page cache before the server restarts."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_warm
short_description: Read every file of a locked checkpoint once, so the next server start loads it from memory
description:
  - Reads each file the model lock lists in O(dest) from start to end. The kernel keeps what fits in the page cache,
    so a server that restarts next loads those shards from memory instead of the disk. Reads only; a running server
    keeps serving. Useful only where the host's free memory holds the checkpoint (or most of it).
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  lock:
    description: The model lock.
    type: dict
    required: true
  dest:
    description: The checkpoint folder.
    type: path
    required: true
notes:
  - Never changes anything (changed is always false); check mode reads nothing. Stdlib only.
"""

EXAMPLES = r"""
- name: Read the checkpoint into the page cache
  sglang_model_warm:
    lock: "{{ __lock }}"
    dest: /data/models/lab-dense
"""

RETURN = r"""
bytes:
  description: Bytes read.
  returned: always
  type: int
seconds:
  description: How long the reading took.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.model import usage_problem, warm


def main() -> None:
    module = AnsibleModule(
        argument_spec={"lock": {"type": "dict", "required": True}, "dest": {"type": "path", "required": True}},
        supports_check_mode=True,
    )
    lock, dest = module.params["lock"], module.params["dest"].rstrip("/")
    problem = usage_problem(lock, dest)
    if problem:
        module.fail_json(msg=problem)
    if module.check_mode:
        module.exit_json(changed=False, bytes=0, seconds=0.0)
    start = time.monotonic()
    try:
        read = warm(dest, lock["files"])
    except OSError as exc:
        module.fail_json(msg=f"reading {dest} into the page cache: {exc}")
    module.exit_json(changed=False, bytes=read, seconds=round(time.monotonic() - start, 3))


if __name__ == "__main__":
    main()
