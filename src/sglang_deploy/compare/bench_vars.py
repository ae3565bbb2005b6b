"""The benchmark's workload settings (the table host.bench.WORKLOAD) as the sglang_benchmark role's variables and
back: sglang_benchmark_<setting>, with the role's own value for "none" where the engine's default is None: the
empty value of the setting's type (0, "", [] or {}). Used by the role's lookup (plugins/lookup/
sglang_benchmark_workload.py), the command line's workload flags (cli/workload.py) and tune's search files."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ansible_collections.sglang.deploy.plugins.module_utils.bench import WORKLOAD

ROLE_PREFIX = "sglang_benchmark_"
_EMPTY = {"int": 0, "str": "", "path": "", "list": [], "dict": {}}
# Each setting's role value for the engine's None (None: the setting has a default, the role no "none").
ROLE_NONE = {name: None if s.default is not None else _EMPTY[s.type] for name, s in WORKLOAD.items()}


def from_role(name: str, value):
    """An sglang_benchmark_<name> value as the engine's setting (the role's "none" as None, also as the text an
    Ansible -e key=value gives: "0", "")."""
    none = ROLE_NONE[name]
    if none is not None and (value is None or value == none or (isinstance(value, str) and value.strip() == str(none))):
        return None
    if name == "request_rate" and isinstance(value, list):
        return [float(v) for v in value]
    return value


def to_role(name: str, value):
    """The engine's setting ``name`` as the role's variable value (None as the role's "none"; inf as "inf")."""
    if value is None:
        return ROLE_NONE[name]
    if name == "request_rate":
        return ["inf" if math.isinf(r) else r for r in value]
    kind = WORKLOAD[name].type
    return list(value) if kind == "list" else dict(value) if kind == "dict" else value


def role_vars(settings: dict) -> dict:
    """{sglang_benchmark_<name>: value} for each setting given."""
    return {ROLE_PREFIX + name: to_role(name, value) for name, value in settings.items()}


def is_template(value) -> bool:
    """Whether a variable's value holds a template Ansible evaluates later (a string with "{", or "{{" / "{%"
    anywhere inside a list or mapping): its value is unknown before the run."""
    if isinstance(value, str):
        return "{" in value
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str)
        return "{{" in text or "{%" in text
    return False


def templated(variables: dict) -> set:
    """The workload settings whose sglang_benchmark_* variable in ``variables`` is a template (is_template)."""
    return {name for name in WORKLOAD if ROLE_PREFIX + name in variables and is_template(variables[ROLE_PREFIX + name])}


def from_role_vars(variables: dict) -> dict:
    """The workload settings that the sglang_benchmark_* variables among ``variables`` set (from_role)."""
    return {
        name: from_role(name, variables[ROLE_PREFIX + name]) for name in WORKLOAD if ROLE_PREFIX + name in variables
    }


def settings_of(extravars: dict) -> dict:
    """The workload settings that variables set (sglang_benchmark_*: -e, or a host's inventory variables), skipping
    any value that holds a template (is_template: Ansible evaluates it later)."""
    return from_role_vars({k: v for k, v in extravars.items() if not is_template(v)})


def controller_path(path: str) -> str:
    """A dataset file on the controller as the absolute path the role copies to each host from (~ expanded, a
    relative path from the current folder): for the command line's --dataset-path and a search file's workload."""
    return str(Path(path).expanduser().absolute())
