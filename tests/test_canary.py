"""The stack canary (issue 49, item 3): api.canary and `sglang-deploy stack canary`. Unit parts always; the lab test
tries the lab's `nightly` (its emulated server answers wrong: group_vars/lab.yml) and `stable-0.5.23` on the lab
host (skipped, with the reason, where there is no lab)."""

from __future__ import annotations

import json

import pytest
from lab_host import LAB_HOST

from sglang_deploy import api, fingerprints
from sglang_deploy.api.rollout import Rollout
from sglang_deploy.cli import main
from ansible_collections.sglang.deploy.plugins.module_utils import host_record
from sglang_deploy.launch import group_vars

GROUP_VARS = "---\n# the fleet's stack\nsglang_stack_bundle: stable-0.5.23-2026-11-30  # pinned\nother: 1\n"


def test_the_record_keeps_the_stack_the_last_good_profile_ran_on():
    values = {"profile": "baseline", "service": "sglang", "url": "http://x", "sglang_version": "0.5.23", "argv": []}
    values.update(emulated=False, venv_link="", venv_target="", stack="stable-0.5.23-abc")
    record = host_record.update({}, "deployed", values)
    assert host_record.read({"sglang_server": record})["stack"] == "stable-0.5.23-abc"
    with pytest.raises(host_record.RecordError, match="'stack'"):
        host_record.check({**record, "stack": "x\x1b[2J"})


def test_a_pinned_reference_is_that_stacks_fingerprint_or_none(tmp_path):
    prints = [{"prompt": fingerprints.FINGERPRINT_PROMPTS[0], "ids": [1, 2], "logprobs": [-0.1, -0.2], "top": []}]
    old = fingerprints.save(str(tmp_path), "m", "h", "stack-a", "baseline", prints)
    fingerprints.save(str(tmp_path), "m", "h", "stack-b", "baseline", prints)  # newer: the unpinned choice
    assert fingerprints.reference(str(tmp_path), "m", "h", "baseline", "stack-a")["file"] == old
    assert fingerprints.reference(str(tmp_path), "m", "h", "baseline", "stack-c") is None
    assert fingerprints.reference(str(tmp_path), "m", "h", "nextn", "stack-a") is None


def test_promotion_sets_the_bundle_and_keeps_comments_and_other_variables(tmp_path):
    into = tmp_path / "stack.yml"
    into.write_text(GROUP_VARS + "db_password: hunter2\n")
    into.chmod(0o600)
    diff = group_vars.set_variable(into, "sglang_stack_bundle", "stable-0.5.23")
    text = into.read_text()
    assert "sglang_stack_bundle: stable-0.5.23" in text and "# the fleet's stack" in text and "other: 1" in text
    assert "+sglang_stack_bundle: stable-0.5.23" in diff and "hunter2" not in diff
    assert into.stat().st_mode & 0o777 == 0o600
    assert group_vars.set_variable(into, "sglang_stack_bundle", "stable-0.5.23") == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-bundle", "--host", "h"], "no bundle 'no-such-bundle'"),
        (["../x", "--host", "h"], "bundle name"),
        (["nightly", "--host", "a,b"], "one inventory host"),
    ],
)
def test_a_bad_bundle_or_host_is_refused_before_anything_runs(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(Rollout, "serving", lambda self: pytest.fail("a playbook ran"))
    assert main(["stack", "canary", *argv, "--no-promote"]) == 1
    assert message in capsys.readouterr().err


def test_a_promotion_file_that_is_not_a_mapping_is_refused_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(Rollout, "serving", lambda self: pytest.fail("a playbook ran"))
    into = tmp_path / "stack.yml"
    into.write_text("- a list\n")
    assert main(["stack", "canary", "nightly", "--host", "h", "--into", str(into)]) == 1
    assert "expected a mapping" in capsys.readouterr().err


lab = pytest.mark.lab


@lab
def test_the_canary_refuses_a_stack_that_answers_wrong_and_promotes_one_that_answers_right(tmp_path, capsys):
    into = tmp_path / "stack.yml"
    into.write_text(GROUP_VARS)
    assert api.deploy("baseline", extravars={"sglang_benchmark_enabled": False}).ok
    try:
        assert main(["stack", "canary", "nightly", "--host", LAB_HOST, "--into", str(into), "--json"]) == 1
        bad = json.loads(capsys.readouterr().out)
        assert (bad["passed"], bad["current"], bad["promoted"]) == (False, "emulated-default", None)
        assert bad["gate"]["passed"] is False and "answers: score" in bad["why"], bad
        assert into.read_text() == GROUP_VARS
        found = api.status().hosts[LAB_HOST]
        assert (found.profile, found.serving, found.last_good_stack) == ("baseline", True, "emulated-default")
        assert "does not answer right" in found.rolled_back["why"]

        good = api.canary("stable-0.5.23", LAB_HOST, into=into)
        assert good.passed and good.gate["passed"] and good.gate["agreement"] == 1.0, good
        assert good.gate["reference"].endswith("/emulated-default/baseline.json")
        assert "-sglang_stack_bundle: stable-0.5.23-2026-11-30" in good.promoted
        assert "+sglang_stack_bundle: stable-0.5.23" in good.promoted and "# the fleet's stack" in into.read_text()
        assert api.status().hosts[LAB_HOST].last_good_stack == "emulated-stable-0.5.23"
    finally:
        assert api.deploy("baseline", extravars={"sglang_benchmark_enabled": False}).ok
