#!/usr/bin/python
"""Ansible module: remove old stack venvs and the host's wheels no kept venv was installed from."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_stack_prune
short_description: Remove old stack venvs (never the serving, rollback or a running one) and unused host wheels
description:
  - Keeps, in C(<root>/venvs), the serving venv, the rollback venv (the one the last good profile ran on), the newest
    others until O(keep) venvs are kept, and every venv a running process holds (a file of it mapped or open, read
    from C(/proc); the server's torch and CUDA libraries are mapped), whatever O(keep) says. Removes the others.
  - A venv is renamed to a hidden folder before it is deleted, so it never stays half-deleted under its name; hidden
    folders an interrupted removal left are removed too.
  - With O(wheelhouse), also removes the wheels there that no kept venv was installed from (the C(requirements.lock.txt)
    of each kept venv and of the locked installers under C(<root>/installers)).
  - Check mode reports what would be removed (with --diff, the venv list before and after) and changes nothing.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  root:
    description: Folder holding C(venvs/) and C(installers/).
    type: path
    default: /opt/sglang
  serving:
    description: The venv that serves after this run (a path or a folder name in C(venvs/)).
    type: str
    required: true
  rollback:
    description:
      - The venvs a rollback returns to, in order of preference (paths, link targets such as C(venvs/NAME), or names;
        empty ones are skipped); the first that exists and is not the serving one is kept.
      - The role gives the venv the last good profile ran on, then the one C(<root>/venv) pointed at before the run.
    type: list
    elements: str
    default: []
  keep:
    description: Venvs to keep in all, the serving and the rollback one included (running ones are kept beyond it).
    type: int
    default: 2
  wheelhouse:
    description: The host's wheelhouse folder to prune as well; empty leaves it alone.
    type: path
    default: ""
notes:
  - Run as root (the role does) so that every process's C(/proc/PID/maps) can be read. Stdlib only.
    The rules live in plugins/module_utils/stack_prune.py.
"""

EXAMPLES = r"""
- name: Remove old venvs and unused wheels
  sglang_stack_prune:
    serving: /opt/sglang/venvs/stable-0.5.23-2026-11-30-3f1c2a9b8e7d
    rollback: ["{{ (ansible_local | sglang_host_record).venv_target | default('', true) }}"]
    wheelhouse: /var/cache/sglang/wheelhouse
"""

RETURN = r"""
kept:
  description: Kept venv folder names, each with the reason.
  returned: always
  type: dict
  sample: {"stable-0.5.23-2026-11-30-3f1c2a9b8e7d": "serving"}
removed:
  description: Venv folders removed (in check mode, that would be removed), each with its size in bytes.
  returned: always
  type: list
  elements: dict
wheels_removed:
  description: Wheel files removed from O(wheelhouse) (in check mode, that would be removed).
  returned: always
  type: list
  elements: str
bytes_freed:
  description: Bytes of the removed venvs and wheels.
  returned: always
  type: int
"""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.stack_prune import (
    prune_plan,
    remove_venv,
    remove_wheels,
    requirements_wheels,
    tree_size,
    unreferenced_wheels,
    venvs_in_use,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/opt/sglang"},
            "serving": {"type": "str", "required": True},
            "rollback": {"type": "list", "elements": "str", "default": []},
            "keep": {"type": "int", "default": 2},
            "wheelhouse": {"type": "path", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["keep"] < 1:
        module.fail_json(msg=f"keep is {params['keep']}: at least the serving venv is kept; set sglang_stack_keep >= 1")
    venvs_dir = os.path.join(params["root"], "venvs")
    serving = os.path.basename(params["serving"].rstrip("/"))
    rollback = [os.path.basename(path.rstrip("/")) for path in params["rollback"] if path]
    plan = prune_plan(venvs_dir, serving, rollback, params["keep"], venvs_in_use(venvs_dir))
    removed = [{"path": path, "bytes": tree_size(path)} for path in plan["remove"]]
    wheels = []
    # Before the serving venv is built (check mode) the host cannot tell which wheels it needs: none are listed.
    if params["wheelhouse"] and serving in plan["kept"]:
        requirements = [os.path.join(venvs_dir, name, "requirements.lock.txt") for name in plan["kept"]]
        requirements += glob.glob(os.path.join(params["root"], "installers", "*", "requirements.lock.txt"))
        try:
            wheels = unreferenced_wheels(params["wheelhouse"], requirements_wheels(requirements, params["wheelhouse"]))
        except OSError as exc:
            module.fail_json(msg=f"cannot read which wheels a kept venv was installed from, nothing removed: {exc}")
    freed = sum(item["bytes"] for item in removed) + sum(os.path.getsize(path) for path in wheels)
    if not module.check_mode:
        for item in removed:
            remove_venv(item["path"])
        if wheels:
            remove_wheels(params["wheelhouse"], wheels)
    kept = sorted(plan["kept"])
    module.exit_json(
        changed=bool(removed or wheels),
        kept=plan["kept"],
        removed=removed,
        wheels_removed=wheels,
        bytes_freed=freed,
        diff={
            "before_header": f"{venvs_dir} and {params['wheelhouse'] or 'no wheelhouse'}",
            "after_header": "after the prune",
            "before": "".join(
                f"{line}\n" for line in sorted(kept + [os.path.basename(i["path"]) for i in removed]) + wheels
            ),
            "after": "".join(f"{line}\n" for line in kept),
        },
    )


if __name__ == "__main__":
    main()
