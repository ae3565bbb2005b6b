#!/usr/bin/python
"""Ansible module: capture the traffic a deployed SGLang server serves as a trace (the work is
C(ansible_collections.sglang.deploy.plugins.module_utils.bench.unit_capture))."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_traffic
short_description: Capture a deployed SGLang server's traffic as a Mooncake trace
description:
  - Turns the server's request logging on at runtime (C(POST /configure_logging), JSON lines, level 3) without a
    restart, waits O(duration) seconds or until O(max_requests) requests finished, reads the C(request.finished) lines
    of that window from the unit's journal (C(journalctl -u UNIT -o cat), bounded) and turns them into a trace
    (arrival, input and output token counts, prefix blocks as hashes). Logging is then set back to what
    C(/server_info) said it was.
  - The API key and the admin key come from O(api_key) or the server's 0600 environment file O(env_file); they go as
    headers only. The prompts' text is kept only with O(keep_text), in a 0600 file on the host (its path returned as C(text_file)).
  - While level 3 is on, SGLang itself writes the prompts to its journal; capture for a bounded time.
version_added: "0.3.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:30000
  service:
    description: The server's systemd unit, whose journal holds its request log.
    type: str
    required: true
  env_file:
    description: The server's environment file, read for SGLANG_API_KEY and SGLANG_ADMIN_API_KEY.
    type: path
    default: ""
  api_key:
    description: The server's API key (else the one in O(env_file)).
    type: str
  duration:
    description: Seconds to capture.
    type: float
    default: 60
  max_requests:
    description: Stop once this many requests finished.
    type: int
    default: 10000
  max_log_bytes:
    description: Bytes of journal lines read at most.
    type: int
    default: 1073741824
  hash_secret:
    description:
      - A secret of this capture (the controller's, made anew for each capture and written nowhere); the prefix
        blocks' digests are returned keyed with it (the first 8 bytes of HMAC-SHA256), the same on every host of the
        capture, so the controller can number them across hosts, and of no use for confirming a guessed prompt to
        anyone who reads the result. Without it the hash ids are numbered on the host.
    type: str
  keep_text:
    description: Also keep the prompts' text, in a 0600 file on the host.
    type: bool
    default: false
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: none
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Capture a minute of traffic
  sglang.deploy.sglang_traffic:
    service: sglang
    env_file: /etc/sglang/sglang.env
    duration: 60
"""

RETURN = r"""
traffic:
  description: >-
    trace (the Mooncake JSONL text, ms from its first arrival, hash ids numbered, or with hash_secret the blocks'
    digests keyed with it, numbered by the controller), start (the first arrival, seconds since the epoch), window ([start, end] of the capture, what
    sglang_router_traffic reads), summary, requests, hashed (requests whose prefix blocks are hashed), unparsed
    (request.finished lines not read), stop (why it stopped early, or null), restored (the logging settings set
    back), text_file (the host's 0600 file of the prompts' text, or null).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture, unit_capture
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import LOCAL_URL


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": LOCAL_URL},
            "service": {"type": "str", "required": True},
            "env_file": {"type": "path", "default": ""},
            "api_key": {"type": "str", "no_log": True},
            "duration": {"type": "float", "default": 60},
            "max_requests": {"type": "int", "default": 10_000},
            "max_log_bytes": {"type": "int", "default": 1 << 30},
            "keep_text": {"type": "bool", "default": False},
            "hash_secret": {"type": "str", "no_log": True},
        },
    )
    p = module.params
    if not 0 < p["duration"] <= 86_400 or p["max_requests"] < 1 or p["max_log_bytes"] < 1:
        module.fail_json(msg="duration must be 0-86400 s, max_requests and max_log_bytes at least 1")
    limits = capture.Limits(p["duration"], p["max_requests"], p["max_log_bytes"])
    try:
        key = p["hash_secret"].encode() if p["hash_secret"] else None
        found = unit_capture.run(
            p["url"], p["service"], p["env_file"], p["api_key"], limits, p["keep_text"], hash_key=key
        )
    except (OSError, ValueError) as exc:
        module.fail_json(msg=f"the capture failed: {exc}")
    module.exit_json(changed=False, traffic=found)


if __name__ == "__main__":
    main()
