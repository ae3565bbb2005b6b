#!/usr/bin/python
"""Ansible module: the one writer of the host record, the local fact sglang_server."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_host_record
short_description: Read or update the host record of the SGLang server (local fact sglang_server)
description:
  - The record C(/etc/ansible/facts.d/sglang_server.fact) says what the sglang_server role deployed on the host;
    C(ansible_local.sglang_server) reads it back (through the filter C(sglang_host_record), which gives every field).
    This module is its only writer, with one schema (ansible_collections.sglang.deploy.plugins.module_utils.host_record.FIELDS).
  - O(event=asked) when the unit of O(profile) is written (a rollback on record is dropped);
    O(event=deployed) when that profile passed the readiness wait (the last good profile, its launch and venv);
    O(event=rolled_back) when O(profile) failed and the last good profile serves again;
    O(event=read) returns the record as stored and changes nothing.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  event:
    description: What happened on the host.
    type: str
    required: true
    choices: [asked, deployed, rolled_back, read]
  profile:
    description: The profile asked for (asked), that passed (deployed) or that failed (rolled_back).
    type: str
  service:
    description: The server's systemd unit (asked, deployed).
    type: str
  url:
    description: Where the server listens (deployed).
    type: str
  sglang_version:
    description: The SGLang release the launch was rendered for (deployed).
    type: str
  argv:
    description: The launch's arguments (deployed).
    type: list
    elements: str
  emulated:
    description: Whether the lab's emulated server runs (deployed).
    type: bool
  venv_link:
    description: The stack's venv symlink the profile runs on, empty when it is none (deployed).
    type: str
  venv_target:
    description: Where that symlink points (deployed).
    type: str
  accuracy_warnings:
    description: SGLang's warnings at the start that its output may be wrong (deployed).
    type: list
    elements: str
    default: []
  stack:
    description: The stack the profile runs on, as the quality gate's store names it (deployed).
    type: str
  at:
    description: When the rollback happened, UTC ISO 8601 (rolled_back).
    type: str
  why:
    description: Why the profile failed, on one line (rolled_back).
    type: str
  path:
    description: The record's file.
    type: path
    default: /etc/ansible/facts.d/sglang_server.fact
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without changing the record.
    support: full
  diff_mode:
    description: Returns the record before and after with --diff.
    support: full
"""

EXAMPLES = r"""
- name: Record the profile of the installed unit
  sglang_host_record:
    event: asked
    profile: nextn
    service: sglang
"""

RETURN = r"""
record:
  description: The record after the event; for O(event=read) the stored one with every field (null where unset).
  returned: always
  type: dict
previous:
  description: The record before the event.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.host_record import (
    EVENT_FIELDS,
    RecordError,
    check,
    complete,
    load,
    update,
    write,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "event": {"type": "str", "required": True, "choices": [*EVENT_FIELDS, "read"]},
            "profile": {"type": "str"},
            "service": {"type": "str"},
            "url": {"type": "str"},
            "sglang_version": {"type": "str"},
            "argv": {"type": "list", "elements": "str"},
            "emulated": {"type": "bool"},
            "venv_link": {"type": "str"},
            "venv_target": {"type": "str"},
            "accuracy_warnings": {"type": "list", "elements": "str", "default": []},
            "stack": {"type": "str"},
            "at": {"type": "str"},
            "why": {"type": "str"},
            "path": {"type": "path", "default": "/etc/ansible/facts.d/sglang_server.fact"},
        },
        supports_check_mode=True,
    )
    p = module.params
    previous = load(p["path"])
    try:
        check(previous)
        if p["event"] == "read":
            module.exit_json(changed=False, record=complete(previous), previous=previous)
        record = update(previous, p["event"], p)
    except RecordError as exc:
        module.fail_json(msg=f"{p['path']}: {exc}", record=previous, previous=previous)
    changed = record != previous
    if changed and not module.check_mode:
        write(record, p["path"])
    module.exit_json(changed=changed, record=record, previous=previous, diff={"before": previous, "after": record})


if __name__ == "__main__":
    main()
