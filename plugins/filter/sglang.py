"""Jinja filters backed by the sglang_deploy package (the one place the logic lives)."""

from __future__ import annotations

import base64
import json

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

from ansible_collections.sglang.deploy.plugins.module_utils import gpu, host_record, stack, text

try:
    from sglang_deploy.compare import compare_report
    from sglang_deploy.launch import flags, formats, nodes, profiles
    from sglang_deploy.fleet import fleet
    from sglang_deploy.rules import rules
    from sglang_deploy import secret_names
    from sglang_deploy.compare import measured, validate
except ImportError as exc:  # a Python need of the collection is missing: each filter fails naming it
    compare_report = flags = formats = nodes = profiles = fleet = rules = secret_names = measured = validate = (
        package.missing(exc)
    )


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


def _checked(func):
    """``func`` as a filter whose refusal (ValueError: formats.FormatError, validate's) fails the task with its
    message."""

    def run(*args):
        try:
            return func(*args)
        except ValueError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    return run


def result_stamp(started_at: object) -> str:
    try:
        return compare_report.result_stamp(started_at)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _reached_at(hostvars, host: str) -> str:
    """The address of ``host`` as the sglang role's defaults give it (sglang_node_address, the host of
    sglang_router_worker_url): its ansible_host, else its name. For a host read through hostvars, which holds its
    inventory variables but never a role's defaults."""
    return str(hostvars[host].get("ansible_host", host))


def router_worker(host: str, hostvars, port: object) -> dict:
    """A worker of the router's manifest: id = the inventory host, url = its sglang_router_worker_url, else the
    sglang role's default for it, http://<its address>:<its sglang_port, else ``port``, the role's>."""
    url = hostvars[host].get("sglang_router_worker_url")
    if url is None:
        url = f"http://{_reached_at(hostvars, host)}:{hostvars[host].get('sglang_port', port)}"
    return {"id": str(host), "url": str(url)}


def key_problems(key: object, var: str) -> list[str]:
    """Why the API key in variable ``var`` cannot be used (never its value); empty when it can, or is unset."""
    return [message for _unused, message in profiles.check_api_key(key, var)]


def router_flag_problems(extra_args: dict, owned: dict, secret_flags: list | None = None) -> list[str]:
    """Why flags of sglang_router_extra_args cannot reach smg's argv (profiles.extra_flag_problems); ``owned``: the
    flags the role sets -> their variables; ``secret_flags``: smg's flags that take a secret."""
    return profiles.extra_flag_problems(
        extra_args,
        "sglang_router_extra_args",
        owned,
        "the router's keys go in sglang_router_api_key and sglang_router_admin_api_key, vaulted: they reach smg"
        " through its 0600 environment file",
        tuple(secret_flags or ()),
    )


def router_retry_problems(extra_args: dict, workers: list, hostvars) -> list[str]:
    """fleet.retry_problems for the router's workers that run the stall watchdog (sglang_watch_enabled, default
    true as in the deploy play)."""
    # Ansible's own truth, as the deploy play's `sglang_watch_enabled | bool` reads it.
    watched = [
        h for h in workers if h in hostvars and boolean(hostvars[h].get("sglang_watch_enabled", True), strict=False)
    ]
    return fleet.retry_problems(extra_args, watched)


def router_key_mismatch(workers: list, hostvars, router_key: object) -> list[str]:
    """fleet.key_mismatch for the router's workers, each one's key its sglang_api_key."""
    # .get: sglang_server_allow_open_bind is a default of a role that the router play does not run.
    return fleet.key_mismatch(
        router_key,
        {h: (hostvars[h].get("sglang_api_key") if h in hostvars else None) for h in workers},
        [h for h in workers if h in hostvars and flags.is_truthy(hostvars[h].get("sglang_server_allow_open_bind"))],
    )


def fleet_summary(hosts: list, hostvars, profile: str, routed: bool) -> list[dict]:
    """What each host of a deploy serves and what the run did there: from the facts the sglang_server role
    (sglang_server_rolled_back_to, sglang_server_deployed's startup) and the deploy play (sglang_fleet_done,
    sglang_fleet_restarted, sglang_fleet_failed, sglang_fleet_failed_restarted) set; what a host served before, from
    its host record (the summary reads the record of a host the roll did not reach)."""
    previous, results = {}, {}
    for host in hosts:
        hv = hostvars[host]
        previous[host] = host_record.read(hv.get("ansible_local"))["last_good_profile"]
        if hv.get("sglang_fleet_done"):
            results[host] = {
                "restarted": bool(hv.get("sglang_fleet_restarted", True)),
                "startup": (hv.get("sglang_server_deployed") or {}).get("startup"),
                "quality": (hv.get("sglang_server_deployed") or {}).get("quality"),
            }
        elif "sglang_fleet_failed" in hv:
            results[host] = {
                "failed": True,
                "rolled_back_to": hv.get("sglang_server_rolled_back_to"),
                "serves": hv["sglang_fleet_failed"],
                "restarted": bool(hv.get("sglang_fleet_failed_restarted", True)),
            }
    return fleet.summary(list(hosts), previous, results, profile, routed)


def fleet_replicas(hosts: list, hostvars) -> dict:
    """What each replica behind the router serves, for the context of a benchmark through the router: the launch
    deployed in this run (sglang_server_deployed: profile, SGLang version, argv, masked environment), else the profile
    of its host record, with its stack manifest and GPU facts."""
    out = {}
    for host in hosts:
        hv = hostvars[host] if host in hostvars else {}
        deployed = hv.get("sglang_server_deployed") or None
        local = hv.get("ansible_local") or {}
        out[host] = {
            "profile": (deployed or host_record.read(local)).get("profile"),
            "deployed": deployed,
            "stack": local.get("sglang_stack") or {},
            "gpu": (hv.get("ansible_facts") or {}).get("sglang_gpu") or {},
        }
    return out


def node_place(host: str, group: str, groups: dict, hostvars, port, timeout, ifname: str = "") -> dict:
    """nodes.node for ``host`` of the inventory group ``group`` (its hosts in inventory order), rank 0's address
    being its sglang_node_address, else the sglang role's default for it."""
    members = groups.get(group) if group else None
    try:
        address = hostvars[members[0]].get("sglang_node_address", _reached_at(hostvars, members[0])) if members else ""
        return nodes.node(host, group, members, address, port, timeout, ifname)
    except nodes.NodeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _members(hosts: list, hostvars, groups: dict) -> dict:
    names = {host: hostvars[host].get("sglang_multinode_group") or "" for host in hosts}
    return nodes.members_of(list(hosts), names, groups)


def fleet_plan(hosts: list, hostvars, groups: dict, serial, idle: list | None = None) -> dict:
    """fleet.plan for the hosts of a run: each multi-node group one server; ``idle``: hosts with nothing due."""
    try:
        return fleet.plan(list(hosts), _members(hosts, hostvars, groups), serial, list(idle or []))
    except (fleet.FleetError, nodes.NodeError) as exc:
        raise AnsibleFilterError(str(exc)) from exc
    except (ValueError, OverflowError) as exc:
        raise AnsibleFilterError(
            f"sglang_fleet_serial {serial!r}: give a number, a percentage or a list of them"
        ) from exc


def api_servers(hosts: list, hostvars, groups: dict) -> list:
    """nodes.api_servers of these hosts: servers of their own and rank 0 of each multi-node group."""
    try:
        return nodes.api_servers(list(hosts), _members(hosts, hostvars, groups))
    except nodes.NodeError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def group_problems(place: dict, hostvars, in_run: list) -> list:
    """nodes.group_problems for the host's group, from each node's rendered launch (fact __sglang_server_node_launch)."""
    if not place:
        return []
    records = {h: hostvars[h].get("__sglang_server_node_launch") for h in place["hosts"]}
    return nodes.group_problems(place["group"], place["hosts"], records, list(in_run))


class FilterModule:
    def filters(self):
        return {
            "sglang_exec_start": _checked(formats.exec_start),
            "sglang_unit_value": _checked(formats.unit_value),
            "sglang_env_file": _checked(formats.env_file),
            "sglang_env_problems": formats.env_problems,
            "sglang_server_command": formats.server_command,
            "sglang_env_file_path": formats.env_file_path,
            "sglang_host_rule_facts": host_rule_facts,
            "sglang_stray_gpu_processes": gpu.stray_processes,
            "sglang_fleet_replicas": fleet_replicas,
            "sglang_mask_secrets": secret_names.mask,
            "sglang_benchmark_measured": measured.measured,
            "sglang_stack_lock_files": stack.lock_files,
            "sglang_result_text": _checked(validate.result_text),
            "sglang_key_problems": key_problems,
            "sglang_router_flag_problems": router_flag_problems,
            "sglang_router_retry_problems": router_retry_problems,
            "sglang_router_key_mismatch": router_key_mismatch,
            "sglang_router_argv": fleet.router_argv,
            "sglang_router_worker": router_worker,
            "sglang_router_local_workers": fleet.local_workers,
            "sglang_router_manifest": fleet.manifest_text,
            "sglang_fleet_summary": fleet_summary,
            "sglang_fleet_plan": fleet_plan,
            "sglang_fleet_after_failure": fleet.after_failure,
            "sglang_fleet_quick_roll": fleet.quick_roll,
            "sglang_fleet_nothing_due": fleet.nothing_due,
            "sglang_node": node_place,
            "sglang_api_servers": api_servers,
            "sglang_group_problems": group_problems,
            "sglang_result_stamp": result_stamp,
            "sglang_escaped": text.escaped,
        }
