#!/usr/bin/python
"""Ansible module: the alerts this host's Prometheus fires."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_prometheus_alerts
short_description: Read the alerts a Prometheus fires
description:
  - Asks Prometheus's C(GET /api/v1/alerts) and returns each firing alert's name, instance, severity, the time it
    became active and its summary; at most 100 alerts (the count of all is returned), 4 MiB of answer, 256 characters
    a field.
  - Fails naming the fix when nothing answers at O(url) or the answer is not Prometheus's.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of Prometheus, seen from the host the module runs on.
    type: str
    default: http://127.0.0.1:9090
  timeout:
    description: Seconds the whole request may take.
    type: int
    default: 10
notes:
  - Check mode is supported; the module only reads.
"""

EXAMPLES = r"""
- name: Ask Prometheus which alerts fire
  sglang_prometheus_alerts:
    url: http://127.0.0.1:9090
"""

RETURN = r"""
alerts:
  description: The firing alerts (at most 100), each with name, instance, severity, since and summary.
  returned: success
  type: list
  elements: dict
  sample: [{"name": "SGLangStalled", "instance": "10.0.0.11:30000", "severity": "critical",
            "since": "2026-12-06T09:40:12.5Z", "summary": "no token processed for 180 s"}]
firing:
  description: How many alerts fire (more than listed when over 100).
  returned: success
  type: int
pending:
  description: How many alerts wait for their C(for:) time.
  returned: success
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.prometheus_alerts import AlertsError, firing


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": "http://127.0.0.1:9090"},
            "timeout": {"type": "int", "default": 10},
        },
        supports_check_mode=True,
    )
    url = module.params["url"]
    try:
        result = firing(url, timeout=module.params["timeout"])
    except (OSError, AlertsError) as exc:
        module.fail_json(
            msg=f"Prometheus at {url} did not answer its alerts ({exc}): deploy it (playbooks/monitoring.yml; on the "
            "lab `sglang-deploy lab monitor`), or see `systemctl status prometheus` and its journal on this host"
        )
    except ValueError as exc:  # the URL
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
