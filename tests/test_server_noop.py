"""What a re-run that changes nothing skips in the server role (issue 52, item 6), as the tasks' own conditions
decide it: SGLang's argument parser (check_argv, 10-20 s of imports on a GPU host) runs wherever anything is due."""

from __future__ import annotations

import jinja2
import pytest
import yaml

from sglang_deploy.paths import REPO

TASKS = yaml.safe_load((REPO / "roles/sglang_server/tasks/main.yml").read_text())
CHECK = next(t for t in TASKS if t["name"] == "Check the flags with the installed SGLang's own argument parser")
REAL = {"__sglang_server_emulated": False, "__sglang_server_python_stat": {"stat": {"exists": True}}}
NOTHING_DUE = {"__sglang_server_files_due": {"config": False, "files": False}, "sglang_server_restarts": False}


def runs(variables: dict) -> bool:
    env = jinja2.Environment()
    return all(env.compile_expression(w)(**REAL, **variables) for w in CHECK["when"])


def test_the_parser_is_skipped_only_where_this_runs_comparison_found_nothing_due():
    assert not runs(NOTHING_DUE)


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


APPLY = yaml.safe_load((REPO / "roles/sglang_server/tasks/apply.yml").read_text())
KEEP = next(t for t in APPLY if t["name"] == "Keep the unit and environment as the last good ones")


@pytest.mark.parametrize(
    ("config_due", "restarted", "copies"),
    ((False, False, False), (True, False, True), (False, True, True), (True, True, True)),
)
def test_the_last_good_copy_is_made_only_where_something_was_written_or_restarted(config_due, restarted, copies):
    # unchanged and not restarted: the files are the ones an earlier deploy kept after its wait (or a rollback put back)
    variables = {
        "__sglang_server_files_due": {"config": config_due, "files": False},
        "sglang_server_restarted": restarted,
    }
    assert bool(jinja2.Environment().compile_expression(KEEP["when"])(**variables)) is copies
