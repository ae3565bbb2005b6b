"""The sglang_watch role (issue 50): the settings it writes are the watchdog's, and the modules it copies hold every
host module the watchdog and the GPU exporter import."""

from __future__ import annotations

import ast
import fnmatch
import functools
import hashlib
import json
from pathlib import Path

import jinja2
import role_render
import yaml
from role_render import flat_tasks

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


def role_tasks(name: str) -> list[dict]:
    return flat_tasks(yaml.safe_load((ROLE / "tasks" / name).read_text()))


def test_unchanged_modules_cost_one_comparison_and_new_ones_restart_the_exporter():
    """A no-op converge copied the module folder file by file (3.2 s on a lab container, molecule/watch), and new
    modules left a running exporter on the old ones."""
    tasks = {t["name"]: t for t in role_tasks("converge.yml")}
    install = tasks["Install the watchdog's and the exporter's modules"]
    compare = tasks["Compare the installed modules with the role's by their digest"]
    assert compare["check_mode"] is True
    assert install["when"] == [f"{compare['register']} is changed or sglang_watch_force_converge | bool"]
    assert install["notify"] == "sglang_watch exporter"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    assert any(h.get("listen") == "sglang_watch exporter" and "when" in h for h in handlers)


def test_the_convergence_runs_only_when_the_comparison_finds_something_or_is_forced():
    (compare,) = [t for t in role_tasks("main.yml") if "sglang.deploy.sglang_state_due" in t]
    (converge,) = [t for t in role_tasks("main.yml") if "ansible.builtin.include_tasks" in t]
    assert converge["ansible.builtin.include_tasks"] == "converge.yml"
    assert converge["when"] == [f"{compare['register']}.differs | length > 0 or sglang_watch_force_converge | bool"]
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["sglang_watch_force_converge"] is False


GPU = {
    "ansible_facts": {"sglang_gpu": {"count": 2}},
    "__sglang_watch_dcgm": {"stdout": ""},
    "__sglang_watch_exporter_python_stat": {"stat": {"exists": True}},
}
HOST = {
    "sglang_port": 30000,
    "sglang_router_worker_url": "http://10.0.0.5:30000",
    "inventory_hostname": "gpu-1",
    "groups": {},
    "hostvars": {},
    "__sglang_watch_modules_due": {"changed": True},
}


SCENARIOS = {
    "gpu": GPU,
    "no gpu": {**GPU, "ansible_facts": {"sglang_gpu": {"count": 0}}},
    "dcgm": {**GPU, "__sglang_watch_dcgm": {"stdout": "dcgm-exporter.service enabled enabled\n"}},
    "host python": {**GPU, "__sglang_watch_exporter_python_stat": {"stat": {"exists": False}}},
}


@functools.cache
def rendered() -> dict:
    """For each of SCENARIOS, the comparison's arguments, the role's values (each template's digest, the exporter's
    unit) and the writer tasks that run with their module's arguments per item, as Ansible renders them."""
    (compare,) = [t for t in role_tasks("main.yml") if "sglang.deploy.sglang_state_due" in t]
    writers = [t for t in role_tasks("converge.yml") if not t.get("check_mode")]
    values = {
        **{
            f"digest {t.name}": f"{{{{ lookup('ansible.builtin.template', '{t.name}') | hash('sha256') }}}}"
            for t in (ROLE / "templates").iterdir()
        },
        "exporter unit": "{{ lookup('ansible.builtin.template', 'sglang-gpu-exporter.service.j2') }}",
        "exporter on": "{{ __sglang_watch_exporter_on | bool }}",
        "compare": compare["sglang.deploy.sglang_state_due"],
    }
    out = role_render.render("sglang_watch", [{**HOST, **v} for v in SCENARIOS.values()], values, writers)
    return dict(zip(SCENARIOS, out, strict=True))


def converged(scenario: str) -> tuple[dict, dict, list]:
    values = dict(rendered()[scenario]["values"])
    return values.pop("compare"), values, rendered()[scenario]["tasks"]


def test_each_compared_file_and_unit_is_what_its_writer_task_writes():
    """Every file the convergence writes is compared, with the path, owner, group and mode its writer gives it (both
    read one entry of vars/main.yml) and the digest of what it writes; every unit file it writes is a compared unit.
    A writer that drifted from its comparison would converge (and change something) on every run."""
    compare, values, writers = converged("gpu")
    secrets = compare["secret_digests"]
    compared = {e["path"]: e for e in compare["files"] + compare["dirs"]}
    written = {}
    for name, module, items in writers:
        if name == "Install the watchdog's and the exporter's modules":
            continue  # their digest stands for them: the digest file is compared
        for args in items:
            path = args.get("dest", args.get("path"))
            want = compared.get(path, {})
            assert {k: args[k] for k in ("owner", "group", "mode")} == {
                k: want.get(k) for k in ("owner", "group", "mode")
            }, path
            if module == "ansible.builtin.template":
                assert want.get("sha256", secrets.get(path)) == values[f"digest {args['src']}"], path
            elif module == "ansible.builtin.copy":
                assert want["sha256"] == hashlib.sha256(args["content"].encode()).hexdigest(), path
            written[path] = args
    assert sorted(written) == sorted(compared)
    assert set(secrets) == {"/etc/sglang/watch.json"} and "sha256" not in compared["/etc/sglang/watch.json"]
    units = {u["name"].removesuffix(".service") for u in compare["units"]}
    unit_files = {Path(p).name.removesuffix(".service") for p in written if p.startswith("/etc/systemd/system/")}
    assert units == unit_files == {"sglang-watch.timer", "sglang-watch", "sglang-gpu-exporter"}


def test_a_lost_restart_is_the_exporters_and_covers_every_file_whose_change_restarts_it():
    """The files of the tasks that notify the exporter's restart (its unit, the modules) are its restart paths: an
    exporter started before one of them changed missed that restart, and the convergence's first task notifies it
    then (the timer's and its service's new files apply with the daemon's reload, which their comparison checks)."""
    compare, values, writers = converged("gpu")
    (exporter,) = [u for u in compare["units"] if u.get("restart_paths")]
    assert exporter["name"] == "sglang-gpu-exporter"
    tasks = {t["name"]: t for t in role_tasks("converge.yml")}
    notifying = {
        args.get("dest")
        for name, module, items in writers
        if tasks[name].get("notify") == "sglang_watch exporter"
        for args in items
    }
    assert len(notifying) == len(watchdog_modules()) + 1
    assert all(any(fnmatch.fnmatch(p, g) for g in exporter["restart_paths"]) for p in notifying)
    assert all(any(fnmatch.fnmatch(p, g) for p in notifying) for g in exporter["restart_paths"])
    shown = next(iter(tasks.values()))
    assert shown["notify"] == "sglang_watch exporter"
    assert shown["changed_when"] == "__sglang_watch_due.newer | length > 0"
    handlers = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
    (handler,) = [h for h in handlers if h.get("listen") == "sglang_watch exporter"]
    assert handler["when"] == "__sglang_watch_exporter_on | bool" and values["exporter on"] is True


def test_the_exporter_is_compared_and_written_only_on_gpu_hosts_without_dcgm_exporter():
    """On a host without GPUs, or with dcgm-exporter's unit, neither the exporter's unit nor its service is
    compared or written; the stack's Python, where it exists, runs it (the unit compared is the unit written)."""
    for scenario in ("no gpu", "dcgm"):
        compare, values, writers = converged(scenario)
        paths = [e["path"] for e in compare["files"]] + [a.get("dest") for _, _, items in writers for a in items]
        assert values["exporter on"] is False
        assert not any("sglang-gpu-exporter" in str(p) for p in paths)
        assert [u["name"] for u in compare["units"]] == ["sglang-watch.timer", "sglang-watch.service"]
    for scenario, python in (("gpu", "/opt/sglang/venv/bin/python"), ("host python", "/usr/bin/python3")):
        compare, values, _ = converged(scenario)
        assert f"ExecStart={python} -m sglang_watch.gpu_exporter" in values["exporter unit"]
        (entry,) = [e for e in compare["files"] if "sglang-gpu-exporter" in e["path"]]
        assert entry["sha256"] == hashlib.sha256(values["exporter unit"].encode()).hexdigest()


def watchdog_modules() -> list[str]:
    return yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__sglang_watch_modules"]


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
