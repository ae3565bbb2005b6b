#!/usr/bin/python
"""Ansible module: report what differs on a host from the state a role converges it to, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_state_due
short_description: Find what differs on a host from the files, folders, account and unit a role converges it to
description:
  - Compares, in one call, each of O(files) (its SHA-256, owner, group, mode), each of O(dirs), the O(installed)
    package, O(account), O(unit) and each of O(units) with what the role would write, and lists what differs in
    RV(differs). A role runs its convergence only then, instead of one task per file to find the same.
  - Changes nothing, and reports no change.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  files:
    description:
      - Files as the role writes them, each C(path), C(sha256) of its content (or in O(secret_digests)), and optional
        C(owner), C(group), C(mode) (octal string).
    type: list
    elements: dict
    default: []
  secret_digests:
    description: The SHA-256 of a file of O(files) that holds secrets, by its path (never logged).
    type: dict
    default: {}
  dirs:
    description:
      - Folders, each C(path) and optional C(owner), C(group), C(mode), C(follow) (default true, a link to a folder
        is one, as the file module follows it; false, a link there differs, as the file module fails on it).
    type: list
    elements: dict
    default: []
  installed:
    description:
      - A package that must be installed, C(python) (a venv's interpreter), C(name) and C(version). Due when that
        interpreter fails to report the package's version or reports another release (1.13 and 1.13.0 are one).
    type: dict
  account:
    description:
      - The system account, C(user), C(group) (its primary group) and optional C(shell), C(home) and C(groups)
        (further groups it must be a member of, as the user module's append makes it; one absent on the host is
        left out).
    type: dict
  unit:
    description: A systemd unit that must be enabled, active and loaded from its current file (one of O(units)).
    type: str
  restart_paths:
    description:
      - Files and glob patterns (the unit, its environment file, launcher, installed package) that O(unit)'s running
        process must not predate. One modified after the process started is listed in RV(newer) (a restart notified
        for it was lost) and makes the unit due.
    type: list
    elements: str
    default: []
  units:
    description: Systemd units, each compared as O(unit) is (after it, where both are given).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The unit.
        type: str
        required: true
      state:
        description:
          - V(started) wants it enabled, active and loaded from its current file; V(loaded) only the last (a unit
            that another starts, such as a timer's service).
        type: str
        choices: [started, loaded]
        default: started
      restart_paths:
        description: As O(restart_paths), for this unit's running process.
        type: list
        elements: str
        default: []
notes:
  - Supports check mode (it changes nothing).
"""

EXAMPLES = r"""
- name: Find whether the router's convergence has anything to do
  sglang_state_due:
    files: [{path: /etc/systemd/system/smg.service, sha256: "{{ unit_text | hash('sha256') }}", mode: "0644"}]
    dirs: [{path: /etc/smg, owner: root, group: smg, mode: "0750"}]
    installed: {python: /opt/smg/venv-1.13.0/bin/python, name: smg, version: 1.13.0}
    account: {user: smg, group: smg, shell: /usr/sbin/nologin, home: /nonexistent}
    unit: smg
    restart_paths: [/etc/systemd/system/smg.service, /opt/smg/venv-1.13.0/lib/python*/site-packages/smg-1.13.0.dist-info]
  register: due

- name: Find whether a timer, its service and an exporter differ
  sglang_state_due:
    units:
      - {name: watch.timer}
      - {name: watch.service, state: loaded}
      - {name: gpu-exporter, restart_paths: [/etc/systemd/system/gpu-exporter.service, /opt/watch/*.py]}
  register: due
"""

RETURN = r"""
differs:
  description: "What differs, one line each (for example C(/etc/smg/workers.json: content)); empty when nothing is due."
  returned: always
  type: list
  elements: str
newer:
  description: The files of each unit's restart paths modified after its running process started.
  returned: always
  type: list
  elements: str
"""

import glob

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.sglang.deploy.plugins.module_utils.process_age import newer_files, process_start
from ansible_collections.sglang.deploy.plugins.module_utils.state_due import (
    account_differs,
    dirs_differ,
    files_differ,
    release,
)

VERSION = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"


def unit_due(module: AnsibleModule, unit: dict) -> tuple[list[str], list[str]]:
    """What differs of ``unit`` ({name, state, restart_paths}), and its restart paths newer than its process."""
    name = unit["name"]
    rc, out, dummy = module.run_command(
        ["systemctl", "show", "-p", "LoadState,UnitFileState,ActiveState,NeedDaemonReload,MainPID", name]
    )
    state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line) if rc == 0 else {}
    want = {"LoadState": "loaded", "NeedDaemonReload": "no"}  # systemctl show says no for a unit that does not exist
    if unit["state"] == "started":
        want = {"UnitFileState": "enabled", "ActiveState": "active", **want}
    differs = [f"unit {name}: {k}={state.get(k, '?')}" for k, v in want.items() if state.get(k) != v]
    pid = int(state.get("MainPID", "0")) if state.get("MainPID", "").isdigit() else 0
    newer = []
    if pid:
        try:
            started = process_start(pid)
        except OSError:  # the process exited between the two reads: the unit's state above tells
            started = None
        if started is not None:
            newer = newer_files(started, sorted({f for g in unit["restart_paths"] for f in glob.glob(g)}))
    if newer:
        differs.append(f"unit {name}: started before {', '.join(newer)} changed")
    return differs, newer


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "default": []},
            "secret_digests": {"type": "dict", "default": {}, "no_log": True},
            "dirs": {"type": "list", "elements": "dict", "default": []},
            "installed": {"type": "dict"},
            "account": {"type": "dict"},
            "unit": {"type": "str"},
            "restart_paths": {"type": "list", "elements": "str", "default": []},
            "units": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "state": {"type": "str", "choices": ["started", "loaded"], "default": "started"},
                    "restart_paths": {"type": "list", "elements": "str", "default": []},
                },
            },
        },
        supports_check_mode=True,
    )
    p = module.params
    differs = (
        files_differ([{"sha256": p["secret_digests"].get(f["path"]), **f} for f in p["files"]])
        + dirs_differ([{**d, "follow": boolean(d.get("follow", True))} for d in p["dirs"]])
        + (account_differs(p["account"]) if p["account"] else [])
    )
    if p["installed"]:
        python, name, want = (str(p["installed"][k]) for k in ("python", "name", "version"))
        try:
            rc, out, err = module.run_command([python, "-c", VERSION, name], handle_exceptions=False)
        except OSError as e:  # no interpreter there (a removed venv, a dangling link)
            rc, out, err = 127, "", e.strerror or str(e)
        if rc != 0:
            differs.append(f"{name}: {python} fails ({(err.strip().splitlines() or [f'exit {rc}'])[-1]})")
        elif release(out) != release(want):
            differs.append(f"{name}: {out.strip()} installed, {want} wanted")
    units = [{"name": p["unit"], "state": "started", "restart_paths": p["restart_paths"]}] if p["unit"] else []
    newer = []
    for unit in units + p["units"]:
        unit_differs, unit_newer = unit_due(module, unit)
        differs += unit_differs
        newer += unit_newer
    module.exit_json(changed=False, differs=differs, newer=newer, msg="; ".join(differs) or "nothing differs")


if __name__ == "__main__":
    main()
