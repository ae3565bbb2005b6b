#!/usr/bin/python
"""Ansible module: check a wheelhouse folder against the wheels of a stack lock (sha256 of every file)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_wheelhouse
short_description: Check (and fill) a folder with every wheel of a stack lock, each with its locked sha256
description:
  - With O(fetch), first downloads each wheel that is missing or altered from the lock's URL (what
    C(sglang-deploy stack fetch) does) and deletes a download whose sha256 differs.
  - Hashes each wheel the lock names (O(wheels), entries with C(file) and C(sha256)) in O(wheel_dir) and fails
    naming every file that is missing or whose sha256 differs from the lock. Read-only.
  - Run on the controller against the wheelhouse C(sglang-deploy stack fetch) filled, and on the host against
    the copy, before anything is installed.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  wheel_dir:
    description: Folder of wheel files.
    type: path
    required: true
  wheels:
    description: Lock entries (C(file), C(sha256)); other keys are ignored.
    type: list
    elements: dict
    required: true
  fetch:
    description: Download missing or altered wheels first (the role does it in the controller wheelhouse).
    type: bool
    default: false
  hint:
    description: Sentence appended to the failure message (how to fix it).
    type: str
    default: ""
notes:
  - Read-only without O(fetch); in check mode nothing is downloaded. Stdlib only. The rule lives in plugins/module_utils/wheel_fetch.py.
  - A download stops past 8 GB, and all of them one hour after the first; a stopped download leaves no file.
"""

EXAMPLES = r"""
- name: Check the host's copy of the wheelhouse
  sglang_wheelhouse:
    wheel_dir: /var/cache/sglang/wheelhouse
    wheels: "{{ lock.packages }}"
"""

RETURN = r"""
problems:
  description: One sentence per missing or altered wheel, starting with its file name.
  returned: always
  type: list
  sample: ["idna-3.20-py3-none-any.whl: missing from /var/cache/sglang/wheelhouse"]
checked:
  description: Number of wheels checked.
  returned: always
  type: int
downloaded:
  description: Number of wheels downloaded (O(fetch)).
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.wheel_fetch import fetch_wheels, wheelhouse_problems


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "wheel_dir": {"type": "path", "required": True},
            "wheels": {"type": "list", "elements": "dict", "required": True},
            "fetch": {"type": "bool", "default": False},
            "hint": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    downloaded, problems = 0, []
    if params["fetch"] and not module.check_mode:
        os.makedirs(params["wheel_dir"], exist_ok=True)
        fetched = fetch_wheels(params["wheel_dir"], params["wheels"])
        downloaded, problems = fetched["downloaded"], fetched["problems"]
    named = {problem.split(": ", 1)[0] for problem in problems}
    problems += [
        p for p in wheelhouse_problems(params["wheel_dir"], params["wheels"]) if p.split(": ", 1)[0] not in named
    ]
    if problems:
        module.fail_json(
            msg=f"{len(problems)} of {len(params['wheels'])} wheels in {params['wheel_dir']} do not match the lock: "
            + "; ".join(problems)
            + (". " + params["hint"] if params["hint"] else ""),
            problems=problems,
            checked=len(params["wheels"]),
            downloaded=downloaded,
        )
    module.exit_json(changed=downloaded > 0, problems=[], checked=len(params["wheels"]), downloaded=downloaded)


if __name__ == "__main__":
    main()
