#!/usr/bin/python
"""Ansible module: wait until an SGLang server has no running requests."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_drain
short_description: Wait until an SGLang server's running requests reach 0
description:
  - Polls the server's C(/metrics) until the gauges C(sglang:num_running_reqs) plus C(sglang:num_queue_reqs)
    (summed over ranks) are 0;
    used after the router stopped sending it requests and before a restart.
  - A server that does not answer has nothing to drain (returns at once). A server without metrics
    (launched without C(--enable-metrics)) returns at once with C(metrics=false) and the reason; SGLang's
    own drain on SIGTERM then covers the requests in flight.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of the server, seen from the host the module runs on.
    type: str
    default: http://127.0.0.1:30000
  timeout:
    description: Seconds to wait for 0 running requests before failing.
    type: int
    default: 600
notes:
  - Check mode is supported; the module only reads.
"""

EXAMPLES = r"""
- name: Wait until the server finished its requests
  sglang_drain:
    url: http://127.0.0.1:30000
    timeout: 600
"""

RETURN = r"""
running:
  description: Running plus queued requests at the end (0), or null without metrics.
  returned: success
  type: float
metrics:
  description: Whether the gauge was read.
  returned: success
  type: bool
elapsed:
  description: Seconds waited.
  returned: success
  type: float
reason:
  description: Why nothing was waited for (server not answering, metrics off).
  returned: when metrics is false
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.fleet_probes import FleetError, wait_drained
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import LOCAL_URL


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": LOCAL_URL},
            "timeout": {"type": "int", "default": 600},
        },
        supports_check_mode=True,
    )
    try:
        result = wait_drained(module.params["url"], timeout=module.params["timeout"])
    except FleetError as exc:
        module.fail_json(msg=str(exc), **exc.detail)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
