"""`tune` against the lab container (skipped without it): a 6-candidate search (tests/fixtures/tune/small.yml) with
the lab's synthetic performance model finds the model's optimum, prunes the invalid ones before launch, survives
the crashing and the garbage candidate, resumes without measuring anything twice and promotes its winner."""

from __future__ import annotations

import shutil

import pytest

from sglang_deploy import api, cli
from sglang_deploy.launch import profiles
from sglang_deploy.paths import REPO
from test_api import LAB_HOST, lab

SEARCH = REPO / "tests" / "fixtures" / "tune" / "small.yml"
pytestmark = lab


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    # A noiseless lab: this checks the search's logic against the model's optimum, not the verdicts' noise handling.
    return out, api.tune(SEARCH, out_dir=out, extravars={"sglang_lab_noise": 0})


def test_search_prunes_survives_failures_and_finds_the_optimum(searched):
    _, res = searched
    assert res.ok, (res.error, [r.failures for r in res.restores])
    out = res.outcome
    assert out.emulated and out.counts() == {
        "expanded": 6,
        "excluded": 0,
        "pruned": 2,
        "run": 4,
        "failed": 2,
        "measured_ok": 2,
        "not_run_budget": 0,
        "not_run_wrong": 0,
        "not_planned_budget": 0,
        "new_runs": 4,
    }
    assert {p.candidate.choices["launch"] for p in out.pruned} == {"cutedsl", "nextn-topk4"}
    kinds = {p.candidate.choices["launch"]: r["kind"] for p, r in out.failed()}
    assert kinds == {"triton-pcie-ipc": "garbage", "mscclpp-nextn": "crash"}
    crash = next(r for p, r in out.failed() if r["kind"] == "crash")
    assert "synthetic crash" in "\n".join(crash["journal"]) and "Rolled back" in crash["error"]
    assert out.winner.candidate.choices["launch"] == "cutlass-pcie-ipc"
    assert out.decisions["output_tok_s @ c=8"]["winner"] == out.winner.key
    # What served before the search serves again.
    found = api.status()
    assert found.hosts[LAB_HOST].serving and not found.hosts[LAB_HOST].profile.startswith("tune-")
    md = (res.report_dir / "report.md").read_text()
    assert "synthetic" in md and "[arch-moe-backend]" in md and (res.report_dir / "pareto.png").exists()


def test_rerun_from_the_command_line_measures_nothing_and_promotes(searched, tmp_path, capsys):
    out, res = searched
    target = tmp_path / "profiles.yml"
    shutil.copy(profiles.PROFILES_FILE, target)
    args = ["tune", str(SEARCH), "--out", str(out), "--promote", "lab-fastest", "--into", str(target)]
    rc = cli.main([*args, "-e", "sglang_lab_noise=0"])  # the search's own settings: a resume measures nothing
    text = capsys.readouterr()
    assert rc == 0, text.err
    assert "4 run (0 runs new this time)" in text.out and "+  lab-fastest:" in text.out
    launch = profiles.render("lab-fastest", profiles.load_profiles(target), profiles.load_settings(), "0.5.23")
    assert launch.env == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}
    assert launch.argv == res.outcome.winner.launches[LAB_HOST]["argv"]
