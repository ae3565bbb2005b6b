"""Hostile and careless search files, results folders and promotions (issue 20): refused before anything runs,
with the reason; nothing written through a link; no secret or control character of a user value in a report."""

from __future__ import annotations

import pytest
import yaml

from sglang_deploy import api, cli, tune
from test_tune import SEARCH


def refused(needle: str, **change) -> str:
    with pytest.raises(tune.SearchError) as err:
        tune.parse_search({**SEARCH, **change})
    assert needle in str(err.value), str(err.value)
    return str(err.value)


PROXY = "-o ProxyCommand='sh -c \"id > /tmp/PWNED\"'"


@pytest.mark.parametrize(
    "variables, needle",
    [
        ({"ansible_ssh_common_args": PROXY}, "vars.ansible_ssh_common_args: an Ansible variable"),
        ({"ansible_connection": "local"}, "an Ansible variable"),
        ({"ansible_become_exe": "/tmp/evil"}, "an Ansible variable"),
        ({"sglang_server_python": "/tmp/evil"}, "vars.sglang_server_python: not a setting a search varies"),
        ({"sglang_api_key": "sk-0123456789abcdef"}, "not a setting a search varies"),
        ({"sglang_server_allow_open_bind": True}, "not a setting a search varies"),
        ({"sglang_router_extra_args": {"port": 1}}, "not a setting a search varies"),
        ({"sglang_server_env": {"X": "{{ lookup('pipe', 'id') }}"}}, "vars.sglang_server_env.X: holds a Jinja"),
        ({"sglang_server_env": {"HF_TOKEN": "hf_abc"}}, "HF_TOKEN name secrets"),
        ({"sglang_server_env": {"A": "1\nB=2"}}, "line break"),
        ({"sglang_server_env": {"A B": "1"}}, "vars.sglang_server_env"),
        ({"sglang_server_env": ["A=1"]}, "a mapping NAME -> value"),
        ({"sglang_tp": "8; id"}, "vars.sglang_tp: a positive integer"),
        ({"sglang_enable_metrics": "yes"}, "true or false"),
    ],
)
def test_search_vars_take_only_the_settings_a_search_varies(variables, needle):
    message = refused(needle, vars=variables)
    if "Ansible variable" in needle or "search varies" in needle:
        assert "may set only sglang_server_env" in message and "inventory or group_vars" in message


@pytest.mark.parametrize(
    "change, where",
    [
        ({"axes": {"served-model-name": ["{{ lookup('pipe', 'id') }}"]}}, "axes.served-model-name[0]"),
        ({"axes": {"x": {"{% for a in b %}": {}}}}, "axes.x"),
        ({"base": {"env": {"A": "{# c #}"}}}, "base.env.A"),
    ],
)
def test_a_template_anywhere_in_a_search_file_is_refused(change, where):
    """Axis values and labels reach the deploy's extra variables (sglang_profiles), which Ansible templates."""
    refused(f"{where}: holds a Jinja", **change)


def test_the_allowed_vars_parse():
    s = tune.parse_search(
        {
            **SEARCH,
            "vars": {
                "sglang_server_env": {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": 8},
                "sglang_server_ready_timeout": 600,
                "sglang_tp": 4,
                "sglang_enable_metrics": True,
            },
        }
    )
    assert s.vars["sglang_tp"] == 4


def test_the_command_line_refuses_a_hostile_search_before_any_playbook(tmp_path, monkeypatch, capsys):
    def no_playbook(*a, **kw):
        raise AssertionError("a playbook ran")

    monkeypatch.setattr(api, "run_playbook", no_playbook)
    path = tmp_path / "s.yml"
    path.write_text(yaml.safe_dump({**SEARCH, "vars": {"ansible_ssh_common_args": PROXY}}))
    assert cli.main(["tune", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ansible_ssh_common_args: an Ansible variable" in err and "PWNED" not in err
