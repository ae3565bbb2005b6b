#!/usr/bin/python
"""Ansible module: report a service whose main process is older than its unit or environment files."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_restart_due
short_description: Find a running service that predates its unit or environment file
description:
  - Reads the unit's C(MainPID) (C(systemctl show)) and the process start time (C(/proc/PID/stat)), and reports
    changed when one of O(paths) was modified after the process started; a restart was notified once and lost
    (the play failed before the handler ran, or the handler failed). Notify the restart handler from this task.
  - Reports nothing to do when the service is not running.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  unit:
    description: The systemd unit, e.g. C(sglang).
    type: str
    required: true
  paths:
    description: Files whose change needs a restart (unit, environment file, launcher).
    type: list
    elements: path
    required: true
notes:
  - Supports check mode (it changes nothing).
"""

EXAMPLES = r"""
- name: Restart the server if it is older than its unit or environment
  sglang_restart_due:
    unit: sglang
    paths: [/etc/systemd/system/sglang.service, /etc/sglang/sglang.env]
  notify: sglang_server restart
"""

RETURN = r"""
pid:
  description: The main process id (0 when the service is not running).
  returned: always
  type: int
newer:
  description: The files modified after the process started.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.process_age import newer_files, process_start


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "paths": {"type": "list", "elements": "path", "required": True},
        },
        supports_check_mode=True,
    )
    rc, out, err = module.run_command(["systemctl", "show", "-p", "MainPID", "--value", module.params["unit"]])
    pid = int(out.strip() or 0) if rc == 0 and out.strip().isdigit() else 0
    newer = []
    if pid:
        try:
            newer = newer_files(process_start(pid), module.params["paths"])
        except OSError:  # the process exited between the two reads: nothing to compare
            pid = 0
    module.exit_json(changed=bool(newer), pid=pid, newer=newer)


if __name__ == "__main__":
    main()
