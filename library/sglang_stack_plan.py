#!/usr/bin/python
"""Ansible module: plan a stack bundle install (venv path, pip runs, drift, prune list); changes nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_stack_plan
short_description: Validate a stack bundle and plan its versioned venv (read-only)
description:
  - Validates a stack bundle (a C(stacks/*.yml) file loaded on the controller) and derives its content hash,
    the versioned venv C(<root>/venvs/<name>-<hash12>), the pip runs that build it, and the wheelhouse folder.
  - Reads the serving stack from C(<root>/venv) (a symlink) and C(<root>/manifest.json), and reports the drift
    between that manifest and the bundle.
  - Lists the venvs to prune once the new one is active (all but the new, the current and the newest others
    up to O(keep)).
version_added: "0.1.0"
author: sglang-deploy
options:
  bundle:
    description: The stack bundle (name, python, torch, flashinfer, sglang, sglang_version, ...).
    type: dict
    required: true
  root:
    description: Folder holding C(venvs/), the C(venv) symlink and C(manifest.json).
    type: path
    default: /opt/sglang
  keep:
    description: Venvs to keep in all (the serving one and the previous one count).
    type: int
    default: 2
  wheelhouse:
    description: Wheelhouse root on the host; the bundle's wheels live in C(<wheelhouse>/<name>-<hash12>/).
    type: path
notes:
  - Read-only; check mode is fully supported. Stdlib only. Bundle rules live in module_utils/sglang_deploy/stack.py.
"""

EXAMPLES = r"""
- name: Plan the stack
  sglang_stack_plan:
    bundle: "{{ lookup('file', 'stacks/stable-0.5.23.yml') | from_yaml }}"
  register: __plan
"""

RETURN = r"""
bundle_id:
  description: First 12 hex digits of the sha256 of the bundle's canonical JSON.
  returned: success
  type: str
  sample: 3f1c2a9b8e7d
venv:
  description: The versioned venv for this bundle.
  returned: success
  type: str
  sample: /opt/sglang/venvs/stable-0.5.23-3f1c2a9b8e7d
link:
  description: The stable symlink services use.
  returned: success
  type: str
current:
  description: Where the symlink points now (empty when there is none).
  returned: success
  type: str
built:
  description: The venv exists and holds a manifest of this bundle.
  returned: success
  type: bool
installed:
  description: Built and the symlink points at it (nothing to do).
  returned: success
  type: bool
partial:
  description: The venv folder exists without a manifest of this bundle (a failed build to clear).
  returned: success
  type: bool
pip_steps:
  description: Argument lists for C(python -m pip), in order.
  returned: success
  type: list
wheel_dir:
  description: This bundle's wheelhouse folder (empty without O(wheelhouse)).
  returned: success
  type: str
wheel_steps:
  description: Argument lists for C(python -m pip) that fill the wheelhouse from C(<wheel_dir>/freeze.txt).
  returned: success
  type: list
offline_step:
  description: Argument list for C(python -m pip) that installs C(<wheel_dir>/requirements.lock) offline with hashes.
  returned: success
  type: list
drift:
  description: Differences between the serving manifest and the bundle (empty when none).
  returned: success
  type: list
manifest:
  description: The serving manifest (empty when none).
  returned: success
  type: dict
prune:
  description: Venv folders to delete after switching to this bundle.
  returned: success
  type: list
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_deploy.stack import (
    bundle_id,
    drift,
    offline_step,
    pip_steps,
    prune_list,
    validate,
    venv_name,
    wheelhouse_steps,
)


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "bundle": {"type": "dict", "required": True},
            "root": {"type": "path", "default": "/opt/sglang"},
            "keep": {"type": "int", "default": 2},
            "wheelhouse": {"type": "path"},
        },
        supports_check_mode=True,
    )
    bundle, root = module.params["bundle"], module.params["root"]
    errors = validate(bundle)
    if errors:
        module.fail_json(msg=f"stack bundle {bundle.get('name')!r} is not usable: " + "; ".join(errors), errors=errors)

    name = venv_name(bundle)
    venvs_dir = os.path.join(root, "venvs")
    venv = os.path.join(venvs_dir, name)
    link = os.path.join(root, "venv")
    current = os.path.realpath(link) if os.path.islink(link) else ""
    built = _read_json(os.path.join(venv, "manifest.json")).get("bundle_id") == bundle_id(bundle)
    manifest = _read_json(os.path.join(root, "manifest.json")) if current else {}
    keep_names = [name, os.path.basename(current) if current and current != venv else ""]
    wheelhouse = module.params["wheelhouse"]
    wheel_dir = os.path.join(wheelhouse, name) if wheelhouse else ""
    lock = os.path.join(wheel_dir, "requirements.lock")
    module.exit_json(
        changed=False,
        bundle_id=bundle_id(bundle),
        venv=venv,
        link=link,
        current=current,
        built=built,
        installed=built and current == os.path.realpath(venv),
        partial=os.path.isdir(venv) and not built,
        pip_steps=pip_steps(bundle),
        wheel_dir=wheel_dir,
        wheel_steps=wheelhouse_steps(bundle, wheel_dir, os.path.join(wheel_dir, "freeze.txt")) if wheel_dir else [],
        offline_step=offline_step(wheel_dir, lock) if wheel_dir else [],
        drift=drift(bundle, manifest),
        manifest=manifest,
        prune=prune_list(venvs_dir, keep_names, module.params["keep"]),
    )


if __name__ == "__main__":
    main()
