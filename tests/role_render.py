"""A role's tasks as Ansible renders them, without a host: its defaults and vars, the inventory's values a test
gives, the tasks' `when` and `loop`, and their module arguments, templated by ansible-core's own Templar (its
lookups and filters: a template's digest is the one the role computes).

The templating runs in a child process: ansible-core's plugin loader, once set up, would change how this process
imports the collection's modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MODULES = ("ansible.builtin.template", "ansible.builtin.copy", "ansible.builtin.file")


def flat_tasks(tasks: list[dict], when: tuple = ()) -> list[dict]:
    """The tasks, those of blocks in their place with the blocks' `when` added to their own."""
    out = []
    for task in tasks:
        conds = (*when, *([task["when"]] if isinstance(task.get("when"), str) else task.get("when", [])))
        out += flat_tasks(task["block"], conds) if "block" in task else [{**task, "when": list(conds)}]
    return out


def render(role: str, scenarios: list[dict], values: dict, tasks: list[dict] = ()) -> list[dict]:
    """For each of ``scenarios`` (the host's and inventory's variables): ``values`` (name: any template) rendered,
    and each of ``tasks`` that runs (its `when` true) and calls one of MODULES, with its arguments per loop item:
    {"values": {...}, "tasks": [[name, module, [args, ...]], ...]}."""
    request = {"role": str(REPO / "roles" / role), "scenarios": scenarios, "values": values, "tasks": list(tasks)}
    done = subprocess.run(
        [sys.executable, __file__], input=json.dumps(request), capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _trusted(value):
    """``value`` with its strings trusted as templates (ansible-core renders only those)."""
    from ansible.template import trust_as_template

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return value


def _scenario(loader, context: dict, request: dict) -> dict:
    from ansible.template import Templar

    def template(value, extra=None):
        return Templar(loader=loader, variables={**context, **(extra or {})}).template(_trusted(value))

    tasks = []
    for task in request["tasks"]:
        if not all(template("{{ (" + c + ") | bool }}") for c in task["when"]):
            continue
        module = next((m for m in MODULES if m in task), None)
        if module:
            items = template(task["loop"]) if "loop" in task else [None]
            tasks.append([task["name"], module, [template(task[module], {"item": item}) for item in items]])
    return {"values": {k: template(v) for k, v in request["values"].items()}, "tasks": tasks}


def _main() -> None:
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader([str(REPO / "collections")])
    request = json.load(sys.stdin)
    role, loader = Path(request["role"]), DataLoader()
    role_vars = {"role_path": str(role), "ansible_search_path": [str(role)]}
    for part in ("defaults", "vars"):
        role_vars |= loader.load_from_file(str(role / part / "main.yml"), trusted_as_template=True) or {}
    out = [_scenario(loader, {**role_vars, **_trusted(s)}, request) for s in request["scenarios"]]
    json.dump(out, sys.stdout, default=str)


if __name__ == "__main__":
    _main()
