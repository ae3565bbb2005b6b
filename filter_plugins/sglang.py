"""Jinja filters backed by the sglang_deploy package (the one place the logic lives)."""

from __future__ import annotations

import base64
import json

from ansible.errors import AnsibleFilterError

from sglang_deploy import fleet, formats, gpu, rules, secret_names


def _slurped_json(result: dict, name: str) -> object:
    if "content" not in result:
        return None
    try:
        return json.loads(base64.b64decode(result["content"]).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise rules.ModelConfigError(f"{name} is not UTF-8 JSON: {exc}") from exc


def host_rule_facts(gpu: dict | None, model_files: list[dict] | None = None) -> dict:
    """Validation-rule facts from the host's GPU facts and, when given, the slurp results of the checkpoint's
    [config.json, hf_quant_config.json] (a missing config.json means the model path is missing)."""
    facts = rules.gpu_facts(gpu)
    if model_files is not None:
        try:
            config, hf_quant = (
                _slurped_json(r, n) for r, n in zip(model_files, ("config.json", "hf_quant_config.json"))
            )
            facts["model_path_exists"] = config is not None
            if config is not None:
                facts.update(rules.model_facts(config, hf_quant))
        except rules.ModelConfigError as exc:
            raise AnsibleFilterError(
                f"the checkpoint on the host: {exc}. Fix the file, or set model_architecture and model_quantization"
                " in sglang_profile_facts"
            ) from exc
    return facts


def _format(func):
    def run(*args):
        try:
            return func(*args)
        except formats.FormatError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return run


def router_worker(pair: list) -> dict:
    """(inventory host, URL) -> a worker of the router's manifest."""
    return {"id": str(pair[0]), "url": str(pair[1])}


def fleet_summary(hosts: list, hostvars, profile: str) -> list[dict]:
    """What each host of a rolling deploy serves: from the facts the sglang_server role and the fleet steps set."""
    previous, deployed, failed = {}, {}, {}
    for host in hosts:
        hv = hostvars[host]
        previous[host] = ((hv.get("ansible_local") or {}).get("sglang_server") or {}).get("last_good_profile")
        if hv.get("sglang_fleet_done"):
            deployed[host] = hv["sglang_server_deployed"]["profile"]
        elif "sglang_fleet_failed" in hv:
            failed[host] = hv["sglang_fleet_failed"]
    return fleet.summary(list(hosts), previous, deployed, failed, profile)


class FilterModule:
    def filters(self):
        return {
            "sglang_exec_start": _format(formats.exec_start),
            "sglang_unit_value": _format(formats.unit_value),
            "sglang_env_file": _format(formats.env_file),
            "sglang_env_problems": formats.env_problems,
            "sglang_server_command": formats.server_command,
            "sglang_env_file_path": formats.env_file_path,
            "sglang_host_rule_facts": host_rule_facts,
            "sglang_stray_gpu_processes": gpu.stray_processes,
            "sglang_mask_secrets": secret_names.mask,
            "sglang_router_argv": fleet.router_argv,
            "sglang_router_worker": router_worker,
            "sglang_router_manifest": fleet.manifest,
            "sglang_fleet_summary": fleet_summary,
        }
