"""What a re-run that changes nothing skips in the server role (issue 52, item 6), as the tasks' own conditions
decide it: SGLang's argument parser (check_argv, 10-20 s of imports on a GPU host) runs wherever anything is due, and
on every run of a host whose venv the stack role does not keep."""

from __future__ import annotations

import jinja2
import pytest
import yaml
from ansible.plugins.test.core import TestModule as CoreTests

from sglang_deploy.paths import REPO

TASKS = yaml.safe_load((REPO / "roles/sglang_server/tasks/main.yml").read_text())
CHECK = next(t for t in TASKS if t["name"] == "Check the flags with the installed SGLang's own argument parser")
REAL = {"__sglang_server_emulated": False, "__sglang_server_python_stat": {"stat": {"exists": True}}}
NOTHING_DUE = {
    "__sglang_server_files_due": {"config": False, "files": False},
    "sglang_server_restarts": False,
    "ansible_facts": {"ansible_local": {"sglang_stack": {"bundle": "b", "bundle_id": "1"}}},
}


def runs(variables: dict) -> bool:
    env = jinja2.Environment()
    return all(env.compile_expression(w)(**REAL, **variables) for w in CHECK["when"])


def test_the_parser_is_skipped_only_where_this_runs_comparison_found_nothing_due():
    assert not runs(NOTHING_DUE)


def test_the_parser_runs_on_a_host_whose_venv_the_stack_role_does_not_keep():
    # no stack line in the unit tracks that venv: an SGLang upgraded in place would go unseen until the next start
    assert runs(NOTHING_DUE | {"ansible_facts": {"ansible_local": {}}})


@pytest.mark.parametrize(
    "due",
    (
        {
            "__sglang_server_files_due": {"config": True, "files": False}
        },  # unit or environment (a stack switch: its line)
        {"__sglang_server_files_due": {"config": False, "files": True}},  # the launcher
        {"sglang_server_restarts": True},  # the server predates its files, none runs, or a forced restart
    ),
)
def test_the_parser_runs_wherever_something_is_due(due):
    assert runs(NOTHING_DUE | due)


def test_the_parser_runs_where_no_comparison_ran_this_run():
    # rollback.yml and a role run outside deploy.yml's due play: main.yml renders anew, so config is due
    assert runs({"__sglang_server_files_due": {"config": True, "files": True}})
    variables = dict(NOTHING_DUE)
    del variables["sglang_server_restarts"]
    assert runs(variables)


def ansible_env() -> jinja2.Environment:
    env = jinja2.Environment()
    env.tests.update(CoreTests().tests())  # changed, skipped
    env.filters["bool"] = bool
    return env


def test_the_account_and_folders_are_made_only_where_one_differs_or_when_forced():
    install = yaml.safe_load((REPO / "roles/sglang_server/tasks/install.yml").read_text())
    when = next(t for t in install if t["name"] == "Create the service account and the server's folders")["when"]
    made = ansible_env().compile_expression(when)
    assert not made(__sglang_server_install_due={"differs": []}, sglang_server_force_converge=False)
    assert made(__sglang_server_install_due={"differs": ["/etc/sglang: mode"]}, sglang_server_force_converge=False)
    assert made(__sglang_server_install_due={"differs": []}, sglang_server_force_converge=True)
