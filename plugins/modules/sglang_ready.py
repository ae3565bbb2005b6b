#!/usr/bin/python
"""Ansible module: wait for an SGLang server to be ready, failing fast when its unit dies."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_ready
short_description: Wait until an SGLang server is ready, fail fast when it crashes, check its output
description:
  - Waits the way SGLang signals readiness. The port is closed while weights load and CUDA graphs are
    captured; C(GET /health) answers 503 during the warm-up request and 200 once the server is up.
    C(/v1/models) is not used because it answers before warm-up finishes.
  - With O(unit), a background poll of
    C(systemctl show -p ActiveState,SubState,MainPID,NRestarts,ExecMainStatus,LoadState,ExecMainStartTimestamp)
    every O(sleep) seconds watches the server process. When it exits or restarts (state failed, inactive,
    deactivating or activating/auto-restart, MainPID changes, NRestarts grows) the module fails at once
    with the unit's state and the last 60 journal lines
    (C(journalctl -u UNIT --since <process start> -n 60 --no-pager -o cat)), which hold the traceback,
    instead of waiting out O(timeout).
  - After the server is ready and when O(sanity=true), sends a few deterministic chat prompts
    (temperature 0, 32 tokens) and fails when an answer is empty, white space only, one character
    repeated (the C(!!!!) of a broken kernel backend), or not text (more than 10% control, unassigned,
    private-use or U+FFFD replacement characters). The failure names the check and shows the output.
  - When C(/server_info) says C(load_format) C(dummy) (random weights, which write no language), only
    a run of C(!) fails (token id 0 of byte-level BPE vocabularies, what NaN logits produce); the
    outputs are then marked C(dummy_weights).
  - With O(unit), reports where the start of the unit's current process went (C(startup)), from SGLang's own
    log lines in its journal (C(journalctl _SYSTEMD_INVOCATION_ID=... -o json), read up to SGLang's ready
    line), timed from systemd's process start; also when the wait times out. On the lab's emulated server
    the figures are synthetic and marked C(emulated).
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:30000
  unit:
    description: Systemd unit running the server; watched for crashes while waiting.
    type: str
  timeout:
    description: Seconds to wait for readiness (a 397B model load takes tens of minutes).
    type: int
    default: 1800
  delay:
    description: Seconds to wait before the first probe (the unit is watched meanwhile).
    type: int
    default: 0
  sleep:
    description: Seconds between probes and between unit polls.
    type: float
    default: 1
  api_key:
    description: "Server API key, sent as C(Authorization: Bearer) (needed for the sanity prompts)."
    type: str
  model:
    description: Served model name for the sanity prompts; default the first id of C(/v1/models).
    type: str
  sanity:
    description: Run the output sanity prompts once the server is ready.
    type: bool
    default: true
  freeze_gc:
    description:
      - Once ready and after the sanity prompts (when they run), C(POST /freeze_gc), as SGLang's long-GC warning
        advises (docs/gpu.md says why). Once per server process; with O(unit) a process whose journal already has
        SGLang's freeze line is not frozen again (what is alive at a freeze stays for the process's life).
      - No freeze (an answer other than 200, no answer, a key that cannot be sent) warns and never fails the module.
    type: bool
    default: false
  admin_api_key:
    description: The server's admin key (C(--admin-api-key)); when set SGLang takes only it for C(/freeze_gc).
    type: str
notes:
  - Check mode is supported; nothing is changed, the wait and the checks still run.
  - Runs on the server host (the URL and the unit are local to it). Stdlib only, Python 3.10+.
"""

EXAMPLES = r"""
- name: Wait for the SGLang server and check its output
  sglang_ready:
    url: "http://{{ sglang_host }}:{{ sglang_port }}"
    unit: sglang.service
    api_key: "{{ sglang_api_key }}"
    model: "{{ sglang_served_model_name }}"
    timeout: 2400
"""

RETURN = r"""
elapsed:
  description: Seconds from the start of the wait until /health answered 200.
  returned: success
  type: float
  sample: 412.7
attempts:
  description: Number of /health probes.
  returned: always
  type: int
  sample: 413
health_status:
  description: HTTP status of the last /health probe (null when the port was closed).
  returned: always
  type: int
  sample: 200
first_seen:
  description: Seconds into the wait at which each stage (closed, warming, ready, error) was first seen.
  returned: success
  type: dict
  sample: {"closed": 0.002, "warming": 380.1, "ready": 412.7}
sanity:
  description: The sanity prompts and outputs (empty when sanity=false).
  returned: success, or when a sanity check failed
  type: list
  elements: dict
  sample: [{"prompt": "What is the capital of France? Answer with one word.", "output": "Paris",
            "field": "content", "finish_reason": "stop"}]
gc_frozen:
  description:
    - Whether the server's GC is frozen (C(/freeze_gc) answered 200 now, or the process's journal says it froze
      before); null without freeze_gc or in check mode.
    - A 200 is the tokenizer manager's answer; SGLang tells its scheduler to freeze without an answer.
  returned: success
  type: bool
failed_check:
  description: On a sanity failure, the check that failed (empty, whitespace, repeated_char, not_text,
    http_status, response_format, model (the answer names another model), request) and the offending output.
  returned: when a sanity check failed
  type: dict
  sample: {"check": "repeated_char", "prompt": "Count from 1 to 10, separated by commas.", "output": "!!!!!!!!"}
unit_state:
  description: The unit's C(systemctl show) properties when the process died.
  returned: when the unit died
  type: dict
  sample: {"ActiveState": "failed", "SubState": "failed", "MainPID": "0", "NRestarts": "0", "ExecMainStatus": "1"}
journal:
  description: The last 60 journal lines of the unit when the process died.
  returned: when the unit died
  type: list
  elements: str
stage:
  description: Last readiness stage seen (closed, warming, error) when the wait timed out.
  returned: on timeout
  type: str
startup:
  description:
    - Where the start went (ansible_collections.sglang.deploy.plugins.module_utils.startup), from the unit's journal. C(milestones) are seconds
      after the process start at which SGLang logged each step (process_start, server_args, first_model_line
      (spawn and imports done), weights_begin, weights_loaded, kv_cache_allocated, cuda_graphs_begin,
      cuda_graphs_captured, http_up, ready); C(phases) the seconds per phase (imports, weights and cuda_graphs
      as SGLang reports them, kv_cache, warmup, total, other); C(jit_builds) the DeepGEMM and late Triton
      compile lines (FlashInfer logs none); C(accuracy_warnings) SGLang's lines, of any rank, that say its
      output may be wrong (accuracy degradation, precision loss); C(emulated) when the lab's emulator wrote them;
      C(summary) in words.
    - Only C(error), saying why, when systemd or the journal cannot say.
  returned: with unit, on success or timeout
  type: dict
  sample: {"clock": "journal", "emulated": false,
           "milestones": {"process_start": 0.0, "first_model_line": 46.2, "cuda_graphs_captured": 125.0, "ready": 135.3},
           "phases": {"imports": 46.2, "weights": 0.2, "kv_cache": 0.1, "cuda_graphs": 62.9, "warmup": 8.3,
                      "total": 135.3, "other": 17.6},
           "jit_builds": {"count": 0, "lines": []}, "accuracy_warnings": [],
           "summary": "ready 135.3 s after its start: imports 46.2 s, weights 0.2 s, ..."}
"""

import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import (
    DEFAULT_DELAY_S,
    DEFAULT_SLEEP_S,
    DEFAULT_TIMEOUT_S,
    SANITY_TIMEOUT_S,
    NotReady,
    SanityError,
    ServerDied,
    freeze_gc,
    sanity_check,
    wait_ready,
)
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import LOCAL_URL, Endpoint, served_model
from ansible_collections.sglang.deploy.plugins.module_utils.startup import froze_gc, unit_report


def _freeze(module, p: dict) -> bool:
    """freeze_gc() once per server process; a warning when it did not take."""
    try:
        if p["unit"] and froze_gc(p["unit"]):
            return True
    except (OSError, RuntimeError, subprocess.SubprocessError):
        pass  # the journal cannot say: freeze (a second freeze keeps what is alive, nothing worse)
    frozen = freeze_gc(p["url"], p["admin_api_key"] or p["api_key"])
    if not frozen["frozen"]:
        why = frozen.get("error") or f"status {frozen['status']}"
        module.warn(f"POST /freeze_gc did not freeze the server's GC ({why}): its full collections stay as started")
    return frozen["frozen"]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": LOCAL_URL},
            "unit": {"type": "str"},
            "timeout": {"type": "int", "default": DEFAULT_TIMEOUT_S},
            "delay": {"type": "int", "default": DEFAULT_DELAY_S},
            "sleep": {"type": "float", "default": DEFAULT_SLEEP_S},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str"},
            "sanity": {"type": "bool", "default": True},
            "freeze_gc": {"type": "bool", "default": False},
            "admin_api_key": {"type": "str", "no_log": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = wait_ready(
            p["url"], timeout=p["timeout"], delay=p["delay"], sleep=p["sleep"], api_key=p["api_key"], unit=p["unit"]
        )
    except ServerDied as exc:
        tail = "\n".join(exc.journal[-25:])
        module.fail_json(
            msg=f"SGLang server died before it was ready: {exc.reason}\n--- journal (last lines) ---\n{tail}",
            unit_state=exc.state,
            journal=exc.journal,
        )
    except NotReady as exc:
        module.fail_json(
            msg=str(exc),
            stage=exc.stage,
            attempts=exc.attempts,
            health_status=exc.health_status,
            **({"startup": unit_report(p["unit"])} if p["unit"] else {}),
        )
    except (ValueError, RuntimeError) as exc:
        module.fail_json(msg=str(exc))
    if p["unit"]:
        # The moment /health answered 200 (systemd's clock), when the wait saw the server not ready first.
        result["startup"] = unit_report(p["unit"], time.monotonic() if len(result["first_seen"]) > 1 else None)
    result["sanity"] = []
    if p["sanity"]:
        try:
            model = p["model"] or served_model(Endpoint.parse(p["url"]), p["api_key"], SANITY_TIMEOUT_S)
        except OSError as exc:
            module.fail_json(msg=f"SGLang server stopped answering after it was ready: GET /v1/models: {exc}", **result)
        try:
            result["sanity"] = sanity_check(p["url"], model, p["api_key"])
        except SanityError as exc:
            result["sanity"] = exc.outputs
            module.fail_json(
                msg=f"SGLang server is up but its output is broken: {exc}",
                failed_check={"check": exc.check, "prompt": exc.prompt, "output": exc.output},
                **result,
            )
    result["gc_frozen"] = None
    if p["freeze_gc"] and not module.check_mode:
        result["gc_frozen"] = _freeze(module, p)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
