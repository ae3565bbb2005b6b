"""sglang-deploy deploy|compare|status|rollback|lab: help, usage errors (exit 2), the unknown-profile message."""

from __future__ import annotations

import pytest

from sglang_deploy import cli

RUNNER_COMMANDS = ("deploy", "compare", "status", "rollback", "lab")


@pytest.mark.parametrize("command", RUNNER_COMMANDS)
def test_help_lists_the_common_flags(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--inventory", "--limit", "--extra-vars", "--json"):
        assert flag in out


@pytest.mark.parametrize("argv", [
    ["deploy"],                           # no profile
    ["lab", "sideways"],                  # not up/down
    ["deploy", "baseline", "--nope"],     # unknown flag
    ["status", "-e"],                     # -e without a value
    ["frobnicate"],                       # unknown command
])
def test_argparse_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "usage: sglang-deploy" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["compare", "baseline"], "at least two profiles"),
    (["deploy", "baseline", "-e", "no_equals_sign"], "expected key=value"),
    (["status", "-e", "@/nonexistent/vars.yml"], "cannot read /nonexistent/vars.yml"),
    (["rollback", "-e", "[1, 2]"], "expected key=value"),
    (["deploy", "baseline", "--inventory", "/nonexistent/hosts.yml"], "inventory /nonexistent/hosts.yml does not exist"),
])
def test_bad_input_is_a_usage_error_without_running_anything(argv, message, capsys, monkeypatch):
    from sglang_deploy import runner

    def refuse(*args, **kwargs):
        raise AssertionError("a playbook ran despite bad input")
    monkeypatch.setattr(runner, "run_playbook", refuse)
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_profile_exits_2_with_the_available_profiles(capsys, monkeypatch):
    from sglang_deploy import runner

    failed = runner.RunResult(
        playbook="site.yml", status="failed", rc=2, hosts={"h": runner.HostOutcome(ok=3, failed=1)},
        failures=[runner.Failure("h", "Validate the profile and render its launch for this host",
                                 "sglang_profile: unknown profile 'nope'; available: baseline, nextn",
                                 "sglang_profile")])
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **k: failed)
    assert cli.main(["deploy", "nope"]) == 2
    err = capsys.readouterr().err
    assert "sglang-deploy deploy: unknown profile 'nope'. Available profiles: baseline, nextn" in err


def test_deploy_prints_tables_synthetic_line_and_exit_0(capsys, monkeypatch):
    from sglang_deploy import report, runner

    from test_report import level, result
    res = {**result([level(1, 100.0, 0.1), level(4, 80.0, 0.1)], emulated=True), "model": "m", "url": "http://x"}
    ok = runner.RunResult(playbook="site.yml", status="successful", rc=0, hosts={"h": runner.HostOutcome(ok=20)},
                          data={"sglang_benchmark": {"h": res}}, profile="baseline")
    monkeypatch.setattr(runner, "run_playbook", lambda *a, **k: ok)
    assert cli.main(["deploy", "baseline"]) == 0
    out = capsys.readouterr().out
    assert "h: profile baseline" in out and "EMULATED server: figures are synthetic" in out
    assert out.rstrip().endswith(report.SYNTHETIC_NOTE)
    assert cli.main(["deploy", "baseline", "--json"]) == 0
    assert '"ok": true' in capsys.readouterr().out
