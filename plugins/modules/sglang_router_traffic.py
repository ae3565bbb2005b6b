#!/usr/bin/python
"""Ansible module: the smg router's view of a traffic capture's window (the work is
C(ansible_collections.sglang.deploy.plugins.module_utils.bench.router_log))."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_router_traffic
short_description: Count the client requests the smg router answered in a capture's window
description:
  - Reads the router unit's journal (C(journalctl -u UNIT -o cat --all), bounded) in the window every replica
    captured (from the latest start to the earliest end, the window the merged trace keeps) and counts smg's
    response lines (one per client request, at its default log level INFO) of the generation routes, by status
    class and path.
  - Nothing is switched on (smg 1.13.0 has no runtime log control) and nothing is kept of a request but its path
    and status (no request id, no body).
version_added: "0.3.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  service:
    description: The router's systemd unit.
    type: str
    default: smg
  windows:
    description: The replicas' capture windows, each [start, end] in seconds since the epoch.
    type: list
    elements: list
    required: true
  max_window_s:
    description:
      - Seconds the window read may span at most (the replicas' windows are the hosts' word); the play passes the
        capture's seconds and a margin.
    type: float
    default: 87000
  max_log_bytes:
    description: Bytes of journal lines read at most.
    type: int
    default: 1073741824
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Count the router's requests of the capture's window
  sglang.deploy.sglang_router_traffic:
    service: smg
    windows: [[1796580000.0, 1796580060.0]]
"""

RETURN = r"""
router:
  description: >-
    requests (client generation requests answered), status (counts by status class, 2xx 4xx 5xx), paths (counts by
    route), other (the router's other requests: health, readiness, models), window ([start, end] read).
  returned: success
  type: dict
"""

import math

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, router_log, trace


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "service": {"type": "str", "default": "smg"},
            "windows": {"type": "list", "elements": "list", "required": True},
            "max_window_s": {"type": "float", "default": 87_000.0},
            "max_log_bytes": {"type": "int", "default": 1 << 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        windows = [[float(a), float(b)] for a, b in p["windows"]]
    except (TypeError, ValueError):
        module.fail_json(msg="windows must be [start, end] pairs of seconds since the epoch")
    if not all(math.isfinite(a) and math.isfinite(b) and 0 < a <= b for a, b in windows) or p["max_log_bytes"] < 1:
        module.fail_json(msg="windows must be [start, end] with 0 < start <= end, max_log_bytes at least 1")
    try:
        since, until = trace.common_window(windows)
    except ValueError as exc:
        module.fail_json(msg=f"{exc}: nothing to count")
    if not 0 < p["max_window_s"] <= 1e7 or until - since > p["max_window_s"]:
        module.fail_json(msg=f"the window read spans more than max_window_s ({p['max_window_s']:g} s): not read")
    try:
        found = router_log.run(p["service"], windows, capture.Limits(log_bytes=p["max_log_bytes"]))
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"reading the router's log failed: {exc}")
    module.exit_json(changed=False, router=found)


if __name__ == "__main__":
    main()
