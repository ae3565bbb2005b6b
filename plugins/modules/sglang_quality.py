#!/usr/bin/python
"""Ansible module: the quality gate's checks on the host (answers and fingerprint); the action plugin of the same
name judges them against the controller's reference and keeps the fingerprint."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_quality
short_description: Check that an SGLang server answers right (the quality gate)
description:
  - Asks a shipped set of questions with checkable answers (arithmetic, word problems, facts, format following)
    greedily over C(/v1/chat/completions) and scores them against the pass mark (O(settings) C(pass_mark)); skipped when
    C(/server_info) says C(load_format) C(dummy) (random weights know nothing).
  - Takes a fingerprint over C(/generate) (greedy token ids and top-k logprobs of a fixed set of prompts) and fails
    it at once on a NaN, infinite, missing or positive logprob, no token, or one token repeated throughout.
  - With O(reference) (the last good fingerprint of the same model, which the action plugin reads on the
    controller), measures token agreement and logprob drift and holds them to O(settings) C(min_agreement) and
    C(max_logprob_drift); with O(lossless) (speculative decoding) to C(lossless_min_agreement).
  - O(mode=enforce) fails the task when the gate fails (the role then rolls back); O(mode=report) only reports;
    O(mode=off) checks nothing. The checks themselves are in C(ansible_collections.sglang.deploy.plugins.module_utils.quality).
version_added: "0.2.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:30000
  api_key:
    description: The server's API key.
    type: str
  model:
    description: The served model name the questions ask for.
    type: str
  mode:
    description: What a failed gate does.
    type: str
    choices: [enforce, report, "off"]
    default: enforce
  settings:
    description: >-
      Overrides of the gate's settings (C(ansible_collections.sglang.deploy.plugins.module_utils.quality.DEFAULTS)): pass_mark, max_tokens,
      fingerprint_tokens, top_k, min_agreement, max_logprob_drift, lossless_min_agreement, timeout.
    type: dict
    default: {}
  reference:
    description: The fingerprint to hold this one against (a list of {prompt, ids, logprobs, top}).
    type: list
    elements: dict
  lossless:
    description: The profile runs a mode that must not change greedy tokens (speculative decoding).
    type: bool
    default: false
  store:
    description: The controller's folder of fingerprints (read and written by the action plugin only).
    type: str
  stack:
    description: The stack bundle and id the server runs on (the store's key).
    type: str
  reference_stack:
    description: >-
      Hold the server against the fingerprint of this stack on the same profile only (a stack canary); the gate
      fails where none is kept. Empty for the newest (action plugin only).
    type: str
    default: ""
  profile:
    description: The profile deployed (the store's key).
    type: str
  sglang_version:
    description: The SGLang release, kept with the fingerprint.
    type: str
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reads the server only; in check mode the fingerprint is not kept.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Check that the server answers right
  sglang.deploy.sglang_quality:
    url: http://127.0.0.1:30000
    model: qwen
    settings: {pass_mark: 0.9}
"""

RETURN = r"""
quality:
  description: >-
    The gate's result: passed, mode, problems (text), answers (score, pass_mark, passed, asked, wrong: id, prompt,
    expected, answer; null on dummy weights), drift (agreement, max_logprob_drift, prompts), dummy_weights,
    reference (the file held against, or null), kept (the file the fingerprint was kept in, or null).
  returned: always
  type: dict
  sample: {"passed": true, "mode": "enforce", "problems": [], "answers": {"score": 1.0, "pass_mark": 0.8}}
fingerprint:
  description: The fingerprint taken (prompt, ids, logprobs, top per prompt).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.quality import QualityError, gate


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": "http://127.0.0.1:30000"},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str"},
            "mode": {"type": "str", "choices": ["enforce", "report", "off"], "default": "enforce"},
            "settings": {"type": "dict", "default": {}},
            "reference": {"type": "list", "elements": "dict"},
            "lossless": {"type": "bool", "default": False},
            "store": {"type": "str"},
            "stack": {"type": "str"},
            "reference_stack": {"type": "str", "default": ""},
            "profile": {"type": "str"},
            "sglang_version": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    if p["mode"] == "off":
        module.exit_json(changed=False, quality={"passed": None, "mode": "off", "problems": []}, fingerprint=[])
    try:
        found = gate(p["url"], p["model"], p["api_key"], p["settings"], p["reference"], p["lossless"])
    except (QualityError, ValueError) as exc:
        module.fail_json(msg=f"the quality gate could not ask the server: {exc}", quality={"passed": False})
    prints = found.pop("fingerprint")
    module.exit_json(changed=False, quality={**found, "mode": p["mode"]}, fingerprint=prints)


if __name__ == "__main__":
    main()
