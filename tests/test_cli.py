"""sglang-deploy deploy|compare|status|rollback|lab: help, usage errors (exit 2), the unknown-profile message,
the status table and the live progress."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from sglang_deploy import api, cli
from sglang_deploy.cli import runs
from sglang_deploy.cli.extravars import parse_extravars
from sglang_deploy.cli.progress import Progress

RUNNER_COMMANDS = ("deploy", "compare", "status", "rollback", "lab")


@pytest.mark.parametrize("command", RUNNER_COMMANDS)
def test_help_lists_the_common_flags(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--inventory", "--limit", "--extra-vars", "--json"):
        assert flag in out


@pytest.mark.parametrize(
    "argv",
    [
        ["deploy"],  # no profile
        ["lab", "sideways"],  # not up/down
        ["deploy", "baseline", "--nope"],  # unknown flag
        ["status", "-e"],  # -e without a value
        ["frobnicate"],  # unknown command
    ],
)
def test_argparse_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "usage: sglang-deploy" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "baseline"], "at least two profiles"),
        (["deploy", "baseline", "-e", "no_equals_sign"], "expected key=value"),
        (["status", "-e", "@/nonexistent/vars.yml"], "cannot read /nonexistent/vars.yml"),
        (["rollback", "-e", "[1, 2]"], "expected key=value"),
        (
            ["deploy", "baseline", "--inventory", "/nonexistent/hosts.yml"],
            "inventory /nonexistent/hosts.yml does not exist",
        ),
        (["status", "-i", "/dev/zero"], "/dev/zero is not a regular file or a folder: give an inventory file"),
    ],
)
def test_bad_input_is_a_usage_error_without_running_anything(argv, message, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a playbook ran despite bad input")

    monkeypatch.setattr(api.runner, "run_playbook", refuse)
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_compare_refuses_a_linked_report_file_before_running_anything(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a playbook ran despite an unusable --out")

    monkeypatch.setattr(api.runner, "run_playbook", refuse)
    (tmp_path / "victim").write_text("kept\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "comparison.json").symlink_to(tmp_path / "victim")
    assert cli.main(["compare", "a", "b", "--out", str(tmp_path / "out")]) == 2
    assert "comparison.json exists and is not a regular file" in capsys.readouterr().err
    assert (tmp_path / "victim").read_text() == "kept\n"


def test_unknown_profile_exits_2_with_the_available_profiles(capsys, monkeypatch):
    failed = api.RunResult(
        playbook="site.yml",
        status="failed",
        rc=2,
        hosts={"h": api.HostOutcome(ok=3, failed=1)},
        failures=[
            api.Failure(
                "h",
                "Validate the profile and render its launch for this host",
                "sglang_profile: unknown profile 'nope'; available: baseline, nextn",
                "sglang_profile",
                unknown_profile="nope",
                available_profiles=["baseline", "nextn"],
            )
        ],
    )
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: failed)
    assert cli.main(["deploy", "nope"]) == 2
    err = capsys.readouterr().err
    assert "sglang-deploy deploy: unknown profile 'nope'. Available profiles: baseline, nextn" in err


def test_deploy_prints_tables_synthetic_line_and_exit_0(capsys, monkeypatch):
    from sglang_deploy.compare import compare_report

    from test_report import level, result

    res = {**result([level(1, 100.0, 0.1), level(4, 80.0, 0.1)], emulated=True), "model": "m", "url": "http://x"}
    ok = api.RunResult(
        playbook="site.yml",
        status="successful",
        rc=0,
        hosts={"h": api.HostOutcome(ok=20)},
        data={"sglang_benchmark": {"h": res}},
        profile="baseline",
    )
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: ok)
    assert cli.main(["deploy", "baseline"]) == 0
    out = capsys.readouterr().out
    assert "h: profile baseline" in out and "EMULATED server: figures are synthetic" in out
    assert out.rstrip().endswith(compare_report.SYNTHETIC_NOTE)
    assert cli.main(["deploy", "baseline", "--json"]) == 0
    assert '"ok": true' in capsys.readouterr().out


def test_unknown_profile_is_read_from_the_failure_fields_not_its_message():
    fields = api.Failure(
        "h", "Validate the profile", "any wording", unknown_profile="nope", available_profiles=["baseline", "nextn"]
    )
    worded = api.Failure("h", "t", "sglang_profile: unknown profile 'nope'; available: baseline, nextn")
    r = api.RunResult(playbook="site.yml", status="failed", rc=2, failures=[worded, fields])
    assert runs._unknown_profile([r]) == (
        "unknown profile 'nope'. Available profiles: baseline, nextn"
        " (sglang_profiles: the sglang role's defaults, or your group_vars/all)"
    )
    assert runs._unknown_profile([api.RunResult(playbook="site.yml", status="failed", rc=2, failures=[worded])]) is None


def test_status_table():
    unit = "Description=SGLang server, profile other\nLoadState=loaded\nActiveState=active\nSubState=running\n"
    got = api.parse_status(
        {
            "sglang_status": {
                "a": {
                    "unit": unit,
                    "local": {
                        "sglang_server": {"profile": "nextn", "last_good_profile": "baseline"},
                        "sglang_host": {"emulated": True},
                    },
                    "manifest": {"bundle": "b", "bundle_id": "1"},
                }
            }
        }
    )
    assert "a (lab)  nextn    -           active/running  baseline   b-1" in runs.format_status(got)


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_without_a_terminal_prints_tasks_and_a_heartbeat():
    out, clock = io.StringIO(), FakeClock()
    p = Progress(out, tty=False, heartbeat_s=15, clock=clock)
    p({"event": api.PHASE_EVENT, "event_data": {"phase": "profile 1/2: baseline"}})
    p({"event": "playbook_on_task_start", "event_data": {"task": "Wait for the server"}})
    p({"event": "runner_on_start", "event_data": {"host": "h1", "task": "Wait for the server"}})
    for _ in range(31):
        clock.t += 1
        p.tick()
    p(
        {
            "event": "runner_on_failed",
            "event_data": {"host": "h1", "task": "Wait for the server", "res": {"msg": "not ready\nmore"}},
        }
    )
    assert out.getvalue().splitlines() == [
        "[0:00] == profile 1/2: baseline",
        "[0:15] ... h1: still running 'Wait for the server' (0:15)",
        "[0:30] ... h1: still running 'Wait for the server' (0:30)",
        "[0:31] FAILED h1: Wait for the server: not ready",
    ]


def test_progress_lists_a_task_once_it_ran_and_never_one_skipped_on_every_host():
    """A deploy that passed skips "Roll back to the last good profile": it is not listed as if it ran."""
    out, clock = io.StringIO(), FakeClock()
    p = Progress(out, tty=False, clock=clock)
    for task, results in (
        ("Write the unit", ["runner_on_ok", "runner_on_ok"]),
        ("Roll back to the last good profile", ["runner_on_skipped", "runner_on_skipped"]),
        ("Report a failed host", ["runner_on_skipped"]),
        ("Take the servers that restart out of the router", ["playbook_on_include"]),
    ):
        p({"event": "playbook_on_task_start", "event_data": {"task": task}})
        for i, kind in enumerate(results):
            p({"event": "runner_on_start", "event_data": {"host": f"h{i}"}})
            clock.t += 1
            p({"event": kind, "event_data": {"host": f"h{i}", "task": task}})
    assert out.getvalue().splitlines() == [
        "[0:01] TASK Write the unit",
        "[0:06] TASK Take the servers that restart out of the router",
    ]


def test_deploy_says_at_the_end_what_it_did_on_each_host(capsys, monkeypatch):
    rows = [
        {"host": "r1", "serves": "nextn", "outcome": "deployed", "state": "deployed"},
        {"host": "r2", "serves": "nextn", "outcome": "unchanged", "state": "unchanged, not drained"},
    ]
    ok = api.RunResult(
        playbook="site.yml", status="successful", rc=0, hosts={"r1": api.HostOutcome(ok=9)}, data={"sglang_fleet": rows}
    )
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: ok)
    assert cli.main(["deploy", "nextn"]) == 0
    out = capsys.readouterr().out
    assert "r1: deployed (serves nextn)\nr2: unchanged, not drained (serves nextn)" in out


def test_progress_on_a_terminal_redraws_one_line():
    out, clock = io.StringIO(), FakeClock()
    p = Progress(out, tty=True, clock=clock)
    p({"event": "playbook_on_task_start", "event_data": {"task": "Load"}})
    p({"event": "runner_on_start", "event_data": {"host": "h1"}})
    clock.t = 3
    p.tick()
    p.__exit__(None, None, None)
    assert out.getvalue().count("\r\x1b[K") >= 3
    assert "[0:03] h1 | Load (0:03)" in out.getvalue() and "\n" not in out.getvalue()


def test_deploy_tags_select_phases(monkeypatch, capsys):
    seen = {}

    def run_playbook(playbook, **kwargs):
        seen.update(kwargs)
        return api.RunResult(playbook=playbook, status="successful", rc=0, hosts={"h": api.HostOutcome(ok=1)})

    monkeypatch.setattr(api.runner, "run_playbook", run_playbook)
    assert cli.main(["deploy", "baseline", "--tags", "configure,restart"]) == 0
    assert seen["tags"] == "configure,restart"
    with pytest.raises(SystemExit):
        cli.main(["deploy", "baseline", "--tags", "reboot"])
    assert "unknown phase reboot" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    # A listing long enough to outlive a reader that takes one line: `sglang-deploy profiles | head -n 1`.
    many = tmp_path / "profiles.yml"
    many.write_text("sglang_profiles:\n" + "".join(f"  p{i}: {{description: {'x' * 200}}}\n" for i in range(3000)))
    run = subprocess.run(
        f"{sys.executable} -m sglang_deploy.cli profiles --profiles-file {many} | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout.count("\n") == 1 and "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr


EVIL = "\x1b]0;owned\x07\x1b[2J\r\u202eevil\x9b"


def test_control_characters_in_what_the_command_prints_are_shown_not_obeyed(tmp_path, capsys, monkeypatch):
    """A profile description or a host name with an escape sequence could retitle, clear or rewrite the
    terminal: every line the command prints shows control characters as escapes; the data keeps them."""
    f = tmp_path / "p.yml"
    f.write_text(json.dumps({"sglang_profiles": {"a": {"description": f"fine\t{EVIL}"}}}))
    assert cli.main(["profiles", "--profiles-file", str(f)]) == 0
    out = capsys.readouterr().out
    # the listing puts a description on one line: white space (the tab, the carriage return) runs become one space
    assert out == "a\n    fine \\x1b]0;owned\\x07\\x1b[2J \\u202eevil\\x9b\n"
    failed = api.RunResult(
        playbook="playbooks/status.yml",
        status="failed",
        rc=2,
        hosts={f"h{EVIL}": api.HostOutcome(failed=1)},
        failures=[api.Failure(f"h{EVIL}", f"task{EVIL}", f"message{EVIL}")],
    )
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: failed)
    assert cli.main(["status"]) == 1
    cap = capsys.readouterr()
    assert "FAILED h\\x1b]0;owned\\x07" in cap.err and "message\\x1b]0;owned" in cap.err
    assert not [c for c in cap.out + cap.err if c in "\x1b\x07\r\u202e\x9b"]
    assert failed.failures[0].host == f"h{EVIL}"
    line = io.StringIO()
    Progress(line, tty=True)({"event": "playbook_on_task_start", "event_data": {"task": f"Load{EVIL}"}})
    assert line.getvalue().startswith("\r\x1b[K[0:00] ... | Load\\x1b]0;owned") and line.getvalue().count("\x1b") == 1


def test_parse_extravars(tmp_path):
    f = tmp_path / "vars.yml"
    f.write_text("sglang_benchmark_requests: 8\nsglang_api_key: '007'\n")
    got = parse_extravars(
        [
            "sglang_benchmark_concurrency=[1, 4]",
            "sglang_benchmark_enabled=false",
            f"@{f}",
            "sglang_benchmark_requests=4",
            "sglang_api_key=0123",
            "name=x=y",
            '{"a": {"b": 1}}',
        ]
    )
    assert got == {
        "sglang_benchmark_concurrency": [1, 4],
        "sglang_benchmark_enabled": False,
        "sglang_benchmark_requests": 4,
        "sglang_api_key": "0123",
        "name": "x=y",
        "a": {"b": 1},
    }
    for bad in ("novalue", "=1", "@/nonexistent.yml", "[1, 2]"):
        with pytest.raises(ValueError):
            parse_extravars([bad])
    vault = tmp_path / "vault.yml"
    vault.write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    with pytest.raises(ValueError, match="vault"):
        parse_extravars([f"@{vault}"])


def _deploy_vars(monkeypatch, argv: list) -> dict:
    """The extra variables that `sglang-deploy <argv>` hands to its first deploy (site.yml)."""
    seen = []

    def run_playbook(playbook, **kwargs):
        if "site" in str(playbook):
            seen.append(kwargs.get("extravars") or {})
        return api.RunResult(playbook=playbook, status="successful", rc=0, hosts={"h": api.HostOutcome(ok=1)})

    monkeypatch.setattr(api.runner, "run_playbook", run_playbook)
    cli.main(argv)
    return seen[0]


def test_deploy_takes_benchs_workload_flags_as_the_roles_variables(monkeypatch, tmp_path, capsys):
    """One definition of the workload flags: deploy and compare take bench's, and each sets the sglang_benchmark
    variable the -e path sets; a flag left out sets nothing (the role's defaults and -e stay)."""
    data = tmp_path / "traffic.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 8}) + "\n")
    monkeypatch.chdir(tmp_path)
    flags = [
        "--dataset-name", "custom", "--dataset-path", "traffic.jsonl", "--num-prompts", "12", "--seed", "7",
        "--request-rate", "2,inf", "--max-concurrency", "4", "--slo", "ttft_p99_ms=2000,tpot_p99_ms=50",
        "--random-range-ratio", "0.5", "--min-tokens", "--warmup", "1", "--gsp-num-groups", "3",
    ]  # fmt: skip
    got = _deploy_vars(monkeypatch, ["deploy", "baseline", *flags, "-e", "sglang_benchmark_gsp={question_len: 9}"])
    bench_vars = {k: v for k, v in got.items() if k.startswith("sglang_benchmark_")}
    assert bench_vars == {
        "sglang_benchmark_dataset_name": "custom",
        "sglang_benchmark_dataset_path": str(data),
        "sglang_benchmark_requests": 12,
        "sglang_benchmark_seed": 7,
        "sglang_benchmark_request_rate": [2.0, "inf"],
        "sglang_benchmark_max_concurrency": 4,
        "sglang_benchmark_slo": {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0},
        "sglang_benchmark_random_range_ratio": 0.5,
        "sglang_benchmark_min_tokens": True,
        "sglang_benchmark_warmup": 1,
        "sglang_benchmark_gsp": {"question_len": 9, "num_groups": 3},
    }
    got = _deploy_vars(monkeypatch, ["deploy", "baseline", "-e", "sglang_benchmark_requests=4"])
    assert {k: v for k, v in got.items() if k.startswith("sglang_benchmark_")} == {"sglang_benchmark_requests": 4}
    got = _deploy_vars(
        monkeypatch, ["compare", "a", "b", "--concurrency", "1,4", "--slo", "e2e_p99_ms=900", "--sla-search", "1,8"]
    )
    assert (got["sglang_benchmark_concurrency"], got["sglang_benchmark_sla_search"]) == ([1, 4], [1.0, 8.0])
    assert got["sglang_benchmark_slo"] == {"e2e_p99_ms": 900.0}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["deploy", "baseline", "--request-rate", "0"], "above 0"),
        (["compare", "a", "b", "--request-rate=-1,2"], "above 0"),
        (["deploy", "baseline", "--max-concurrency", "0"], "max_concurrency must be at least 1"),
        (["deploy", "baseline", "--slo", "ttft_p98_ms=10"], "unknown SLO metric"),
        (["compare", "a", "b", "--dataset-name", "custom", "--dataset-path", "/nonexistent/x.jsonl"], "cannot read"),
        (["deploy", "baseline", "--dataset-name", "sharegpt"], "needs --dataset-path"),
        (["deploy", "baseline", "--sla-search", "1,8"], "an SLA search needs SLOs"),
        (
            ["deploy", "baseline", "--slo", "ttft_p99_ms=9", "-e", "sglang_benchmark_sla_search=[8, 1]"],
            "0 < LOW < HIGH",
        ),
        (["deploy", "baseline", "--request-rate", "2", "-e", "sglang_benchmark_sla_search=[1, 8]"], "not both"),
        (["deploy", "baseline", "-e", "sglang_benchmark_max_concurrency=-3"], "max_concurrency must be at least 1"),
    ],
)
def test_an_unusable_workload_is_refused_before_any_deploy(argv, message, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a playbook ran despite bad input")

    monkeypatch.setattr(api.runner, "run_playbook", refuse)
    try:
        rc = cli.main(argv)
    except SystemExit as exc:  # argparse refused the flag's value
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err


def test_bench_deploy_and_compare_take_the_same_workload_flags():
    def flags(argv: list) -> set:
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0])))
        command = sub.choices[argv[0]]
        group = next(g for g in command._action_groups if g.title.startswith("workload"))
        return {s for a in group._group_actions for s in a.option_strings}

    workload_flags = flags(["bench"])
    assert {"--dataset-name", "--num-prompts", "--request-rate", "--max-concurrency", "--slo", "--sla-search"} <= (
        workload_flags
    )
    assert flags(["deploy"]) == flags(["compare"]) == workload_flags


def test_compare_ranks_by_the_objectives_and_limits_it_is_given(monkeypatch, capsys):
    seen = {}

    def compare(profiles, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt  # stop before the report: the arguments are what this test reads

    monkeypatch.setattr(api, "compare", compare)
    argv = ["compare", "a", "b", "--slo", "ttft_p99_ms=900", "--sla-search", "1,16", "--objective", "sla_rate_req_s"]
    assert cli.main([*argv, "--require", "sla_rate_req_s>=2"]) == 130
    assert [o.name for o in seen["objectives"]] == ["sla_rate_req_s (SLA search)"]
    assert [lim.text for lim in seen["limits"]] == ["sla_rate_req_s (SLA search) >= 2"]
    argv = ["compare", "a", "b", "--request-rate", "2,8", "--slo", "e2e_p99_ms=900"]
    assert cli.main([*argv, "--objective", "goodput_req_s@rate=8", "--require", "ttft_p99_ms@rate=2<=500"]) == 130
    assert seen["objectives"][0].level == "rate=8" and seen["limits"][0].max == 500.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--objective", "sla_rate_req_s"], "give --slo"),
        (["--slo", "ttft_p99_ms=9", "--objective", "sla_rate_req_s"], "give --sla-search"),
        (["--objective", "goodput_req_s@c=8"], "give --slo"),
        (["--objective", "output_tok_s@c=4"], "not a level of the workload [1, 8, 32]"),
        (["--request-rate", "2", "--objective", "output_tok_s@rate=3"], "not a request rate of the workload [2.0]"),
        (["--objective", "speed"], "use one of output_tok_s"),
        (["--objective", "output_tok_s@x=1"], "is c=N or rate=R"),
        (["--require", "ttft_p99_ms@c=8"], "<=X or >=X"),
    ],
)
def test_compare_refuses_objectives_its_workload_cannot_measure(argv, message, monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise AssertionError("a playbook ran despite bad input")

    monkeypatch.setattr(api.runner, "run_playbook", refuse)
    assert cli.main(["compare", "a", "b", *argv]) == 2
    assert message in capsys.readouterr().err


# An inventory outside the project: the project's group_vars reach it through playbooks/group_vars, as they reach a
# playbook's hosts (group_vars/sglang_replicas.yml: sglang_benchmark_concurrency [4] on a fleet's replicas).
BENCH_INVENTORY = """
all:
  children:
    gpus:
      hosts:
        g1: {sglang_benchmark_concurrency: [1, 8], sglang_benchmark_slo: {ttft_p99_ms: 2000}}
        g2: {sglang_benchmark_concurrency: [4]}
        g3: {sglang_benchmark_concurrency: "{{ levels }}"}
        g4: {sglang_benchmark_max_concurrency: -3}
    sglang_replicas:
      hosts: {r1: {}, r2: {}}
    sglang_router:
      hosts: {rt: {}}
"""


def _compare_measures(monkeypatch, tmp_path, argv: list):
    """(rc, the objectives api.compare was given or None) of `sglang-deploy compare a b -i BENCH_INVENTORY <argv>`."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(BENCH_INVENTORY)
    seen = {}

    def compare(profiles, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt  # stop before any deploy: the checks ran

    monkeypatch.setattr(api, "compare", compare)
    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: pytest.fail("a playbook ran"))
    return cli.main(["compare", "a", "b", "-i", str(inventory), *argv]), seen.get("objectives")


@pytest.mark.parametrize(
    "argv, refused",
    [
        (["--limit", "g1", "--objective", "output_tok_s@c=32"], "not a level of the workload [1, 8]"),
        (["--limit", "g1", "--objective", "output_tok_s@c=8"], None),
        (["--limit", "g1", "-e", "sglang_benchmark_concurrency=[32]", "--objective", "output_tok_s@c=32"], None),
        (["--limit", "g1", "--concurrency", "32", "--objective", "output_tok_s@c=32"], None),
        # the fleet's replicas run group_vars' [4] (and the router's workload is checked too)
        (["--limit", "sglang_replicas:sglang_router", "--objective", "output_tok_s@c=4"], None),
        (["--limit", "sglang_replicas", "--objective", "output_tok_s@c=8"], "not a level of the workload [4]"),
        # SLOs from the inventory: an SLA search and goodput are measurable
        (["--limit", "g1", "--sla-search", "1,8", "--objective", "sla_rate_req_s"], None),
        (["--limit", "g1", "--objective", "goodput_req_s@c=8"], None),
        (["--limit", "g2", "--objective", "goodput_req_s@c=4"], "counts against the SLOs"),
        # levels that are a template are known on the run only: not refused
        (["--limit", "g3", "--objective", "output_tok_s@c=5"], None),
        (["--limit", "g1:g2", "--objective", "output_tok_s@c=4"], "the hosts run different workloads (g1: concurrency"),
        (["--limit", "g4"], "benchmark workload of g4: max_concurrency must be at least 1"),
    ],
)
def test_compare_checks_the_workload_and_objectives_each_host_runs(argv, refused, monkeypatch, tmp_path, capsys):
    """The workload and the objectives are checked with each host's settings as Ansible resolves them (the role's
    defaults < the inventory and group_vars < -e < the flags), before any deploy."""
    rc, objectives = _compare_measures(monkeypatch, tmp_path, argv)
    err = capsys.readouterr().err
    if refused:
        assert rc == 2 and refused in err, err
    else:
        assert rc == 130, err
        assert [o.metric for o in objectives] == [argv[-1].partition("@")[0]]


def test_deploy_takes_the_slos_of_the_inventory_for_an_sla_search(monkeypatch, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(BENCH_INVENTORY)
    got = _deploy_vars(monkeypatch, ["deploy", "baseline", "-i", str(inventory), "-l", "g1", "--sla-search", "1,8"])
    assert got["sglang_benchmark_sla_search"] == [1.0, 8.0]


def test_deploy_no_benchmark_turns_the_benchmark_off_and_excludes_bench_again(monkeypatch, capsys):
    """Issue 52, item 8: skipping the benchmark was a role variable only (-e sglang_benchmark_enabled=false)."""
    assert _deploy_vars(monkeypatch, ["deploy", "baseline", "--no-benchmark"])["sglang_benchmark_enabled"] is False
    assert "sglang_benchmark_enabled" not in _deploy_vars(monkeypatch, ["deploy", "baseline"])
    with pytest.raises(SystemExit) as e:
        cli.main(["deploy", "baseline", "--no-benchmark", "--bench-again"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
