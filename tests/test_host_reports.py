"""What a host reports is data (issue 48 R1, R14): a host record that breaks the schema is refused naming the host
and the field, never planned with, deployed or templated; status shows it instead of failing."""

from __future__ import annotations

import pytest

from sglang_deploy import api, cli
from sglang_deploy.api import results, rollout
from sglang_deploy.fleet import fleet
from ansible_collections.sglang.deploy.plugins.module_utils import host_record

LOOKUP = "{{ lookup('pipe', 'id > PWNED; echo baseline') }}"
GOOD = {"profile": "baseline", "last_good_profile": "baseline", "service": "sglang", "emulated": True}


def status_data(record: object, unit: str = "LoadState=loaded\nActiveState=inactive\nSubState=dead") -> dict:
    return {"sglang_status": {"gpu-1": {"unit": unit, "local": {"sglang_server": record}, "manifest": {}}}}


@pytest.mark.parametrize(
    ("record", "named"),
    [
        ({**GOOD, "last_good_profile": LOOKUP}, "'last_good_profile'"),
        ({**GOOD, "profile": ["baseline"]}, "'profile'"),
        ({**GOOD, "service": "--root=/"}, "'service'"),
        ({**GOOD, "emulated": "yes"}, "'emulated'"),
        ({**GOOD, "argv": ["--port", "1\n2"]}, "'argv'"),
        ({**GOOD, "url": "http://x\u202e"}, "'url'"),
        ({**GOOD, "rolled_back": {"from": "a", "to": LOOKUP, "at": "t"}}, "'rolled_back'"),
        ("error loading facts as JSON or ini - please check content: /etc/ansible/facts.d/sglang_server.fact", "JSON"),
    ],
)
def test_a_record_that_breaks_the_schema_is_refused_naming_the_field(record, named):
    with pytest.raises(host_record.RecordError, match=named) as exc:
        host_record.read({"sglang_server": record})
    assert host_record.PATH in str(exc.value) and "\n" not in str(exc.value)
    found = results.parse_status(status_data(record))["gpu-1"]
    assert named in found.error and found.profile is None and found.last_good_profile is None


def test_a_sound_record_reads_as_before():
    found = results.parse_status(status_data(GOOD))["gpu-1"]
    assert (found.error, found.last_good_profile, found.emulated) == (None, "baseline", False)
    assert host_record.read({"sglang_server": GOOD})["service"] == "sglang"


@pytest.mark.parametrize("raw", ["text", {"local": "not facts"}, {"local": {}, "unit": ["x"]}, {"manifest": "x"}])
def test_a_status_report_of_the_wrong_shape_is_an_error_not_a_traceback(raw):
    assert results.parse_status({"sglang_status": {"gpu-1": raw}})["gpu-1"].error


def test_status_shows_the_refused_record_and_exits_1(monkeypatch, capsys):
    hosts = results.parse_status(status_data({**GOOD, "profile": LOOKUP}))
    monkeypatch.setattr(api, "status", lambda **kw: api.StatusResult(hosts=hosts, run=ran()))
    assert cli.main(["status"]) == 1
    out = capsys.readouterr().out
    assert "refused:" in out and "'profile'" in out and "gpu-1" in out


def ran(failures: list = ()) -> api.RunResult:
    return api.RunResult(
        "playbooks/status.yml", "successful", 0, hosts={"gpu-1": api.HostOutcome(ok=1)}, failures=list(failures)
    )


def test_compare_refuses_a_planted_record_before_anything_is_deployed(monkeypatch, capsys):
    """The attack of R1: the host's record names a template as its last good profile; compare would deploy it back
    as the `profile` extra variable at the end. It is refused at the first read, naming the host."""
    hosts = results.parse_status(status_data({**GOOD, "last_good_profile": LOOKUP}))
    monkeypatch.setattr(api.operations, "status", lambda **kw: api.StatusResult(hosts=hosts, run=ran()))
    deploys = []
    monkeypatch.setattr(api.operations, "deploy", lambda *a, **kw: deploys.append(a))
    with pytest.raises(api.HostReportError, match="nothing was deployed: gpu-1: .*'last_good_profile'"):
        api.compare(["baseline", "nextn"], repeats=1)
    assert deploys == []
    assert cli.main(["compare", "baseline", "nextn", "--repeats", "1"]) == 1
    assert "nothing was deployed" in capsys.readouterr().err and deploys == []


def test_a_host_whose_status_failed_stops_compare_before_it_deploys(monkeypatch):
    failed = api.Failure(host="gpu-2", task="Read the state of the server unit", message="field 'service' is ...")
    monkeypatch.setattr(api.operations, "status", lambda **kw: api.StatusResult(hosts={}, run=ran([failed])))
    monkeypatch.setattr(api.operations, "deploy", lambda *a, **kw: pytest.fail("deployed"))
    with pytest.raises(api.HostReportError, match="gpu-2: field 'service'"):
        api.compare(["baseline", "nextn"], repeats=1)


@pytest.mark.parametrize("before", [{"gpu-1": LOOKUP}, {"gpu-1": ["baseline"]}, LOOKUP, ["baseline"]])
def test_a_restore_from_a_tampered_search_file_deploys_nothing(monkeypatch, before):
    """tune keeps what served before in search.json and restores it on resume: the restore checks it too."""
    monkeypatch.setattr(api.operations, "deploy", lambda *a, **kw: pytest.fail("deployed"))
    with pytest.raises(api.HostReportError, match="not a profile name|not a mapping"):
        rollout.Rollout().restore(before)


def test_a_unit_whose_main_pid_is_not_a_number_is_no_process():
    state = fleet.after_failure(GOOD, {"ActiveState": "active", "MainPID": "x"}, 12, None, False, False)
    assert state == {"serves": None, "restarted": True}


def test_tune_refuses_profiles_a_host_reports_with_a_template():
    """Red team: a host fact named sglang_profiles shadows the inventory's; tune promoted the host's profiles into
    group_vars/all, where the next run evaluated `{{ lookup('pipe', ...) }}` on the controller."""
    from sglang_deploy.api import search

    raw = {"profiles": {"baseline": {"description": LOOKUP, "args": {}, "env": {}}}, "settings": {}}
    with pytest.raises(api.HostReportError, match="gpu-1.*profiles.baseline.description.*Jinja template"):
        search.tune_host_facts({"sglang_tune_facts": {"gpu-1": raw}})
    raw = {"profiles": {"baseline": {"description": "x", "args": {"port-x": LOOKUP}, "env": {}}}, "settings": {}}
    with pytest.raises(api.HostReportError, match="profiles.baseline.args.port-x"):
        search.tune_host_facts({"sglang_tune_facts": {"gpu-1": raw}})


def test_a_host_fact_does_not_shadow_the_inventorys_variables(tmp_path):
    """Red team: with ansible-core's default a fact a host reports becomes a variable above group_vars, and some pick
    what the controller reads, writes or sends (a stack bundle folder, a model source, a Hub endpoint). The project's
    ansible.cfg keeps facts under ansible_facts (ansible_local is still promoted)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from sglang_deploy.paths import REPO

    library = tmp_path / "library"
    library.mkdir()
    (library / "hostile.py").write_text(
        "#!/usr/bin/python\nimport json\nprint(json.dumps({'ansible_facts': {'sglang_stack_bundles_dir': '/etc'}, 'changed': False}))\n"
    )
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n    - hostile:\n"
        '    - ansible.builtin.debug:\n        msg: "{{ sglang_stack_bundles_dir }}|{{ ansible_local is defined }}"\n'
    )
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {
                        "h": {
                            "ansible_connection": "local",
                            "ansible_python_interpreter": sys.executable,
                            "sglang_stack_bundles_dir": "/srv/stacks",
                        }
                    }
                }
            }
        )
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LIBRARY": str(library)}
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(play)],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert "/srv/stacks|True" in run.stdout and "/etc|" not in run.stdout
