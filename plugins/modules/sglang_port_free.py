#!/usr/bin/python
"""Ansible module: check that a TCP port is free for a server, or held by that server's own unit."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_port_free
short_description: Check that a TCP port is free, or held only by the server's own systemd unit
description:
  - Lists the processes that listen on O(port) (C(/proc/net/tcp), C(/proc/net/tcp6) and the sockets in
    C(/proc/PID/fd)) with the systemd service whose control group holds each, and fails, naming them and the fix,
    when one is outside O(service). Rank 0 of a multi-node SGLang group opens C(--dist-init-addr) on this port;
    the running server of O(service) holds it and frees it when it restarts.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  port:
    description: TCP port to check.
    type: int
    required: true
  service:
    description: Name of the systemd service (without .service) that may hold the port.
    type: str
    required: true
  user:
    description:
      - Account the service runs as. A listening socket whose process this module cannot see (root in a container
        without CAP_SYS_PTRACE cannot read other users' descriptors) counts as the service's when this account owns it.
    type: str
notes:
  - Check mode is supported; the module only reads. Run it as root to see every process's sockets.
"""

EXAMPLES = r"""
- name: Check that the dist-init port is free on rank 0
  sglang_port_free:
    port: 20000
    service: sglang
    user: sglang
"""

RETURN = r"""
holders:
  description: The processes listening on the port (pid null when the socket's process could not be found).
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 812, "name": "python3", "unit": "sglang.service", "uid": 997}]
"""

import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.ports import port_holders, port_problem


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "port": {"type": "int", "required": True},
            "service": {"type": "str", "required": True},
            "user": {"type": "str"},
        },
        supports_check_mode=True,
    )
    try:
        uid = pwd.getpwnam(module.params["user"]).pw_uid if module.params["user"] else None
    except KeyError:
        uid = None
    holders = port_holders(module.params["port"])
    problem = port_problem(module.params["port"], holders, module.params["service"], uid)
    if problem:
        module.fail_json(msg=problem, holders=holders)
    module.exit_json(changed=False, holders=holders)


if __name__ == "__main__":
    main()
