"""sglang_deploy.api: event parsing, secrets (local hosts), and deploy/compare/status/rollback
against the lab container (skipped, with the reason, where there is no lab)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_host import LAB_HOST

from sglang_deploy import api
from sglang_deploy.compare import compare_report
from sglang_deploy.api import redaction, runner
from sglang_deploy.paths import REPO

LOCAL_PLAY = "tests/fixtures/runner/events.yml"
LOCAL_HOSTS = REPO / "tests" / "fixtures" / "runner" / "hosts.yml"
SECRET = "sk-test-9f8e7d6c5b4a"
# Small sweep: the lab tests check structure, not speed.
SMALL = {"sglang_benchmark_concurrency": [1, 4], "sglang_benchmark_requests": 4, "sglang_benchmark_output_len": 32}
NO_FORCED_RESTART = {"sglang_fleet_force_restart": False}


def files_containing(root: Path, text: str) -> list:
    return [str(p) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def reported(hosts: dict, failures: list = ()) -> api.StatusResult:
    """A status() result: ``hosts`` (host -> HostStatus) read by a run with ``failures``."""
    return api.StatusResult(
        hosts=hosts, run=api.RunResult("playbooks/status.yml", "successful", 0, failures=list(failures))
    )


def private_dir(result: api.RunResult) -> Path:
    return Path(result.artifacts).parents[1]


# --------------------------------------------------------------------------------------------------
# Local hosts (connection local): always run


def test_outcomes_failures_and_set_stats_from_events():
    events = []
    r = runner.run_playbook(
        LOCAL_PLAY, inventory=LOCAL_HOSTS, extravars={"fail_hosts": ["local-b"]}, on_event=events.append, kind="test"
    )
    assert (r.status, r.rc, r.ok) == ("failed", 2, False)
    assert {h: o.state for h, o in r.hosts.items()} == {"local-a": "ok", "local-b": "failed"}
    assert r.hosts["local-a"].rescued == 1
    # The fatal failure, with its task and message; the rescued one apart; the ignored one nowhere.
    assert [(f.host, f.task, f.message) for f in r.failures] == [
        ("local-b", "Stop with a message", "final failure on local-b")
    ]
    assert sorted((f.host, f.task) for f in r.rescued) == [
        ("local-a", "Fail inside a block"),
        ("local-b", "Fail inside a block"),
    ]
    assert r.data["probe"] == {
        "local-a": {"answer": 42, "secret_length": 0, "echo": ""},
        "local-b": {"answer": 42, "secret_length": 0, "echo": ""},
    }
    assert Path(r.artifacts, "job_events").is_dir()
    assert any(e["event"] == "playbook_on_task_start" for e in events)
    d = r.to_dict()
    assert d["hosts"]["local-b"]["state"] == "failed" and d["failures"][0]["task"] == "Stop with a message"


def test_limit_and_success():
    r = runner.run_playbook(LOCAL_PLAY, inventory=LOCAL_HOSTS, limit="local-a", kind="test")
    assert r.ok and list(r.hosts) == ["local-a"] and r.failures == []


def test_no_matching_host_is_not_a_success():
    r = runner.run_playbook(LOCAL_PLAY, inventory=LOCAL_HOSTS, limit="nobody", kind="test")
    assert not r.ok and r.hosts == {}
    assert "no hosts to target" in r.error and "\x1b[" not in r.error


def test_playbook_error_without_a_task_comes_back_as_error():
    r = runner.run_playbook("tests/fixtures/runner/no-such-playbook.yml", inventory=LOCAL_HOSTS, kind="test")
    assert not r.ok and r.rc != 0 and r.failures == []
    assert "no-such-playbook.yml" in r.error


def test_secret_extravars_never_reach_the_files_of_the_run():
    r = runner.run_playbook(
        LOCAL_PLAY,
        inventory=LOCAL_HOSTS,
        limit="local-a",
        kind="test",
        extravars={"probe_api_key": SECRET, "plain": "visible"},
    )
    assert r.ok and r.data["probe"]["local-a"]["secret_length"] == len(SECRET)  # the play did get it
    pdd = private_dir(r)
    assert files_containing(pdd, SECRET) == []
    assert files_containing(pdd, redaction.REDACTED) == []  # not scrubbed away: it was never written
    assert not (pdd / "secret-extravars.yml").exists()
    assert (pdd / "env" / "extravars").read_text() == 'plain: !unsafe "visible"\n'
    command = json.loads(Path(r.artifacts, "command").read_text())["command"]
    assert f"@{pdd / 'secret-extravars.yml'}" in command


def test_an_extra_variable_is_data_never_a_template(tmp_path):
    """Issue 48 R1: a profile name a hostile host reported comes back as the `profile` extra variable; Ansible
    templates extra variables, so `{{ lookup('pipe', ...) }}` there ran a command on the controller."""
    marks = [tmp_path / "public-ran", tmp_path / "secret-ran"]
    planted = {
        "echo": {"profile": f"{{{{ lookup('pipe', 'touch {marks[0]}; echo baseline') }}}}", "n": 1, "empty": ""},
        "probe_api_key": f"{{{{ lookup('pipe', 'touch {marks[1]}') }}}}",
    }
    r = runner.run_playbook(LOCAL_PLAY, inventory=LOCAL_HOSTS, limit="local-a", kind="test", extravars=planted)
    assert r.ok, r.failures
    assert [m for m in marks if m.exists()] == []
    assert r.data["probe"]["local-a"]["echo"] == planted["echo"]
    assert r.data["probe"]["local-a"]["secret_length"] == len(planted["probe_api_key"])


def test_a_leaked_secret_is_scrubbed_from_files_events_and_data():
    seen = []
    r = runner.run_playbook(
        LOCAL_PLAY,
        inventory=LOCAL_HOSTS,
        limit="local-a",
        kind="test",
        extravars={"probe_api_key": SECRET, "leak": True},
        on_event=seen.append,
    )
    pdd = private_dir(r)
    assert files_containing(pdd, SECRET) == []
    assert f"the key is {redaction.REDACTED}" in Path(r.artifacts, "stdout").read_text()
    assert SECRET not in json.dumps(seen) and f"the key is {redaction.REDACTED}" in json.dumps(seen)


def encodings(value: str) -> dict:
    """The forms a secret takes in the files of a run: logged argv, a JSON string inside a JSON event, YAML."""
    import shlex

    import yaml

    json_once = json.dumps(value)
    return {
        "json": json_once,
        "json, not ASCII-escaped": json.dumps(value, ensure_ascii=False),
        "JSON inside JSON": json.dumps(json_once),
        "JSON inside JSON, not ASCII-escaped": json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False),
        "repr": repr(value),
        "repr inside JSON": json.dumps(repr(value)),
        "repr of a list (SGLang's server_args)": repr([value]),
        "shlex": shlex.quote(value),
        "shlex inside JSON": json.dumps("run " + shlex.quote(value)),
        "YAML double-quoted": yaml.safe_dump({"k": value}, default_style='"', width=1000),
        "YAML double-quoted, unicode": yaml.safe_dump({"k": value}, default_style='"', allow_unicode=True, width=1000),
        "YAML single-quoted": yaml.safe_dump({"k": value}, default_style="'", allow_unicode=True, width=1000),
    }


@pytest.mark.parametrize("value", ["sk-\"quoted\\back\tslash's", "pässwörd-€-\x07bell", "plain-key-1234"])
def test_scrub_catches_escaped_quoted_and_nested_forms(tmp_path, value):
    forms = encodings(value)
    for name, text in forms.items():
        (tmp_path / f"{len(list(tmp_path.iterdir()))}.txt").write_text(f"{name}: {text}\n", encoding="utf-8")
    redaction.scrub_tree(tmp_path, redaction.secret_forms([value]))
    left = {
        p.read_text(encoding="utf-8").split(":")[0]
        for p in tmp_path.iterdir()
        if redaction.REDACTED not in p.read_text(encoding="utf-8")
    }
    assert left == set()
    events = redaction.redact({"stdout": list(forms.values())}, redaction.secret_forms([value]))["stdout"]
    assert [name for name, text in zip(forms, events) if redaction.REDACTED not in text] == []


def test_split_secrets_looks_into_nested_keys():
    public, secret = redaction.split_secrets(
        {
            "sglang_api_key": "k1",
            "hf_token": "t",
            "sglang_profiles": {"x": {"env": {"HF_TOKEN": "t2"}}},
            "sglang_benchmark_requests": 4,
            "db": {"user": "u", "Password": "pw12"},
        }
    )
    assert set(secret) == {"sglang_api_key", "hf_token", "sglang_profiles", "db"}
    assert public == {"sglang_benchmark_requests": 4}
    assert redaction.secret_values(secret) == ["pw12"]  # shorter values are not scrubbed (they would hit anything)


def test_a_url_with_a_password_makes_its_variable_secret():
    public, secret = redaction.split_secrets(
        {
            "sglang_stack_pip_env": {"PIP_INDEX_URL": "https://bob:hunter2pass@pypi.example/simple"},
            "cuda_pip_env": {"HTTPS_PROXY": "http://proxy.example:3128"},
        }
    )
    assert set(secret) == {"sglang_stack_pip_env"} and set(public) == {"cuda_pip_env"}
    assert "hunter2pass" in redaction.secret_values(secret)


def test_secret_values_are_the_strings_under_secret_keys():
    values = redaction.secret_values({"sglang_api_key": "abcd1234", "db": {"user": "alice", "password": "hunter22"}})
    assert set(values) == {"abcd1234", "hunter22"}


def test_compare_measures_each_profile_then_restores_what_each_host_served(monkeypatch):
    """compare() through the rollout engine, the playbooks stood in for: every profile on all hosts (on a fleet also
    through the router, with the replicas restarted, unless -e says otherwise), then per profile that served
    before one deploy on its hosts, without a benchmark; a host with nothing to restore is left alone."""
    was = {"a": ("p1", "p0"), "b": (None, "p2"), "c": (None, None), "d": ("p1", "p1")}
    found = {
        h: api.HostStatus(h, now, "active" if now else "inactive", None, good, None) for h, (now, good) in was.items()
    }
    monkeypatch.setattr(api.operations, "status", lambda **kw: reported(found))
    deploys = []

    seen_tags = []

    def deploy(profile, inventory=None, limit=None, extravars=None, on_event=None, tags=None):
        deploys.append((profile, limit, extravars))
        seen_tags.append(tags)
        return api.RunResult(playbook="site.yml", status="successful", rc=0, hosts={"a": api.HostOutcome(ok=1)})

    monkeypatch.setattr(api.operations, "deploy", deploy)
    phases = []
    comp = api.compare(
        ["x", "y"],
        limit="all",
        extravars={"sglang_fleet_force_restart": False},
        on_event=lambda ev: phases.append(ev["event_data"]["phase"]) if ev["event"] == api.PHASE_EVENT else None,
    )
    measured = {"sglang_fleet_benchmark": True, "sglang_fleet_force_restart": False}
    quiet = {"sglang_fleet_force_restart": False, "sglang_benchmark_enabled": False}
    # three repeats by default, every other round reversed: x y | y x | x y; without the forced restart a repeat
    # right after the profile's own run only benchmarks (tags benchmark, the stand-in's extravars say which)
    assert deploys == [(p, "all", measured) for p in "xyyxxy"] + [("p1", "a,d", quiet), ("p2", "b", quiet)]
    assert seen_tags == [None, None, "benchmark", None, "benchmark", None, None, None]
    assert phases[0] == "read what each host serves"
    assert phases[1].startswith("plan: 6 deploys in the order x y y x x y, 4 of them restart the servers")
    assert phases[2:5] == ["deploy 1/6: x (repeat 1/3)", "deploy 2/6: y (repeat 1/3)", "benchmark 3/6: y (repeat 2/3)"]
    assert phases[-2:] == ["restore p1 on a, d", "restore p2 on b"]
    assert comp.ok and len(comp.restores) == 2 and comp.repeats == 3 and comp.measured_order == list("xyyxxy")
    with pytest.raises(ValueError, match="repeats must be a whole number from 1 to 50"):
        api.compare(["x", "y"], repeats=0)


def _compare_with(monkeypatch, was: dict, roll):
    """compare() against stand-in playbooks: hosts serving `was` before; roll(profile, limit) -> (rows of the run's
    summary, whether it passed). Returns the list of (profile, limit) deploys it makes."""
    found = {h: api.HostStatus(h, p, "active", "running", p, None) for h, p in was.items()}
    monkeypatch.setattr(api.operations, "status", lambda **kw: reported(found))
    deploys = []

    def deploy(profile, inventory=None, limit=None, extravars=None, on_event=None):
        deploys.append((profile, limit))
        rows, passed = roll(profile, limit)
        failures = [] if passed else [api.Failure(host=rows[0]["host"], task="Wait for the server", message="no")]
        return api.RunResult(
            playbook="site.yml",
            status="successful" if passed else "failed",
            rc=0 if passed else 2,
            hosts={r["host"]: api.HostOutcome(ok=1, failed=int(not passed)) for r in rows},
            failures=failures,
            data={"sglang_fleet": rows},
        )

    monkeypatch.setattr(api.operations, "deploy", deploy)
    return deploys


def test_compare_measures_what_served_before_last_and_restores_only_the_hosts_it_did_not_leave_on_it(monkeypatch):
    """The profile most hosts are restored to is measured last (the report keeps the order given); when its roll
    passes, the hosts its summary says serve it are not deployed again, the others are restored as before."""
    was = {"a": "p1", "b": "p2", "d": "p1", "e": "p1"}

    def passing(profile, limit):
        return [{"host": h, "serves": profile, "outcome": "unchanged" if h == "d" else "deployed"} for h in was], True

    deploys = _compare_with(monkeypatch, was, passing)
    comp = api.compare(["p1", "p2", "x"], limit="all", repeats=1)
    assert deploys == [("p2", "all"), ("x", "all"), ("p1", "all"), ("p2", "b")]
    assert comp.profiles == ["p1", "p2", "x"] and comp.measured_order == ["p2", "x", "p1"] and len(comp.restores) == 1
    # repeated: the last round in that order, the one before it reversed; the same restore
    deploys.clear()
    comp = api.compare(["p1", "p2", "x"], limit="all", repeats=2)
    assert deploys == [("p1", "all"), ("x", "all"), ("p2", "all"), ("p2", "all"), ("x", "all"), ("p1", "all")] + [
        ("p2", "b")
    ]
    assert [len(comp.runs[p]) for p in comp.profiles] == [2, 2, 2] and comp.plan["restarts"] == 6  # forced: each
    # without the forced restart only a change of profile restarts (the first deploy too: b serves p2)
    guess = api.comparison.estimate.Timings()
    assert api.comparison.plan_cost(comp.plan["order"], was, guess, force=False)["restarts"] == 5
    # issue 52: the plan said "about 25 s of server starts" for a run of 390-492 s; it estimates the whole run
    measured = api.comparison.estimate.Timings(deploy_s=40, bench_s=25, restore_s=30, runs=9)
    assert api.comparison.plan_cost(["p1", "p1"], "p1", measured, force=False)["text"] == (
        "2 deploys in the order p1 p1, 0 of them restart the servers; about 90 s: 1 deploys x ~40 s, 2 benchmarks "
        "x ~25 s; from 9 earlier runs on these hosts"
    )
    assert api.comparison.plan_cost(["a", "b", "b", "a", "a", "b"], "c", measured)["estimate"]["total_s"] == 420
    # --keep-order: the order given, everything restored
    deploys.clear()
    api.compare(["p1", "p2", "x"], limit="all", keep_order=True, repeats=1)
    assert deploys == [("p1", "all"), ("p2", "all"), ("x", "all"), ("p1", "a,d,e"), ("p2", "b")]
    # one profile named for every host: nothing to restore once it was measured last and every host stays on it
    deploys.clear()
    assert api.compare(["p2", "p1"], limit="all", restore="p2", repeats=1).restores == []
    assert deploys == [("p1", "all"), ("p2", "all")]
    with pytest.raises(ValueError, match="given twice"):
        api.compare(["p1", "p2", "p1"])


def test_compare_restores_every_host_after_a_stopped_last_roll_and_breaks_ties_by_the_order_given(monkeypatch):
    """A last roll that failed (e rolled back, the roll stopped, d never reached): which host serves what is not
    certain, so every host gets its profile back, as before the reordering; with one profile named, it too."""
    was = {"a": "p1", "b": "p2", "d": "p1", "e": "p1"}
    stopped = [
        {"host": "a", "serves": "p1", "outcome": "deployed"},
        {"host": "b", "serves": "p1", "outcome": "deployed"},
        {"host": "e", "serves": "x", "outcome": "rolled back"},
        {"host": "d", "serves": "x", "outcome": "untouched"},
    ]
    deploys = _compare_with(monkeypatch, was, lambda profile, limit: (stopped, profile != "p1" or limit != "all"))
    comp = api.compare(["p1", "x"], limit="all", repeats=1)
    assert deploys == [("x", "all"), ("p1", "all"), ("p1", "a,d,e"), ("p2", "b")] and not comp.ok
    deploys.clear()
    api.compare(["x", "p1"], limit="all", restore="p1", repeats=1)
    assert deploys == [("x", "all"), ("p1", "all"), ("p1", "all")]
    # a profile whose deploy failed is not deployed again in the later rounds
    deploys.clear()
    api.compare(["x", "p1"], limit="all", restore="p1", repeats=3)
    assert deploys == [("x", "all"), ("p1", "all"), ("x", "all"), ("x", "all"), ("p1", "all")]
    # a tie (one host each): the first given of the two is measured last
    deploys = _compare_with(monkeypatch, {"a": "p1", "b": "p2"}, lambda profile, limit: (stopped, True))
    api.compare(["p2", "p1"], limit="all", keep_order=False, repeats=1)
    assert [d[0] for d in deploys[:2]] == ["p1", "p2"]


def test_a_side_by_side_compare_deploys_each_profile_on_its_own_host_once_then_alternates_benchmarks(monkeypatch):
    """--side-by-side: a host already serving a profile keeps it, the next free host (name order) takes the other;
    each deployed once without a benchmark, then benchmark-only runs (tags benchmark, no router benchmark) in
    alternating rounds, their results set side by side under one label; the host lent to x gets p2 back."""
    was = {"a": "p1", "b": "p2", "c": "p0"}
    found = {h: api.HostStatus(h, p, "active", "running", p, None) for h, p in was.items()}
    monkeypatch.setattr(api.operations, "status", lambda **kw: reported(found))
    calls = []

    def deploy(profile, inventory=None, limit=None, extravars=None, on_event=None, tags=None):
        calls.append((profile, limit, tags, extravars))
        bench = {limit: {"levels": [], "workload": {}}} if tags == "benchmark" else {}
        return api.RunResult(
            playbook="site.yml",
            status="successful",
            rc=0,
            hosts={limit: api.HostOutcome(ok=1)},
            profile=profile,
            data={"sglang_benchmark": bench},
        )

    monkeypatch.setattr(api.operations, "deploy", deploy)
    comp = api.compare(["x", "p1"], repeats=2, side_by_side=True)
    assert [(c[0], c[1], c[2]) for c in calls] == [
        ("x", "b", None),
        ("p1", "a", None),
        ("p1", "a", "benchmark"),
        ("x", "b", "benchmark"),
        ("x", "b", "benchmark"),
        ("p1", "a", "benchmark"),
        ("p2", "b", None),
    ]
    assert calls[0][3] == api.comparison.SIDE_BY_SIDE_DEPLOY and calls[2][3] == api.comparison.SIDE_BY_SIDE_BENCH
    assert calls[-1][3]["sglang_benchmark_enabled"] is False  # the restore
    assert comp.ok and comp.plan["hosts"] == {"x": "b", "p1": "a"} and comp.plan["restarts"] == 1
    assert [list(r.benchmarks) for r in comp.runs["x"]] == [["b (x) / a (p1)"]] * 2
    assert comp.measured_order == ["p1", "x", "x", "p1"] and len(comp.setups) == 2
    assert "Side by side: b (x) / a (p1); each deployed once, then 2 rounds" in compare_report.markdown(comp, None)
    every = {"f1": "base", "f2": "base", "f3": "base"}  # the next free host, not one past it
    assert api.comparison.side_by_side_hosts(["base", "new"], every) == {"base": "f1", "new": "f2"}
    assert api.comparison.side_by_side_hosts(["new", "base"], every) == {"new": "f2", "base": "f1"}
    with pytest.raises(ValueError, match="a side-by-side compare needs a host for each profile: 4 profiles, 3 hosts"):
        api.compare(["x", "p1", "p2", "p3"], side_by_side=True)


def test_parse_status():
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
                },
                "b": {
                    "unit": "Description=sglang.service\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n",
                    "local": {"sglang_server": {"profile": "gone"}},
                    "manifest": {},
                },
            }
        }
    )
    assert (got["a"].profile, got["a"].serving, got["a"].last_good_profile, got["a"].emulated) == (
        "nextn",
        True,
        "baseline",
        True,
    )
    assert (got["b"].profile, got["b"].serving, got["b"].manifest, got["b"].active_state) == (
        None,
        False,
        None,
        "inactive",
    )


# --------------------------------------------------------------------------------------------------
# The lab (docker container sglang-lab-1 with the emulated server): ./lab test creates it before pytest


lab = pytest.mark.lab


@pytest.fixture(scope="module")
def baseline_with_key():
    """baseline deployed on the lab with an API key given as an extra variable, its server restarted even where an
    earlier run of these tests left it serving (so it is benchmarked, as a deploy that restarts is by default)."""
    return api.deploy("baseline", extravars={**SMALL, "sglang_api_key": SECRET, "sglang_fleet_force_restart": True})


@lab
def test_deploy_returns_outcome_and_benchmark(baseline_with_key):
    r = baseline_with_key
    assert r.ok, (r.failures, r.error)
    assert r.hosts[LAB_HOST].state in ("ok", "changed") and r.hosts[LAB_HOST].failed == 0
    res = r.benchmarks[LAB_HOST]
    assert res["server_emulated"] is True and r.emulated
    assert [m["concurrency"] for m in res["levels"]] == [1, 4]
    for m in res["levels"]:
        assert m["completed"] == m["requests"] == 4
        assert m["output_throughput_tok_s"] > 0 and m["decode_tok_s_per_request"]["mean"] > 0
    # Where the running server's start went, from the lab host's journal: the emulator's lines, marked as such.
    startup = res["context"]["deployed"]["startup"]
    assert startup["clock"] == "journal" and startup["emulated"], startup
    assert list(startup["milestones"])[0] == "process_start" and "cuda_graphs_captured" in startup["milestones"]
    assert startup["summary"].endswith("(EMULATED server: synthetic timing)")
    # The server's GC frozen after the sanity prompts (sglang_server_freeze_gc), with the API key; its log says so.
    assert res["context"]["deployed"]["gc_frozen"] is True
    show = ["docker", "exec", LAB_HOST, "systemctl", "show", "-p", "InvocationID", "--value", "sglang"]
    invocation = subprocess.run(show, capture_output=True, text=True).stdout.strip()
    journal = ["docker", "exec", LAB_HOST, "journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat"]
    lines = subprocess.run(journal, capture_output=True, text=True).stdout.splitlines()  # the running process's
    assert invocation and sum("Freezing GC in Tokenizer Manager process" in line for line in lines) == 1, lines[-5:]
    # Its caches are in the stack's folder (the lab has no stack), which the role made the service account's.
    env = subprocess.run(["docker", "exec", LAB_HOST, "cat", "/etc/sglang/sglang.env"], capture_output=True, text=True)
    assert 'TORCHINDUCTOR_CACHE_DIR="/var/cache/sglang/no-stack/inductor"' in env.stdout.splitlines()
    # The root is root's: the service account cannot swap the stack's folder for a link to elsewhere.
    owner = ["docker", "exec", LAB_HOST, "stat", "-c", "%U %G %a", "/var/cache/sglang", "/var/cache/sglang/no-stack"]
    found = subprocess.run(owner, capture_output=True, text=True).stdout.split()
    assert found == ["root", "sglang", "750", "sglang", "sglang", "750"], found


@lab
def test_deploy_with_an_api_key_leaves_no_secret_on_disk(baseline_with_key):
    assert baseline_with_key.ok
    assert files_containing(private_dir(baseline_with_key), SECRET) == []
    assert SECRET not in json.dumps(baseline_with_key.to_dict())


@lab
def test_a_rerun_that_changes_nothing_skips_the_benchmark_unless_asked(baseline_with_key):
    """Issue 52: the server did not restart and the controller keeps a result of this profile on this launch, unit
    and stack: the benchmark is skipped and the run says which result; sglang_benchmark_again measures anyway."""
    again = api.deploy("baseline", extravars={**SMALL, "sglang_api_key": SECRET})
    assert again.ok and again.benchmarks == {} and again.hosts[LAB_HOST].changed == 0
    assert again.data["sglang_benchmark_skipped"][LAB_HOST] == baseline_with_key.result_files[LAB_HOST]
    forced = api.deploy("baseline", extravars={**SMALL, "sglang_api_key": SECRET, "sglang_benchmark_again": True})
    assert forced.ok and list(forced.benchmarks) == [LAB_HOST] and "sglang_benchmark_skipped" not in forced.data


@lab
def test_unknown_profile_fails_with_the_list_of_profiles(baseline_with_key):
    r = api.deploy("no-such-profile", extravars=SMALL)
    assert not r.ok and r.hosts[LAB_HOST].state == "failed"
    assert r.failures[0].unknown_profile == "no-such-profile" and "baseline" in r.failures[0].available_profiles
    assert api.unknown_profile([r]) == ("no-such-profile", r.failures[0].available_profiles)


@lab
def test_crashing_server_fails_with_task_and_message_and_rolls_back(baseline_with_key):
    # The emulator's fault switch goes in through sglang_server_env: a profile's env keeps only variables that
    # SGLang reads (the flag translation drops SGLANG_EMU_*). Same API key as the last good deploy: the rollback's
    # wait uses this run's key.
    r = api.deploy(
        "nextn",
        extravars={
            **SMALL,
            "sglang_api_key": SECRET,
            "sglang_server_env": {
                "SGLANG_EMU_FAULT": "crash_on_load",
                "SGLANG_EMU_FAULT_MESSAGE": "AssertionError: emulated crash while loading the checkpoint",
            },
        },
    )
    assert not r.ok and r.benchmarks == {}
    f = r.failures[0]
    assert (f.host, f.unreachable) == (LAB_HOST, False)
    # The failure carries the server's own traceback, then the rollback.
    assert "emulated crash while loading the checkpoint" in f.message, f.message
    assert (
        "Profile nextn did not come up" in f.message and "Rolled back: profile baseline is serving again" in f.message
    )
    assert any("Wait for the server" in x.task for x in r.rescued)
    found = api.status()
    assert found.ok and found.hosts[LAB_HOST].profile == "baseline" and found.hosts[LAB_HOST].serving
    assert found.hosts[LAB_HOST].last_good_profile == "baseline"


@lab
def test_compare_repeats_each_profile_interleaved_and_calls_only_what_the_noise_allows(baseline_with_key, tmp_path):
    """no-custom-ar (a flag the lab's model ignores: the same speed) against baseline, three times each,
    interleaved: a verdict on each level (which one rests on the lab's wall clock, so it is not asserted); what served
    before (baseline) is measured last, so it serves again with no restore. (The verdicts themselves:
    tests/test_report.py, tests/test_noise.py; their figures: benchmarks/ab_noise.py.)"""
    # without the forced restart: 4 deploys, the 2 repeats right after their profile's own run benchmark only
    comp = api.compare(["baseline", "no-custom-ar"], extravars={**SMALL, **NO_FORCED_RESTART}, repeats=3)
    assert comp.ok, comp.failures()
    assert comp.measured_order == ["no-custom-ar", "baseline", "baseline", "no-custom-ar", "no-custom-ar", "baseline"]
    assert comp.plan["restarts"] == 4 and comp.repeats == 3
    assert [(r["concurrency"], r["profile"]) for r in comp.rows] == [
        (c, p) for c in (1, 4) for p in ("baseline", "no-custom-ar")
    ]
    for r in comp.rows:
        assert r["runs"] == 3 and r["spread"]["decode_tok_s"]["n"] == 3
        assert r["spread"]["decode_tok_s"]["min"] <= r["decode_tok_s"] <= r["spread"]["decode_tok_s"]["max"]
        assert r["output_tok_s"] > 0 and r["ttft_p50_ms"] > 0
        if r["profile"] == "no-custom-ar":
            assert r["vs_first"]["decode_tok_s"]["verdict"] != "not measured", r["vs_first"]
    assert comp.emulated and comp.workload["same_for_all"]
    assert comp.restores == []
    found = api.status()
    assert found.hosts[LAB_HOST].profile == "baseline" and found.hosts[LAB_HOST].serving
    out = compare_report.write_report(comp, tmp_path / "cmp")
    assert (out / "compare.png").stat().st_size > 10_000
    assert "over 3 repeats" in (out / "report.md").read_text()


@lab
def test_rollback_redeploys_the_last_good_profile(baseline_with_key):
    r = api.rollback()
    assert r.ok, (r.failures, r.error)
    found = api.status()
    assert found.hosts[LAB_HOST].profile == found.hosts[LAB_HOST].last_good_profile == "baseline"


@lab
def test_a_planted_host_record_is_refused_by_status_and_compare_and_runs_nothing(baseline_with_key, tmp_path):
    """Issue 48 R1 on the lab: root on the host plants a template as its last good profile. status names the host and
    the field, compare stops before it deploys, and the lookup never runs on the controller."""
    fact = "/etc/ansible/facts.d/sglang_server.fact"
    mark = tmp_path / "PWNED"
    saved = subprocess.run(["docker", "exec", LAB_HOST, "cat", fact], capture_output=True, text=True, check=True).stdout
    record = {**json.loads(saved), "last_good_profile": f"{{{{ lookup('pipe', 'touch {mark}; echo baseline') }}}}"}
    plant = ["docker", "exec", "-i", LAB_HOST, "sh", "-c", f"cat > {fact}"]
    subprocess.run(plant, input=json.dumps(record), text=True, check=True)
    try:
        found = api.status()
        assert not found.ok and [f.host for f in found.run.failures] == [LAB_HOST]
        assert "field 'last_good_profile'" in found.run.failures[0].message
        with pytest.raises(api.HostReportError, match=f"{LAB_HOST}: .*'last_good_profile'"):
            api.compare(["baseline", "nextn"], repeats=1, extravars=SMALL)
    finally:
        subprocess.run(plant, input=saved, text=True, check=True)
    assert not mark.exists()


def _quality_profiles() -> dict:
    """The shipped profiles plus fast-wrong: an FP4 GEMM backend the lab's synthetic model makes 15% faster and wrong
    (group_vars/lab.yml)."""
    from sglang_deploy.launch import profiles

    shipped = profiles.load_profiles()
    return {
        **shipped,
        "fast-wrong": {
            "description": "lab: an FP4 GEMM backend that is faster and wrong (synthetic)",
            "extends": "baseline",
            "args": {"fp4-gemm-backend": "flashinfer_cutlass"},
        },
    }


@lab
def test_compare_refuses_the_profile_that_answers_wrong_and_ranks_the_one_that_answers_right(
    baseline_with_key, tmp_path
):
    """Issue 49 on the lab: compare fast-wrong baseline --repeats 2. The gate fails fast-wrong (fluent wrong answers)
    at its first deploy, which fails naming the failing prompt and rolls back to the last good profile; it is never
    deployed again. baseline passes the gate, is the fastest that answers right, and the report says why. baseline
    served before: measured last, nothing to restore. (A refusal's record, read by status: tests/test_canary.py.)"""
    extravars = {**SMALL, "sglang_profiles": _quality_profiles()}  # no key, as the lab serves
    comp = api.compare(["fast-wrong", "baseline"], repeats=2, extravars=extravars)
    assert comp.measured_order == ["baseline", "fast-wrong", "baseline"] and comp.restores == []
    assert len(comp.runs["fast-wrong"]) == 1 and len(comp.runs["baseline"]) == 2
    r = comp.runs["fast-wrong"][0]
    assert not r.ok and r.benchmarks == {}
    f = r.failures[0]
    assert "does not answer right" in f.message and "expected" in f.message, f.message
    assert "Rolled back: profile baseline is serving again" in f.message
    g = r.gate[LAB_HOST]
    assert g["passed"] is False and g["score"] < 0.8 and g["problems"][0].startswith("answers: score")
    right = comp.runs["baseline"][0].gate[LAB_HOST]
    assert right["passed"] is True and right["score"] == 1.0, right
    text = compare_report.format_table(comp)
    assert "fastest that answers right: baseline" in text and "not counted: fast-wrong (it does not answer" in text
    report = (compare_report.write_report(comp, tmp_path / "out") / "report.md").read_text()
    assert "Fastest that answers right: baseline" in report and "quality gate" in report.lower()
