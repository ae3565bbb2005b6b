#!/usr/bin/python
"""Ansible module: wait until the smg router lists workers ready (or out of rotation)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_router_wait
short_description: Wait until the Shepherd Model Gateway (smg) routes to, or stops routing to, given workers
description:
  - Polls the router's C(GET /workers) until every id in O(ready) is listed C(ready) and healthy and every
    id in O(out) is gone or C(draining) (the router sends it no new request). Ids are the file-discovery
    ids of the worker manifest (the inventory host names).
  - With empty O(ready) and O(out) it checks once that the router answers (a preflight).
  - Fails at once when nothing answers at O(url), or when the control-plane key is refused.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of the router's API, seen from the host the module runs on.
    type: str
    required: true
  api_key:
    description: Control-plane admin key (the router's --control-plane-api-keys), sent as a Bearer token.
    type: str
  ready:
    description: Worker ids that must be ready and healthy.
    type: list
    elements: str
    default: []
  out:
    description: Worker ids that must be gone or draining.
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds to wait.
    type: int
    default: 120
notes:
  - Check mode is supported; the module only reads.
"""

EXAMPLES = r"""
- name: Wait until the router routes to this host again
  sglang_router_wait:
    url: http://127.0.0.1:8000
    api_key: "{{ sglang_router_admin_api_key }}"
    ready: ["{{ inventory_hostname }}"]
"""

RETURN = r"""
states:
  description: Every worker the router lists, by id, with url, status and healthy.
  returned: always
  type: dict
  sample: {"gpu-1": {"url": "http://10.0.0.11:30000", "status": "ready", "healthy": true}}
elapsed:
  description: Seconds until the state was reached.
  returned: success
  type: float
unreachable:
  description: True when nothing answered at the URL.
  returned: on failure
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.fleet_probes import FleetError, Unreachable, wait_router


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "ready": {"type": "list", "elements": "str", "default": []},
            "out": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = wait_router(p["url"], p["api_key"], ready=p["ready"], out=p["out"], timeout=p["timeout"])
    except Unreachable as exc:
        module.fail_json(
            msg=f"The router does not answer: {exc}. Start it (playbooks/router.yml, role "
            "sglang_router; journalctl -u smg on the router host) or fix sglang_router_port.",
            unreachable=True,
            states={},
        )
    except FleetError as exc:
        module.fail_json(msg=str(exc), unreachable=False, states=exc.detail.get("states", {}))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
