"""Jinja filters backed by the sglang_deploy package (the one place the logic lives)."""

from __future__ import annotations

import base64
import json

from sglang_deploy import gpu, rules, secret_names
from sglang_deploy.systemd import flag_lines, quote


def _slurped_json(result: dict) -> dict | None:
    return json.loads(base64.b64decode(result["content"])) if "content" in result else None


def host_rule_facts(gpu: dict | None, model_files: list[dict] | None = None) -> dict:
    """Validation-rule facts from the host's GPU facts and, when given, the slurp results of the checkpoint's
    [config.json, hf_quant_config.json] (a missing config.json means the model path is missing)."""
    facts = rules.gpu_facts(gpu)
    if model_files is not None:
        config, hf_quant = (_slurped_json(r) for r in model_files)
        facts["model_path_exists"] = config is not None
        if config is not None:
            facts.update(rules.model_facts(config, hf_quant))
    return facts


class FilterModule:
    def filters(self):
        return {
            "sglang_systemd_quote": quote,
            "sglang_unit_flag_lines": flag_lines,
            "sglang_host_rule_facts": host_rule_facts,
            "sglang_stray_gpu_processes": gpu.stray_processes,
            "sglang_mask_secrets": secret_names.mask,
        }
