"""The sglang_watch role (issue 50): the settings it writes are the watchdog's, and the modules it copies hold every
host module the watchdog and the GPU exporter import."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jinja2
import yaml

from ansible_collections.sglang.deploy.plugins.module_utils import watchdog

REPO = Path(__file__).resolve().parents[1]
ROLE = REPO / "roles" / "sglang_watch"


def test_the_settings_the_role_writes_are_the_watchdogs():
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["to_json"] = json.dumps
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {k: v for k, v in defaults.items() if "{{" not in str(v)}
    values |= {
        "sglang_watch_url": "http://127.0.0.1:30000",
        "sglang_watch_router_url": "http://10.0.0.9:8000",
        "sglang_watch_router_key": "admin-key-0123456789",
        "sglang_watch_server_env_file": "/etc/sglang/sglang.env",
        "__sglang_watch_hold_path": yaml.safe_load((ROLE / "vars" / "main.yml").read_text())[
            "__sglang_watch_hold_path"
        ],
        "inventory_hostname": "gpu-1",
        "sglang_router_worker_url": "http://10.0.0.5:30000",
    }
    text = env.from_string((ROLE / "templates" / "watch.json.j2").read_text()).render(values)
    settings = watchdog.Settings.parse(json.loads(text))
    assert (settings.failures, settings.deadline_s, settings.worker_id) == (3, 30.0, "gpu-1")
    assert settings.hold_path == watchdog.HOLD_PATH


def test_the_role_copies_every_host_module_the_programs_import():
    folder = REPO / "plugins" / "module_utils"
    have = set(yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__sglang_watch_modules"])
    wanted = set()
    for path in (folder / f"{name}.py" for name in have):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                wanted |= {node.module} if node.module else {a.name for a in node.names}
    assert {"watchdog", "gpu_exporter"} <= have and wanted <= have


def test_unchanged_modules_cost_one_comparison_and_new_ones_restart_the_exporter():
    """A no-op converge copied the module folder file by file (3.2 s on a lab container, molecule/watch), and new
    modules left a running exporter on the old ones."""
    tasks = {t["name"]: t for t in yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())}
    install = tasks["Install the watchdog's and the exporter's modules"]
    compare = tasks["Compare the installed modules with the role's by their digest"]
    assert compare["check_mode"] is True and install["when"] == f"{compare['register']} is changed"
    assert install["notify"] == "sglang_watch exporter"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    assert any(h.get("listen") == "sglang_watch exporter" and "when" in h for h in handlers)


def test_the_rollback_holds_the_host_and_releases_it_always():
    """playbooks/rollback.yml restarts the server as deploy.yml does: held against the watchdog, released in an always
    block (issue 50, item 3)."""
    play = yaml.safe_load((REPO / "playbooks" / "rollback.yml").read_text())[0]
    block = next(task for task in play["tasks"] if "block" in task)

    def entry(tasks, name):
        return [t for t in tasks if t.get("ansible.builtin.include_role", {}).get("tasks_from") == name]

    for tasks, name in ((block["block"][:1], "hold"), (block["always"], "release")):
        (task,) = entry(tasks, name)
        assert task["ansible.builtin.include_role"]["name"] == "sglang_watch"
        assert task["ansible.builtin.include_role"]["apply"] == {"tags": ["always"]}
        assert task["when"] == "sglang_watch_enabled | default(true) | bool"
