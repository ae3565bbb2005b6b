"""The benchmark's workload flags, one per setting of the table host.bench.WORKLOAD, for `sglang-deploy bench` (the
engine's settings) and for `deploy` and `compare` (the sglang_benchmark role's variables, as `-e sglang_benchmark_*`
sets them), with bench_serving's names for the shared concepts."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from sglang_deploy import api
from sglang_deploy.compare import bench_vars, figures
from sglang_deploy.launch import nodes
from ansible_collections.sglang.deploy.plugins.module_utils import bench
from sglang_deploy.paths import REPO
from sglang_deploy.tune import measures as tune_measures, searchfile


def _parsed(parse):
    """An argparse type from a parser that raises ValueError with the fix."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    convert.__name__ = parse.__name__
    return convert


def add_options(p: argparse.ArgumentParser, *, playbook: bool = False) -> None:
    """The workload flags, one per setting of the table (bench.WORKLOAD: --<name>, bench_serving's names too; a
    mapping's sub-settings as --<name>-<sub-setting>). playbook: a flag left out sets nothing (the role's defaults,
    group_vars and -e apply), and the defaults shown are the role's (the same values)."""
    group = p.add_argument_group("workload (bench_serving's names; docs/benchmark.md)")
    for name, s in bench.WORKLOAD.items():
        flag = f"--{name.replace('_', '-')}"
        for sub, default in (s.options or {}).items():
            group.add_argument(
                f"{flag}-{sub.replace('_', '-')}",
                type=int,
                default=argparse.SUPPRESS if playbook else default,
                help=f"{name}'s {sub} ({default})",
            )
        if s.options:
            continue
        shown = _shown(s.default)
        kw = {"help": s.help + (f" ({shown})" if shown else ""), "dest": name}
        if s.type == "bool":
            kw["action"] = "store_true"
        else:
            kw.update(type=_parsed(s.parse) if s.parse else _TYPES[s.type], metavar=s.metavar, choices=s.choices)
        default = list(s.default) if isinstance(s.default, tuple) else s.default
        group.add_argument(flag, *s.flags, default=argparse.SUPPRESS if playbook else default, **kw)


_TYPES = {"int": int, "float": float, "str": str, "path": str}


def _shown(default) -> str:
    """A default as the help shows it: '1,8,32', '256', '600'; '' where the setting has none (or is a switch)."""
    if default is None or isinstance(default, bool):
        return ""
    if isinstance(default, tuple):
        return ",".join(map(str, default))
    return format(default, "g") if isinstance(default, float) else str(default)


def settings(args: argparse.Namespace) -> dict:
    """The engine's workload settings the command line gave (bench: all of them, defaults included; deploy and
    compare: those given). A mapping (gsp): its --<name>-* values given, as one mapping."""
    out = {name: getattr(args, name) for name, s in bench.WORKLOAD.items() if not s.options and hasattr(args, name)}
    for name, s in bench.WORKLOAD.items():
        given = {k: getattr(args, f"{name}_{k}") for k in s.options or () if hasattr(args, f"{name}_{k}")}
        if given:
            out[name] = given
    return out


def role_vars(extravars: dict, given: dict) -> dict:
    """The extra variables of a deploy or compare: ``extravars`` (-e) with the workload flags ``given`` (settings())
    as sglang_benchmark_* variables over them (--gsp-* over a -e mapping). A dataset file is on the controller: a
    relative path is made absolute, as the role copies it to each host. check() checks the workload they make on
    each host; here only a flag's value the role would read as none (--max-concurrency 0: no cap): ValueError."""
    for name, value in given.items():  # a flag's value the role would read as its "none" (--max-concurrency 0)
        none = bench_vars.ROLE_NONE.get(name)
        if value is not None and none is not None and bench_vars.to_role(name, value) == none:
            try:
                bench.check_workload(**{name: value})
            except (TypeError, ValueError) as exc:
                raise ValueError(f"benchmark workload: {exc}") from exc
    merged = bench_vars.settings_of(extravars)
    if "gsp" in given:  # the --gsp-* flags given, over a -e mapping
        given = {**given, "gsp": {**(merged.get("gsp") or {}), **given["gsp"]}}
    merged.update(given)
    out = {**extravars, **bench_vars.role_vars(given)}
    if merged.get("dataset_path"):
        out[bench_vars.ROLE_PREFIX + "dataset_path"] = bench_vars.controller_path(merged["dataset_path"])
    return out


def tune_workload(settings: dict) -> tune_measures.Workload:
    """The engine's workload ``settings`` (bench_vars.settings_of's) as tune's Workload, normalised as a search
    file's workload is (rates as numbers, levels sorted, the dataset path absolute); the engine's defaults for the
    settings not given. searchfile.SearchError naming the fix."""
    raw = {k: v for k, v in settings.items() if k in tune_measures.WORKLOAD_KEYS and v is not None}
    if "concurrency" not in raw and "request_rate" not in raw and "sla_search" not in raw:
        raw["concurrency"] = list(bench.WORKLOAD["concurrency"].default)
    return searchfile._workload(raw, "workload")


def inventory_vars(inventory, limit: str | None) -> tuple[dict, dict]:
    """(hostvars, groups) of the hosts a playbook of the project runs on: one `ansible-inventory --list` with the
    project's ansible.cfg and with playbooks/ as the playbook folder (so the project's group_vars apply to any
    inventory, as they do for a playbook), the --limit applied. hostvars: host -> its variables, inventory and
    group_vars resolved as Ansible does (the role's defaults are not among them; a template stays text); groups:
    group -> its hosts, children included. ValueError naming the fix when the inventory cannot be read."""
    command = [
        _ansible_tool("ansible-inventory"),
        *("-i", api.inventory_path(inventory), "--list", "--playbook-dir", str(REPO / "playbooks")),
        *(("--limit", limit) if limit else ()),
    ]
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"cannot read the inventory with ansible-inventory: {exc}") from exc
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise ValueError(
            f"cannot read the inventory {command[2]} (ansible-inventory rc {done.returncode}); fix it, or the "
            f"--limit pattern:\n{tail}"
        )
    listed = json.loads(done.stdout or "{}")
    hostvars = (listed.pop("_meta", None) or {}).get("hostvars") or {}

    def hosts_of(group: str, seen: set) -> list:
        if group in seen:
            return []
        seen.add(group)
        body = listed.get(group) or {}
        out = list(body.get("hosts") or [])
        for child in body.get("children") or []:
            out += hosts_of(child, seen)
        return list(dict.fromkeys(out))

    groups = {g: hosts_of(g, set()) for g in listed}
    for host in groups.get("all", []):
        hostvars.setdefault(host, {})
    return hostvars, groups


def _ansible_tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def _on(value) -> bool:
    """A variable as Ansible's `| bool` reads it; a template counts as on (it may be)."""
    if isinstance(value, str):
        return bench_vars.is_template(value) or value.strip().lower() in ("yes", "on", "1", "true", "y", "t")
    return bool(value)


def _benchmarked(hostvars: dict, groups: dict, extravars: dict, fleet: bool) -> tuple[list, list]:
    """(servers, routers): the hosts whose benchmark the run makes (playbooks/deploy.yml): each API server outside
    the group sglang_router (rank 0 of a multi-node group) with sglang_benchmark_enabled, and each router host when
    the fleet is benchmarked through it (compare; or sglang_fleet_benchmark)."""

    def var(host, name, default):
        return extravars[name] if name in extravars else hostvars[host].get(name, default)

    routers = [h for h in groups.get("sglang_router", []) if h in hostvars]
    servers = [h for h in hostvars if h not in routers]
    names = {h: hostvars[h].get("sglang_multinode_group") or "" for h in servers}
    try:
        servers = nodes.api_servers(servers, nodes.members_of(servers, names, groups))
    except nodes.NodeError:
        pass  # the playbook's plan refuses it with the fix; its hosts are checked here as servers
    servers = [h for h in servers if _on(var(h, "sglang_benchmark_enabled", True))]
    routers = [
        h
        for h in routers
        if _on(var(h, "sglang_benchmark_enabled", True)) and (fleet or _on(var(h, "sglang_fleet_benchmark", False)))
    ]
    return servers, routers


def host_workloads(hostvars: dict, hosts: list, extravars: dict) -> list[tuple[list, dict, set]]:
    """The workloads the hosts run, as [(hosts, settings, unknown)], the hosts with the same settings together:
    settings: the engine's settings a host's sglang_benchmark_* variables give (its inventory and group_vars, -e and
    the flags over them; the engine's defaults, the role's, for the rest); unknown: the settings whose value is a
    template, or a relative dataset path of the inventory (the role resolves it on the run)."""
    given = {k: v for k, v in extravars.items() if k.startswith(bench_vars.ROLE_PREFIX)}
    out: dict = {}
    for host in hosts:
        inventory = {k: v for k, v in hostvars[host].items() if k.startswith(bench_vars.ROLE_PREFIX)}
        merged = {**inventory, **given}
        unknown = bench_vars.templated(merged)
        settings = bench_vars.settings_of(merged)
        path_var = bench_vars.ROLE_PREFIX + "dataset_path"
        if path_var not in given and settings.get("dataset_path") and not Path(settings["dataset_path"]).is_absolute():
            unknown.add("dataset_path")
        for name in unknown:
            settings.pop(name, None)
        key = json.dumps([settings, sorted(unknown)], sort_keys=True, default=str)
        out.setdefault(key, ([], settings, unknown))[0].append(host)
    return list(out.values())


def _named(hosts: list) -> str:
    return ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")


# What the objectives and limits of a compare depend on: the levels and their SLOs.
LEVEL_SETTINGS = {"concurrency", "request_rate", "max_concurrency", "slo", "sla_search"}


def check(
    extravars: dict,
    inventory=None,
    limit: str | None = None,
    objectives: list = (),
    limits: list = (),
    *,
    fleet: bool = False,
) -> tuple[list, list]:
    """Check, before any playbook, the workload each benchmarked host will run (host_workloads: the role's values
    there, from the inventory, group_vars, -e and the flags) and compare's --objective and --require texts against
    it; returns them as tune's Objective and Limit. ValueError naming the fix and the hosts: an unusable workload
    (a rate <= 0, max_concurrency 0, an SLO on an unknown metric, a dataset file that is missing...), an unknown
    metric, a level the workload does not run, goodput or the SLA rate without SLOs, the SLA rate without an SLA
    search, objectives over hosts that run different workloads. A setting that is a template is not known before
    the run: the checks that depend on it are left to the run. fleet: the fleet is benchmarked through its router
    (compare), whose workload is checked too."""
    parsed = [(t, tune_measures.parse_measure(t)) for t in objectives]  # the forms first: no inventory needed
    bounded = [(t, tune_measures.parse_measure(t, bounded=True)) for t in limits]
    hostvars, groups = inventory_vars(inventory, limit)
    servers, routers = _benchmarked(hostvars, groups, extravars, fleet)
    for hosts, settings, unknown in host_workloads(hostvars, servers + routers, extravars):
        if unknown:
            continue
        try:
            bench.check_workload(**settings)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"benchmark workload of {_named(hosts)}: {exc}") from exc
    if not parsed and not bounded:
        return [], []
    workloads = host_workloads(hostvars, servers, extravars)
    fixed = [(hosts, settings) for hosts, settings, unknown in workloads if not unknown]
    if len(fixed) > 1:
        differ = [k for k in bench_vars.ROLE_NONE if any(s.get(k) != fixed[0][1].get(k) for _, s in fixed)]
        listed = "; ".join(
            f"{_named(hosts)}: " + ", ".join(f"{k} {s.get(k, 'default')}" for k in differ) for hosts, s in fixed
        )
        raise ValueError(
            f"the hosts run different workloads ({listed}): compare ranks the profiles by --objective and --require "
            "over hosts that run one; give those settings with the workload flags or -e, or --limit the run"
        )
    objs: list = []
    lims: list = []
    for hosts, settings, unknown in workloads or [([], {}, LEVEL_SETTINGS)]:  # no host: nothing known
        on = f"on {_named(hosts)}; " if hosts else ""
        on = f" ({on}the workload's flags: --concurrency, --request-rate, --slo, --sla-search)"
        try:
            if unknown & LEVEL_SETTINGS:
                work = _AnyLevels(settings, unknown, parsed + bounded)
            else:  # another setting unknown (a templated dataset path): the levels are known all the same
                work = tune_workload({k: v for k, v in settings.items() if not unknown or k in LEVEL_SETTINGS})
            objs = [searchfile.objective(raw, f"--objective {t}", work) for t, raw in parsed]
            lims = [searchfile.limit(raw, f"--require {t}", work) for t, raw in bounded]
        except searchfile.SearchError as exc:
            raise ValueError(f"{exc}{on}") from exc
    return objs, lims


class _AnyLevels:
    """A workload whose levels are templates (known on the run): every level the texts name is taken to be one, and
    so are SLOs and an SLA search where those are templates too; what is known is checked."""

    def __init__(self, settings: dict, unknown: set, texts: list):
        self._levels = [figures.level_key(raw.get("concurrency"), raw.get("rate")) for _, raw in texts]
        self.slo = {"unknown": 0} if "slo" in unknown else settings.get("slo")
        self.sla_search = (0, 0) if "sla_search" in unknown else settings.get("sla_search")

    def levels(self) -> list:
        return self._levels
