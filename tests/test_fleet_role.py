"""One owner per fleet concern (issue 21 items 3 and 4): the router's worker list, the router wait, the local-fact
read, the rule facts, the default profile and the service roles' shared parts each live in one task or variable; the host record has one schema,
one writer (plugins/modules/sglang_host_record.py, its logic in ansible_collections.sglang.deploy.plugins.module_utils.host_record) and one reader."""

from __future__ import annotations

import json
import re
import sys

import pytest
import yaml

from ansible_json import needs_playbook, run_playbook

from ansible_collections.sglang.deploy.plugins.module_utils import host_record
from sglang_deploy.paths import REPO

YAML = sorted(
    p
    for folder in ("roles", "playbooks", "molecule")
    for p in (REPO / folder).rglob("*.yml")
    if not (p.is_relative_to(REPO / "playbooks" / "group_vars"))
) + [REPO / "site.yml"]


def where(pattern: str) -> list[str]:
    """The project's YAML files (roles, playbooks, molecule) that match ``pattern``."""
    return [str(p.relative_to(REPO)) for p in YAML if re.search(pattern, p.read_text(), re.MULTILINE)]


@pytest.mark.parametrize(
    ("what", "pattern", "owner"),
    [
        # Its text is the filter's alone (sglang_router_manifest: the manifest rule and its JSON), written by one task.
        ("the router's worker list", r"sglang_router_manifest\b[^\n]*to_nice_json", None),
        ("the router's worker list's writer", r"dest: .*\.manifest\b", "roles/sglang_fleet/tasks/workers.yml"),
        ("the router wait", r"^\s*sglang.deploy.sglang_router_wait:", "roles/sglang_fleet/tasks/router_wait.yml"),
        ("the local-fact read", r"gather_subset:.*local", "roles/sglang_fleet/tasks/local_facts.yml"),
        ("the rule facts", r"sglang_host_rule_facts", "roles/sglang_server/tasks/facts.yml"),
        ("the default profile", r"'baseline'\)", "roles/sglang_server/defaults/main.yml"),
        ("the host record's writer", r"^\s*sglang.deploy.sglang_host_record:\n\s*event: (?!read\b)", None),
        ("a service account", r"ansible\.builtin\.user:", "roles/sglang_service/tasks/account.yml"),
        ("a service's launcher", r"src: .*/module_utils/launch\.py", "roles/sglang_service/tasks/launcher.yml"),
        (
            "a service's environment file",
            r"env_path \}\}\"\n(?:.*\n)*?\s*mode: \"0600\"\n  no_log: true",
            "roles/sglang_service/tasks/files.yml",
        ),
    ],
)
def test_each_fleet_concern_is_written_in_one_place(what, pattern, owner):
    """The worker list was written in 4 task files, the router waited for in 6, local facts re-read in 6, the rule
    facts built twice (playbooks/stack.yml's copy lacked api_key_set and router_worker_url), baseline in two; the
    service account, launcher, environment file and unit in both service roles."""
    found = where(pattern)
    if what == "the router's worker list":  # nothing formats the filter's text again (to_nice_json, a second copy)
        assert found == [], found
    elif owner is None:  # the module: only the server role writes the record (asked, deployed, rolled back; read)
        assert found and all(f.startswith("roles/sglang_server/tasks/") for f in found), found
    else:
        assert found == [owner], f"{what}: {found}"


def test_no_task_reads_or_writes_the_host_record_file_but_through_its_module_and_filter():
    """It was written by three copy tasks in three shapes and read as ansible_local.sglang_server in nine files."""
    assert where(r"^[^#\n]*sglang_server\.fact") == []
    assert where(r"ansible_local\.sglang_server\b") == []


def test_no_playbook_reads_a_roles_private_variables():
    """A role's __-prefixed variables are its own (a playbook of the collection's users cannot rely on them): a
    playbook reads what a role sets under a public name (sglang_server_rule_facts, sglang_server_restarted,
    sglang_fleet_benchmark_here), and its own variables are not named like a role's (__stack_*, __status_*)."""
    playbooks = sorted((REPO / "playbooks").glob("*.yml")) + [REPO / "site.yml"]
    found = {p.name: sorted(set(re.findall(r"__sglang_\w+", p.read_text()))) for p in playbooks}
    assert {name: names for name, names in found.items() if names} == {}


def test_the_stack_play_validates_with_the_server_roles_rule_facts():
    tasks = yaml.safe_load((REPO / "playbooks" / "tasks" / "stack.yml").read_text())
    render = next(t for t in tasks if "sglang.deploy.sglang_profile" in t)
    assert render["sglang.deploy.sglang_profile"]["facts"] == "{{ sglang_server_rule_facts }}"


RECORD = {
    "profile": "nextn",
    "service": "sglang",
    "url": "http://127.0.0.1:30000",
    "sglang_version": "0.5.16",
    "argv": ["--model-path", "/models/m"],
    "emulated": True,
    "venv_link": "/opt/sglang/venv",
    "venv_target": "/opt/sglang/venv-a",
    "accuracy_warnings": ["DeepGemm is enabled but ... This might cause accuracy degradation on Blackwell."],
    "stack": "stable-0.5.23-2026-11-30-3f2a",
}


def test_the_record_after_each_event():
    deployed = host_record.update({}, "deployed", RECORD)
    assert deployed == {**RECORD, "asked": "nextn", "last_good_profile": "nextn"}
    asked = host_record.update(deployed, "asked", {"profile": "big", "service": "sglang"})
    assert asked == {**deployed, "profile": "big", "asked": "big"}
    why = "Profile big did not come up: the server is up but does not answer right:\n'What is 17 + 25?' ..."
    back = host_record.update(asked, "rolled_back", {"profile": "big", "at": "2026-12-01T12:00:00Z", "why": why})
    assert back == {
        **asked,
        "profile": "nextn",
        "rolled_back": {"from": "big", "to": "nextn", "at": "2026-12-01T12:00:00Z", "why": why.replace("\n", " ")},
    }
    assert host_record.check(back) is back
    # A new ask ends the rollback; a field outside the schema is not kept.
    again = host_record.update({**back, "stray": 1}, "asked", {"profile": "nextn", "service": "sglang"})
    assert "rolled_back" not in again and "stray" not in again
    assert set(deployed) | {"rolled_back", "watchdog"} == set(host_record.FIELDS)  # watchdog: its own writer


@pytest.mark.parametrize(
    ("record", "event", "values", "named"),
    [
        ({}, "rolled_back", {"profile": "big", "at": "t"}, "no last good profile is recorded"),
        ({}, "asked", {"profile": "big"}, "event 'asked' needs service"),
        ({}, "deployed", {**RECORD, "url": None}, "event 'deployed' needs url"),
        ({}, "erase", {}, "unknown event 'erase'"),
    ],
)
def test_an_event_without_what_it_needs_is_refused(record, event, values, named):
    with pytest.raises(host_record.RecordError, match=named):
        host_record.update(record, event, values)


def test_the_reader_gives_every_field():
    assert host_record.read(None) == dict.fromkeys(host_record.FIELDS)
    local = {"sglang_server": {"profile": "nextn", "stray": 1}, "sglang_host": {"emulated": True}}
    assert host_record.read(local) == {**dict.fromkeys(host_record.FIELDS), "profile": "nextn"}


def test_the_record_is_written_as_the_copy_tasks_wrote_it(tmp_path):
    """to_nice_json's text (a host's existing record reads as unchanged), mode 0644, no temporary file left."""
    path = tmp_path / "facts.d" / "sglang_server.fact"
    host_record.write(RECORD, str(path))
    assert path.read_text() == json.dumps(RECORD, indent=4, sort_keys=True) + "\n"
    assert path.stat().st_mode & 0o777 == 0o644 and [p.name for p in path.parent.iterdir()] == [path.name]
    assert host_record.load(str(path)) == RECORD
    path.write_text("[1]")
    assert host_record.load(str(path)) == {} == host_record.load(str(tmp_path / "none"))


@needs_playbook
def test_the_module_records_each_event_once(tmp_path):
    """Through ansible-playbook: deployed, asked (twice: the second changes nothing), rolled_back, read; check mode
    writes nothing."""
    path = tmp_path / "sglang_server.fact"
    events = [
        ("deployed", RECORD),
        ("asked", {"profile": "big", "service": "sglang"}),
        ("asked", {"profile": "big", "service": "sglang"}),
        ("rolled_back", {"profile": "big", "at": "2026-12-01T12:00:00Z"}),
        ("read", {}),
    ]
    tasks = [{"sglang.deploy.sglang_host_record": {"event": e, "path": str(path), **v}} for e, v in events]
    tasks.append(
        {
            "sglang.deploy.sglang_host_record": {"event": "asked", "path": str(path), "profile": "x", "service": "s"},
            "check_mode": True,
        }
    )
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    args = ["-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", "play.yml"]
    out, doc = run_playbook(args, tmp_path)
    results = [t["hosts"]["localhost"] for t in doc["plays"][0]["tasks"]]
    assert out.returncode == 0, out.stdout[-3000:]
    assert [r["changed"] for r in results] == [True, True, False, True, False, True]
    assert results[4]["record"]["rolled_back"] == {"from": "big", "to": "nextn", "at": "2026-12-01T12:00:00Z"}
    assert results[4]["record"]["profile"] == "nextn" and results[4]["record"]["asked"] == "big"
    assert json.loads(path.read_text()) == results[3]["record"]  # check mode wrote nothing


def test_python_reads_the_host_record_only_through_its_reader():
    """api.parse_status and the fleet filters each took the local fact apart themselves."""
    readers = [
        str(p.relative_to(REPO))
        for folder in ("src", "plugins/filter", "plugins/action", "plugins/modules", "plugins/module_utils")
        for p in (REPO / folder).rglob("*.py")
        if re.search(r"""\.get\(["']sglang_server["']\)""", p.read_text())
    ]
    assert readers == ["plugins/module_utils/host_record.py"]


def test_the_rollback_reads_a_host_record_that_lacks_fields():
    """The reader gives None for a field the record lacks (no record, or one written before the field existed): every
    condition of the rollback on the last good record must still evaluate, or the restore stops half-way (the unit
    put back, the failed server left) with a TypeError in place of the server's traceback."""
    import jinja2

    tasks = yaml.safe_load((REPO / "roles" / "sglang_server" / "tasks" / "rollback.yml").read_text())
    conditions = [
        t["when"]
        for block in tasks
        for t in block.get("block", []) + block.get("rescue", []) + [block]
        if "__sglang_server_last_good." in str(t.get("when", ""))
    ]
    assert conditions, "rollback.yml no longer reads the last good record"
    env = jinja2.Environment()
    for record in (host_record.read({}), host_record.read({"sglang_server": {"last_good_profile": "baseline"}})):
        for when in conditions:
            for expr in when if isinstance(when, list) else [when]:
                env.compile_expression(expr)(__sglang_server_last_good=record)
