"""The benchmark engine's workload settings (host.bench.WORKLOAD_DEFAULTS) as the sglang_benchmark role's variables
and back: sglang_benchmark_<setting>, with the role's own value for "none" (0, "", [] or {} where the engine takes
None). Used by the command line's workload flags (cli/workload.py) and by tune's search files."""

from __future__ import annotations

import json
import math
from pathlib import Path

ROLE_PREFIX = "sglang_benchmark_"
# Each workload setting the role takes, and the role's value for the engine's None (None: the role has no "none").
# timeout has no role variable: the module's default applies.
ROLE_NONE = {
    "concurrency": None,
    "requests": 0,
    "input_len": None,
    "output_len": None,
    "warmup": None,
    "dataset_name": None,
    "dataset_path": "",
    "random_range_ratio": None,
    "seed": None,
    "sharegpt_output_len": 0,
    "gsp": {},
    "request_rate": [],
    "max_concurrency": 0,
    "slo": {},
    "sla_search": [],
    "sla_search_steps": None,
    "min_tokens": None,
}


def from_role(name: str, value):
    """An sglang_benchmark_<name> value as the engine's setting (the role's "none" as None)."""
    if ROLE_NONE[name] is not None and value == ROLE_NONE[name]:
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
    if name in ("sla_search", "concurrency"):
        return list(value)
    if name in ("gsp", "slo"):
        return dict(value)
    return value


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
    return {
        name for name in ROLE_NONE if ROLE_PREFIX + name in variables and is_template(variables[ROLE_PREFIX + name])
    }


def settings_of(extravars: dict) -> dict:
    """The workload settings that variables set (sglang_benchmark_*: -e, or a host's inventory variables), skipping
    any value that holds a template (is_template: Ansible evaluates it later)."""
    out = {}
    for name in ROLE_NONE:
        value = extravars.get(ROLE_PREFIX + name)
        if ROLE_PREFIX + name in extravars and not is_template(value):
            out[name] = from_role(name, value)
    return out


def controller_path(path: str) -> str:
    """A dataset file on the controller as the absolute path the role copies to each host from (~ expanded, a
    relative path from the current folder): for the command line's --dataset-path and a search file's workload."""
    return str(Path(path).expanduser().absolute())
