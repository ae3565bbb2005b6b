#!/usr/bin/python
"""Ansible module: report what differs on a host from the state a role converges it to, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_state_due
short_description: Find what differs on a host from the files, folders, account and unit a role converges it to
description:
  - Compares, in one call, each of O(files) (its SHA-256, owner, group, mode), each of O(dirs), each pattern of
    O(present), O(account) and O(unit) with what the role would write, and reports changed (something is due)
    when one differs. A role runs its convergence only then, instead of one task per file to find the same.
  - Changes nothing.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  files:
    description: Files as the role writes them, each C(path), C(sha256) of its content (or in O(secret_digests)), and optional C(owner), C(group), C(mode) (octal string).
    type: list
    elements: dict
    default: []
  secret_digests:
    description: The SHA-256 of a file of O(files) that holds secrets, by its path (never logged).
    type: dict
    default: {}
  dirs:
    description: Folders, each C(path) and optional C(owner), C(group), C(mode).
    type: list
    elements: dict
    default: []
  present:
    description: Glob patterns that must match a path (an installed package's dist-info).
    type: list
    elements: str
    default: []
  account:
    description: The system account, C(user), C(group) (its primary group) and optional C(shell), C(home).
    type: dict
  unit:
    description: A systemd unit that must be enabled, active and loaded from its current file.
    type: str
notes:
  - Supports check mode (it changes nothing).
"""

EXAMPLES = r"""
- name: Find whether the router's convergence has anything to do
  sglang_state_due:
    files: [{path: /etc/systemd/system/smg.service, sha256: "{{ unit_text | hash('sha256') }}", mode: "0644"}]
    dirs: [{path: /etc/smg, owner: root, group: smg, mode: "0750"}]
    present: [/opt/smg/venv-1.13.0/lib/python*/site-packages/smg-1.13.0.dist-info]
    account: {user: smg, group: smg, shell: /usr/sbin/nologin, home: /nonexistent}
    unit: smg
  register: due
"""

RETURN = r"""
differs:
  description: "What differs, one line each (for example C(/etc/smg/workers.json: content)); empty when nothing is due."
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.state_due import (
    absent,
    account_differs,
    dirs_differ,
    files_differ,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "default": []},
            "secret_digests": {"type": "dict", "default": {}, "no_log": True},
            "dirs": {"type": "list", "elements": "dict", "default": []},
            "present": {"type": "list", "elements": "str", "default": []},
            "account": {"type": "dict"},
            "unit": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    differs = (
        files_differ([{"sha256": p["secret_digests"].get(f["path"]), **f} for f in p["files"]])
        + dirs_differ(p["dirs"])
        + absent(p["present"])
        + (account_differs(p["account"]) if p["account"] else [])
    )
    if p["unit"]:
        rc, out, _ = module.run_command(
            ["systemctl", "show", "-p", "UnitFileState,ActiveState,NeedDaemonReload", p["unit"]]
        )
        state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}
        want = {"UnitFileState": "enabled", "ActiveState": "active", "NeedDaemonReload": "no"}
        differs += [f"unit {p['unit']}: {k}={state.get(k, '?')}" for k, v in want.items() if state.get(k) != v]
    module.exit_json(changed=bool(differs), differs=differs)


if __name__ == "__main__":
    main()
