"""Hostile and careless search files, results folders and promotions (issue 20): refused before anything runs,
with the reason; nothing written through a link; no secret or control character of a user value in a report."""

from __future__ import annotations

import json

import pytest
import yaml

from sglang_deploy import api, cli, tune
from sglang_deploy.compare import compare_report
from sglang_deploy.tune import report as tune_report
from test_report import level, result, run
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

    monkeypatch.setattr(api.runner, "run_playbook", no_playbook)
    path = tmp_path / "s.yml"
    path.write_text(yaml.safe_dump({**SEARCH, "vars": {"ansible_ssh_common_args": PROXY}}))
    assert cli.main(["tune", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ansible_ssh_common_args: an Ansible variable" in err and "PWNED" not in err


# --------------------------------------------------------------------------------------------------
# Artifacts: written as `bench --json` writes them; user values escaped in every report


def outcome_with(tmp_path, **axes):
    from test_tune import ModelDeploy, planned_lab, search

    s, planned, excluded = planned_lab(search(axes={**SEARCH["axes"], **axes}))
    return tune.run_search(s, planned, excluded, ModelDeploy(), tune.Store(tmp_path / "store"))


def _write(writer: str, tmp_path, folder):
    """tune's report or compare's (a comparison of two profiles, with figures) written into folder."""
    if writer == "tune":
        return tune_report.write(outcome_with(tmp_path), folder)
    runs = {p: run(p, result([level(1, s, 0.1), level(4, s * 0.8, 0.1)])) for p, s in (("a", 100.0), ("b", 120.0))}
    return compare_report.write_report(compare_report.build_comparison(["a", "b"], runs), folder)


@pytest.mark.parametrize(
    "writer, name", [("tune", n) for n in tune_report.ARTIFACTS] + [("compare", n) for n in compare_report.ARTIFACTS]
)
def test_the_report_is_not_written_through_a_planted_link(tmp_path, writer, name):
    """tune's and compare's --out files go through one writer (host/files.write_files), which refuses a link."""
    folder = tmp_path / "report"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    (folder / name).symlink_to(victim)
    with pytest.raises(ValueError, match=f"{name} exists and is not a regular file"):
        _write(writer, tmp_path, folder)
    assert victim.read_text() == "someone else's file\n" and [p.name for p in folder.iterdir()] == [name]
    (folder / name).unlink()
    assert sorted(p.name for p in _write(writer, tmp_path, folder).iterdir()) == sorted(
        {"tune": tune_report.ARTIFACTS, "compare": compare_report.ARTIFACTS}[writer]
    )


@pytest.mark.parametrize("times", [51, 1_000_000, 0, True, 2.0])
def test_repeats_over_the_cap_are_refused_in_a_search_file_and_a_tampered_search_json(tmp_path, times):
    """One bound (noise.MAX_REPEATS, --repeats' too) on the search file's repeat.times and on search.json's repeats,
    which a resumed search reads."""
    refused("M at most 50", repeat={"top": 1, "times": times})
    assert tune.parse_search({**SEARCH, "repeat": {"top": 1, "times": 50}}).repeat_times == 50
    store = tune.Store(tmp_path / "store")
    store.update_meta(repeats=times)
    with pytest.raises(tune.SearchError, match="search.json: repeats is .*, not a whole number from 1 to 50: give"):
        api.search.with_repeats(tune.parse_search(SEARCH), store, None)
    store.update_meta(repeats=50)
    assert api.search.with_repeats(tune.parse_search(SEARCH), store, None).repeat_times == 50


def test_a_dangling_link_or_a_linked_folder_is_a_clear_error(tmp_path):
    out = outcome_with(tmp_path)
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "outcome.json").symlink_to(tmp_path / "missing" / "outcome.json")
    with pytest.raises(ValueError, match="outcome.json exists and is not a regular file"):
        tune_report.write(out, folder)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="linked is a link or not a folder"):
        tune_report.write(out, tmp_path / "linked")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_artifacts_are_written_privately_and_replaced_whole(tmp_path):
    out = outcome_with(tmp_path)
    folder = tune_report.write(out, tmp_path / "report")
    assert sorted(p.name for p in folder.iterdir()) == sorted(tune_report.ARTIFACTS)  # no temporary file left
    store = tune.Store(tmp_path / "s")
    store.put("k", {"a": 1})
    assert (tmp_path / "s" / "runs" / "k.json").stat().st_mode & 0o777 == 0o600


def test_the_store_refuses_a_linked_runs_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "runs").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(tune.SearchError, match="runs is a link or not a folder"):
        tune.Store(tmp_path / "s").put("k", {"a": 1})
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_tune_refuses_a_linked_results_folder_before_any_playbook(tmp_path, monkeypatch):
    def no_playbook(*a, **kw):
        raise AssertionError("a playbook ran")

    monkeypatch.setattr(api.runner, "run_playbook", no_playbook)
    (tmp_path / "out" / "report").mkdir(parents=True)
    (tmp_path / "out" / "report" / "report.md").symlink_to(tmp_path / "nowhere")
    with pytest.raises(tune.SearchError, match="report.md exists and is not a regular file"):
        api.tune(tune.parse_search(SEARCH), out_dir=tmp_path / "out")


def test_newlines_and_control_characters_of_user_values_are_escaped_in_every_report(tmp_path, capsys):
    out = outcome_with(
        tmp_path,
        **{"served-model-name": ["ok", "x\n# INJECTED"], "tag": {"a|b`c\x1b[2J": {}, "plain": {}}},
    )
    assert any("INJECTED" in p.candidate.label for p in out.pruned)
    folder = tune_report.write(out, tmp_path / "report")
    md = (folder / "report.md").read_text()
    assert "\n# INJECTED" not in md and "x\\n# INJECTED" in md and "\x1b" not in md and "\\x1b[2J" in md
    table = [ln for ln in md.splitlines() if ln.startswith("| 1 |")]
    assert table and all(ln.replace("\\|", "").count("|") == 8 for ln in table)  # the label's '|' stays in its cell
    assert "tag=a\\|b`c\\x1b[2J`` |" in md  # in a code span longer than its backticks
    text = tune_report.summary(out)
    assert "\x1b" not in text and not any(ln.startswith("# INJECTED") for ln in text.splitlines())
    from sglang_deploy.cli.tune import print_plan

    print_plan(out)
    err = capsys.readouterr().err
    assert "PRUNED" in err and not any(ln.startswith("# INJECTED") for ln in err.splitlines())


# --------------------------------------------------------------------------------------------------
# Secrets: masked in every listing; --promote's diff shows only the promotion's own lines


def listings(out, tmp_path, capsys) -> dict:
    """Every text a search's candidates are listed in: the PRUNED lines, the summary, report.md, outcome.json."""
    from sglang_deploy.cli.tune import print_plan

    print_plan(out)
    folder = tune_report.write(out, tmp_path / "report")
    return {
        "PRUNED lines": capsys.readouterr().err,
        "summary": tune_report.summary(out),
        "report.md": (folder / "report.md").read_text(),
        "outcome.json": (folder / "outcome.json").read_text(),
    }


SECRETS = ("sk-live-0123456789abcdef", "hf_0123456789abcdef", "PASSW0RDxyz", "svc@corp")


def test_secret_axis_values_are_masked_in_pruned_lines_reports_and_outcome(tmp_path, capsys):
    out = outcome_with(
        tmp_path,
        **{
            "api-key": ["sk-live-0123456789abcdef"],
            "env.HF_TOKEN": ["hf_0123456789abcdef"],
            "model-path": ["/m", "https://user:PASSW0RDxyz@host/w", "s3://svc@corp.example:PASSW0RDxyz@bucket/w"],
        },
    )
    assert out.pruned and all("api-key=***" in p.candidate.label for p in out.planned)
    texts = listings(out, tmp_path, capsys)
    for where, text in texts.items():
        assert not [s for s in SECRETS if s in text], where
    assert "model-path=https://***@host/w" in texts["report.md"] and "env.HF_TOKEN=***" in texts["report.md"]


def test_a_constraint_naming_a_secret_value_is_masked_in_its_reason():
    s = tune.parse_search(
        {
            **SEARCH,
            "axes": {**SEARCH["axes"], "api-key": ["sk-live-0123456789abcdef", "sk-live-fedcba9876543210"]},
            "constraints": [{"exclude": {"api-key": "sk-live-0123456789abcdef"}}],
        }
    )
    _, excluded = tune.expand(s)
    assert excluded and all("sk-live" not in reason + str(choices) for choices, reason in excluded)
    assert "excluded by api-key=***" in excluded[0][1]


def test_the_promotion_diff_shows_no_line_of_another_variable(tmp_path):
    from test_tune import finished

    out = finished(tmp_path)
    target = tmp_path / "all.yml"
    target.write_text(
        "---\n"
        "db_password: >-\n  folded-secret-head\n  folded-secret-tail\n"
        "sglang_profiles:\n  baseline: {description: b, args: {tp-size: 8}}\n"
        "ssh_private_key: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXktdjEAAAAA\n"
        "  -----END OPENSSH PRIVATE KEY-----\n"
    )
    diff, new = tune.promote_profile(target, "fastest", tune.promotion_body(out.search, out.winner))
    assert "folded-secret-tail" in new and "b3BlbnNzaC1rZXktdjEAAAAA" in new
    assert "+  fastest:" in diff and "+    extends: baseline" in diff
    for secret in ("folded-secret", "b3BlbnNzaC1rZXktdjEAAAAA", "OPENSSH", "db_password", "ssh_private_key"):
        assert secret not in diff
    assert all(ln.startswith(("---", "+++", "@@", "+")) for ln in diff.splitlines())  # no context lines


# --------------------------------------------------------------------------------------------------
# Work limits; the promotion checked before the search


def test_a_search_too_large_to_plan_is_refused_as_it_is_read():
    """5 axes of 10 values: 100,000 candidates, each rendered and validated before the first deploy (minutes)."""
    refused("make 100000 combinations (at most 4096)", axes={f"env.SGLANG_X{i}": list(range(10)) for i in range(5)})
    refused("33 axes with 66 values (at most 32 axes", axes={f"env.SGLANG_X{i}": [0, 1] for i in range(33)})
    refused("values (at most 32 axes and 512 values)", axes={"env.SGLANG_X": list(range(513))})


def test_planning_stops_where_the_budget_does():
    from test_tune import host

    axes = {
        "max-running-requests": list(range(64, 80)),
        "chunked-prefill-size": list(range(4096, 4112)),
        "cuda-graph-max-bs": list(range(32, 48)),
    }
    s = tune.parse_search({**SEARCH, "axes": axes, "constraints": []}, name="t")
    candidates, _ = tune.expand(s)
    assert len(candidates) == 4096
    planned = tune.plan(s, candidates, [host()], want=3)
    assert len(planned) == 3 and not any(p.pruned for p in planned)
    ticks = iter(range(100))
    planned = tune.plan(s, candidates, [host()], clock=lambda: next(ticks), deadline=10)
    assert 0 < len(planned) < 10


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--promote", "../x"], "profile name '../x'"),
        (["--promote", "fast", "--into", "{tmp}"], "--into: {tmp} is a folder"),
        (["--promote", "fast", "--into", "{tmp}/link.yml"], "link.yml exists and is not a regular file"),
        (["--promote", "fast", "--into", "{tmp}/bad.yml"], "bad.yml is not valid YAML"),
        (["--promote", "fast", "--into", "{tmp}/list.yml"], "sglang_profiles must be a mapping"),
    ],
)
def test_a_bad_promotion_is_refused_before_the_search_runs(argv, needle, tmp_path, monkeypatch, capsys):
    def no_playbook(*a, **kw):
        raise AssertionError("a playbook ran")

    monkeypatch.setattr(api.runner, "run_playbook", no_playbook)
    (tmp_path / "link.yml").symlink_to(tmp_path / "victim.yml")
    (tmp_path / "bad.yml").write_text("a: [\n")
    (tmp_path / "list.yml").write_text("sglang_profiles: [a]\n")
    path = tmp_path / "s.yml"
    path.write_text(yaml.safe_dump(SEARCH))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert cli.main(["tune", str(path), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert needle.replace("{tmp}", str(tmp_path)) in err and "Traceback" not in err


def test_secret_query_parameters_and_json_keys_are_masked_in_every_listing(tmp_path, capsys):
    """A token in a URL's query or inside the JSON value of a non-secret flag (issue 41 N15)."""
    out = outcome_with(
        tmp_path,
        **{
            "model-path": ["/m", "https://hub.example/w?revision=main&token=hf_query0123456789"],
            "json-model-override-args": ['{"rope_theta": 1e6}', '{"hf_token": "hf_json0123456789"}'],
        },
    )
    texts = listings(out, tmp_path, capsys)
    assert "PRUNED" in texts["PRUNED lines"]
    for where, text in texts.items():
        assert "hf_query" not in text and "hf_json" not in text, where
    assert "revision=main&token=***" in texts["report.md"]


HF = "hf_" + "Q7" * 17  # a Hugging Face token's shape: hf_ and 34 letters and digits


def test_a_credential_in_a_flags_json_value_is_masked_wherever_it_is_shown(tmp_path, capsys):
    """A bearer token under a key no secret name matches (issue 48, R16): the deploy carries it, but the terminal
    (cli/shown.py), report.md, outcome.json, the store's records and compare's report show ***."""
    from sglang_deploy.cli.shown import shown

    value = '{"headers": {"Authorization": "Bearer ' + HF + '"}}'
    out = outcome_with(tmp_path, **{"json-model-override-args": ['{"rope_theta": 1e6}', value]})
    assert any(value in str(p.candidate.args) for p in out.planned)  # what is deployed keeps the user's value
    texts = listings(out, tmp_path, capsys)
    texts = {**texts, "PRUNED lines": shown(texts["PRUNED lines"]), "summary": shown(texts["summary"])}
    texts["store"] = "".join(p.read_text() for p in (tmp_path / "store" / "runs").glob("*.json"))
    runs = {p: run(p, None, failure=f"exited 1: --json-model-override-args {value}") for p in ("a", "b")}
    folder = compare_report.write_report(compare_report.build_comparison(["a", "b"], runs), tmp_path / "cmp")
    texts.update({f"compare {n}": (folder / n).read_text() for n in ("report.md", "comparison.json")})
    for where, text in texts.items():
        assert HF not in text, where
    assert all(
        "Bearer ***" in texts[n] for n in ("report.md", "outcome.json", "compare report.md", "compare comparison.json")
    )


def _tamper_meta(store_dir):
    (store_dir / "search.json").write_text('{"spent_s": "abc"}')
    return r"search.json: spent_s is \"abc\", not a finite number >= 0: remove or fix it"


def _tamper_record(change):
    def tamper(store_dir):
        path = sorted((store_dir / "runs").glob("*.json"))[0]
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
        return rf"runs/{path.name}: .* remove or fix it"

    return tamper


def _bad_metric(rec):
    host = next(iter(rec["metrics"]))
    level = next(iter(rec["metrics"][host]))
    rec["metrics"][host][level] = {**rec["metrics"][host][level], "decode_tok_s": "fast"}
    return rec


TAMPERED = {
    "spent_s": _tamper_meta,
    "no status": _tamper_record(lambda rec: {k: v for k, v in rec.items() if k != "status"}),
    "stage": _tamper_record(lambda rec: {**rec, "stage": ["full"]}),
    "metric": _tamper_record(_bad_metric),
    "not an object": _tamper_record(lambda rec: [rec]),
}


@pytest.mark.parametrize("how", TAMPERED)
def test_a_tampered_store_is_refused_on_resume_naming_the_file_and_the_field(tmp_path, how):
    """search.json's spent_s "abc" ended a resumed search in a ValueError traceback, a stored run without status in
    a KeyError (issue 48, red-team): each is read checked, and refused naming the file, the field and the fix, before
    any playbook (api.search._store) and in the loop."""
    outcome_with(tmp_path)
    needle = TAMPERED[how](tmp_path / "store")
    with pytest.raises(tune.SearchError, match=needle):
        outcome_with(tmp_path)
    with pytest.raises(tune.SearchError, match=needle):
        api.search._store(tune.parse_search(SEARCH), tmp_path / "store")
