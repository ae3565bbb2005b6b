"""sglang_deploy.tune and tune_report: search file, expansion, pruning with the real rules, keys, store, the
search loop (with a deploy double standing in for the playbook: the lab test in test_tune_lab.py runs the real
one), ranking with noise, promotion and the report."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from sglang_deploy.compare import figures, noise
from sglang_deploy import api, tune
from sglang_deploy.launch import profiles
from sglang_deploy.rules import rules
from sglang_deploy.tune import report as tune_report, measures, searchfile
from sglang_deploy.paths import REPO

# The rule facts of the lab's stand-in hardware and checkpoint, from the lab role's vars.
LAB_VARS = yaml.safe_load((REPO / "roles" / "lab" / "vars" / "main.yml").read_text())
LAB_FACTS = {
    **rules.gpu_facts(LAB_VARS["__lab_host_fact"]["emulated_gpu"]),
    **rules.model_facts(LAB_VARS["__lab_model_config"]),
    "model_path_exists": True,
}

SEARCH = {
    "base": "baseline",
    "axes": {
        "moe-runner-backend": ["flashinfer_cutlass", "triton", "flashinfer_cutedsl"],
        "allreduce": {"nccl": {}, "pcie-ipc": {"env": {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": 1}}},
        "spec": {
            "off": {},
            "nextn": {"args": {"speculative-algorithm": "NEXTN", "mamba-scheduler-strategy": "extra_buffer"}},
            "topk": {
                "args": {
                    "speculative-algorithm": "NEXTN",
                    "mamba-scheduler-strategy": "extra_buffer",
                    "speculative-eagle-topk": 4,
                }
            },
        },
    },
    "constraints": [{"exclude": {"moe-runner-backend": "triton", "spec": "topk"}}],
    "workload": {"concurrency": [1, 32], "input_len": 64, "output_len": 32, "requests": 4},
    "objectives": [{"metric": "decode_tok_s", "concurrency": 1}, {"metric": "output_tok_s", "concurrency": 32}],
    "limits": [{"metric": "ttft_p99_ms", "concurrency": 32, "max": 1000}],
}


def host(name="lab-1", **over) -> tune.HostFacts:
    base = dict(
        host=name,
        profiles=profiles.load_profiles(),
        settings=profiles.load_settings(),
        sglang_version="0.5.23",
        rule_facts=dict(LAB_FACTS),
        stack={},
        emulated=True,
    )
    base.update(over)
    return tune.HostFacts(**base)


def search(**over) -> tune.Search:
    return tune.parse_search({**SEARCH, **over}, name="t")


# --------------------------------------------------------------------------------------------------
# Search file, expansion


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"axes": {}}, "axes: a mapping"),
        ({"axes": {"moe-runner-backend": "triton"}}, "give a list of values"),
        ({"bogus": 1}, "unknown keys ['bogus']"),
        ({"objectives": [{"metric": "speed", "concurrency": 1}]}, "use one of output_tok_s"),
        ({"objectives": [{"metric": "decode_tok_s", "concurrency": 8}]}, "not a level of the workload [1, 32]; add it"),
        ({"constraints": [{"exclude": {"nope": 1}}]}, "unknown axis 'nope'"),
        ({"constraints": [{"exclude": {"spec": "fast"}}]}, "fast not among its values (off, nextn, topk)"),
        ({"limits": [{"metric": "ttft_p99_ms", "concurrency": 32}]}, "one numeric bound"),
        ({"limits": [{"metric": "ttft_p99_ms", "concurrency": 32, "max": float("nan")}]}, "a finite number"),
        ({"limits": [{"metric": "ttft_p99_ms", "concurrency": 32, "min": float("-inf")}]}, "a finite number"),
        ({"limits": [{"metric": "ttft_p99_ms", "concurrency": 32, "max": True}]}, "one numeric bound"),
        ({"vars": {"sglang_benchmark_requests": 3}}, "set by the search itself"),
        ({"vars": {1: "x"}}, "each name a variable name"),
        ({"axes": {"a": {"x": {"env": {"V": 1}}}, "env.V": [0, 1]}}, "both set env V"),
        ({"two_stage": {"workload": {"concurrency": [1]}, "top": 2}}, "must keep level 32"),
    ],
)
def test_bad_search_files_name_the_fix(change, needle):
    with pytest.raises(tune.SearchError, match=None) as err:
        tune.parse_search({**SEARCH, **change})
    assert needle in str(err.value)


def test_load_search_names_the_file(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text(yaml.safe_dump({**SEARCH, "noise": 2}))
    with pytest.raises(tune.SearchError, match=r"mine.yml: noise: a fraction"):
        tune.load_search(path)
    path.write_text(yaml.safe_dump(SEARCH))
    assert tune.load_search(path).name == "mine"


def test_expand_is_the_product_minus_constraints():
    cands, excluded = tune.expand(search())
    assert len(cands) + len(excluded) == 3 * 2 * 3
    assert len(excluded) == 2 and all(c["moe-runner-backend"] == "triton" and c["spec"] == "topk" for c, _ in excluded)
    first = cands[0]
    assert first.choices == {"moe-runner-backend": "flashinfer_cutlass", "allreduce": "nccl", "spec": "off"}
    assert first.args == {"moe-runner-backend": "flashinfer_cutlass"} and first.env == {}
    assert [c.index for c in cands] == list(range(1, 17))


def test_when_require_constraint():
    s = search(constraints=[{"when": {"spec": ["nextn", "topk"]}, "require": {"allreduce": "pcie-ipc"}}])
    cands, excluded = tune.expand(s)
    assert len(excluded) == 3 * 2  # every spec candidate without pcie-ipc
    assert all(c.choices["allreduce"] == "pcie-ipc" for c in cands if c.choices["spec"] != "off")
    assert "requires allreduce in ['pcie-ipc']" in excluded[0][1]


# --------------------------------------------------------------------------------------------------
# Pruning with the project's rules, keys


def test_plan_prunes_with_the_rules_and_reasons():
    s = search()
    planned = tune.plan(s, tune.expand(s)[0], [host()])
    pruned = {p.candidate.label: p.reasons for p in planned if p.pruned}
    # cutedsl on SM120 prints "!!!!" (arch-moe-backend); topk without num-steps asserts (spec-triple).
    assert all("[arch-moe-backend]" in " ".join(r) for lb, r in pruned.items() if "cutedsl" in lb)
    assert all("[spec-triple]" in " ".join(r) for lb, r in pruned.items() if "spec=topk" in lb)
    assert len(pruned) == 6 + 2  # 6 cutedsl, 2 cutlass+topk
    runnable = [p for p in planned if not p.pruned]
    assert len(runnable) == 8 and len({p.key for p in runnable}) == 8
    p = runnable[0]
    assert p.profile == f"tune-{p.key[:10]}" and "--moe-runner-backend" in p.launches["lab-1"]["argv"]
    # The flat profile renders exactly the launch the key hashed.
    launch = profiles.render(p.profile, {p.profile: p.body}, profiles.load_settings(), "0.5.23")
    assert launch.argv == p.launches["lab-1"]["argv"] and launch.env == p.launches["lab-1"]["env"]


def test_facts_decide_the_pruning():
    s = search()
    planned = tune.plan(s, tune.expand(s)[0], [host(rule_facts={**LAB_FACTS, "gpu_arch": "sm_100"})])
    cutedsl = [p for p in planned if "cutedsl" in p.candidate.label and "topk" not in p.candidate.label]
    assert cutedsl and not any(p.pruned for p in cutedsl)


def test_keys_follow_the_rendered_launch_and_the_stack():
    s = tune.parse_search(
        {**SEARCH, "axes": {"moe-runner-backend": [None, "flashinfer_cutlass", "triton"]}, "constraints": []}
    )
    cands = tune.expand(s)[0]
    a = tune.plan(s, cands, [host()])
    # baseline already sets flashinfer_cutlass: null removes it, the explicit value renders baseline's launch.
    baseline = profiles.render("baseline", profiles.load_profiles(), profiles.load_settings(), "0.5.23")
    assert a[1].launches["lab-1"]["args"] == baseline.args and len({p.key for p in a}) == 3
    assert (
        tune.candidate_key(
            {"lab-1": {"args": baseline.args, "env": {}, "sglang_version": "0.5.23"}}, {"lab-1": tune.stack_id(host())}
        )
        == a[1].key
    )  # same flags, any order: same key
    other_stack = tune.plan(s, cands, [host(stack={"bundle": "stable-0.5.23", "bundle_id": "abc"})])
    assert {p.key for p in other_stack}.isdisjoint({p.key for p in a})
    older = tune.plan(s, cands, [host(sglang_version="0.5.14")])
    assert older[1].key != a[1].key


def test_unknown_base_stops_before_anything():
    with pytest.raises(tune.SearchError, match="base profile 'nope' is not a profile of host lab-1"):
        tune.plan(search(base="nope"), tune.expand(search())[0], [host()])


# --------------------------------------------------------------------------------------------------
# Store and the search loop


def test_store_writes_atomically_and_ignores_damaged_records(tmp_path):
    store = tune.Store(tmp_path)
    record = {"candidate_key": "c1", "candidate": 1, "stage": "full", "status": tune.OK}
    store.put("k1", record)
    assert store.get("k1") == record and store.get("nope") is None
    (tmp_path / "runs" / "k2.json").write_text('{"half')
    assert store.get("k2") is None and store.records() == [record]
    assert not list((tmp_path / "runs").glob(".*"))  # no temp file left


class ModelDeploy:
    """Deploy double for the loop's own logic (ordering, store, budget, repeats): figures from a fixed table
    of speeds per choice; 'triton + pcie-ipc' fails as garbage."""

    def __init__(self, fail_after: int | None = None, jitter: float = 0.0):
        self.calls: list = []
        self.fail_after = fail_after
        self.jitter = jitter

    def __call__(self, p, workload, stage, repeat):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt  # the controller dies mid-candidate
        self.calls.append((p.candidate.index, stage, repeat))
        ch = p.candidate.choices
        if ch["moe-runner-backend"] == "triton" and ch["allreduce"] == "pcie-ipc":
            return {"status": tune.FAILED, "kind": "garbage", "error": "output is broken: repeated_char", "metrics": {}}
        dec = 100.0 * (1.3 if ch["allreduce"] == "pcie-ipc" else 1) * (1.5 if ch["spec"] == "nextn" else 1)
        dec *= 0.8 if ch["moe-runner-backend"] == "triton" else 1
        dec *= 1 + self.jitter * ((-1) ** repeat)
        agg = 2000.0 * (1.1 if ch["allreduce"] == "pcie-ipc" else 1) * (0.85 if ch["spec"] == "nextn" else 1)
        metrics = {
            "lab-1": {
                "1": {"decode_tok_s": dec, "output_tok_s": dec * 0.7, "ttft_p99_ms": 80.0},
                "32": {"decode_tok_s": agg / 32, "output_tok_s": agg, "ttft_p99_ms": 200.0},
            }
        }
        return {"status": tune.OK, "metrics": metrics, "emulated": True}


def planned_lab(s=None):
    s = s or search()
    cands, excluded = tune.expand(s)
    return s, tune.plan(s, cands, [host()]), excluded


def test_search_ranks_resumes_and_runs_nothing_twice(tmp_path):
    s, planned, excluded = planned_lab()
    store = tune.Store(tmp_path)
    first = ModelDeploy(fail_after=3)
    assert tune.run_search(s, planned, excluded, first, store).cancelled
    assert len(store.records()) == 3  # every completed candidate is on disk; the one in flight is lost
    again = ModelDeploy()
    out = tune.run_search(s, planned, excluded, again, store)
    assert [c[0] for c in again.calls] == [p.candidate.index for p in out.runnable][3:]
    c = out.counts()
    assert (c["expanded"], c["excluded"], c["pruned"], c["run"], c["failed"]) == (18, 2, 8, 8, 2)
    dec = out.decisions["decode_tok_s @ c=1"]
    best = next(
        p
        for p in out.runnable
        if p.candidate.choices == {"moe-runner-backend": "flashinfer_cutlass", "allreduce": "pcie-ipc", "spec": "nextn"}
    )
    assert dec["winner"] == best.key and out.winner is best
    agg = out.decisions["output_tok_s @ c=32"]
    assert out.rankings["output_tok_s @ c=32"][0]["label"] == (
        "moe-runner-backend=flashinfer_cutlass, allreduce=pcie-ipc, spec=off"
    )
    assert agg["winner"] == out.rankings["output_tok_s @ c=32"][0]["key"]
    # cutlass and triton without pcie-ipc have the same aggregate: they rank, but neither is called better
    tied = [r for r in out.rankings["output_tok_s @ c=32"] if r["median"] == 2000.0]
    assert len(tied) == 2
    third = ModelDeploy()
    assert tune.run_search(s, planned, excluded, third, store).counts()["run"] == 8 and third.calls == []


def test_a_run_whose_benchmark_counted_answers_otherwise_is_not_ranked(tmp_path):
    """compare's comparability list (figures.COMPARABLE) holds in a search too: a candidate whose server did not
    tokenize the recorded answers (counted in words: other output lengths) is no run of the same workload."""

    class Counting(ModelDeploy):
        def __call__(self, p, workload, stage, repeat):
            fields = super().__call__(p, workload, stage, repeat)
            if fields["status"] == tune.OK:
                how = "words" if p.candidate.choices["spec"] == "nextn" else "server tokens (/v1/tokenize)"
                fields["measured"] = {"lab-1": figures.comparable({"workload": {"answer_lengths": how}})}
            return fields

    s, planned, excluded = planned_lab()
    out = tune.run_search(s, planned, excluded, Counting(), tune.Store(tmp_path))
    nextn = [r for r in out.records if r["choices"]["spec"] == "nextn" and r.get("kind") != "garbage"]
    assert nextn and all(r["status"] == tune.FAILED and r["kind"] == "workload" for r in nextn)
    assert "its benchmark's answer_lengths was 'words' on lab-1, 'server tokens (/v1/tokenize)'" in nextn[0]["error"]
    ranked = {r["label"] for rows in out.rankings.values() for r in rows}
    assert ranked and not any("spec=nextn" in label for label in ranked)
    # the deploy's record keeps what each host's benchmark did
    from sglang_deploy.api import HostOutcome, RunResult
    from sglang_deploy.api.search import candidate_fields

    res = {"levels": [], "workload": {"answer_lengths": "words", "seed": 3}}
    r = RunResult("site.yml", "successful", 0, {"h": HostOutcome(ok=1)}, data={"sglang_benchmark": {"h": res}})
    assert candidate_fields(r, [])["measured"] == {"h": figures.comparable(res)}
    # an unsound result (issue 48 R7) fails the run with its reason, where it crashed the search
    r.data["sglang_benchmark"]["h2"] = {"levels": [{"concurrency": "8", "requests": 4, "completed": 4}]}
    fields = candidate_fields(r, [])
    assert fields["status"] == tune.FAILED and fields["kind"] == "benchmark"
    why = "level 1: concurrency is '8', not a whole number >= 1 or null"
    assert fields["error"] == f"benchmark result dropped (h2: {why})"


def test_budget_of_candidates_and_of_time(tmp_path):
    s, planned, excluded = planned_lab()
    out = tune.run_search(s, planned, excluded, ModelDeploy(), tune.Store(tmp_path / "a"), tune.Budget.parse("3"))
    assert out.counts()["run"] == 3 and len(out.skipped_budget) == 5
    ticks = iter(range(0, 10_000, 40))
    out = tune.run_search(
        s,
        planned,
        excluded,
        ModelDeploy(),
        tune.Store(tmp_path / "b"),
        tune.Budget.parse("2m"),
        clock=lambda: next(ticks),
    )
    assert 0 < out.counts()["run"] < 8 and out.interrupted
    with pytest.raises(ValueError, match="90s, 30m, 2h"):
        tune.Budget.parse("2 days")


def test_two_stage_and_repeats(tmp_path):
    s, planned, excluded = planned_lab(
        search(two_stage={"workload": {"output_len": 8}, "top": 2}, repeat={"top": 1, "times": 3})
    )
    deploy = ModelDeploy(jitter=0.01)
    out = tune.run_search(s, planned, excluded, deploy, tune.Store(tmp_path))
    stages = [(st, r) for _, st, r in deploy.calls]
    assert stages.count(("short", 0)) == 8
    full = [c for c in deploy.calls if c[1] == "full"]
    # top 2 of each objective (union) get the full run; the best of each is repeated twice more
    assert len([c for c in full if c[2] == 0]) in (2, 3, 4) and len([c for c in full if c[2] > 0]) == 2 * 2
    row = out.rankings["decode_tok_s @ c=1"][0]
    assert row["n"] == 3 and row["min"] < row["median"] < row["max"] or row["min"] <= row["median"] <= row["max"]


def test_decide_calls_no_winner_inside_noise():
    """compare's rule (noise.verdict): the leader wins only where the interval of the ratio of medians excludes 1
    and the gap passes the noise; a candidate measured once has no interval (noise.MIN_RUNS a side): it ties unless
    every run of one is more than the noise from every run of the other (issue 48 R6)."""
    obj = tune.Objective("decode_tok_s", 1, "max")

    def row(key, values):
        return {"key": key, **noise.spread(values), "values": values, "within_limits": True}

    rows = [row("a", [99, 100, 101]), row("b", [98, 99.5, 100.5])]
    d = tune.decide(obj, rows, 0.02)
    assert d["winner"] is None and d["tied"] == ["a", "b"] and "no difference at this noise" in d["reason"]
    rows[1] = row("b", [89, 90, 91])
    d = tune.decide(obj, rows, 0.02)
    assert d["winner"] == "a" and "clear of 1" in d["reason"]
    assert tune.decide(obj, rows, 0.2)["winner"] is None  # 10% apart, but the noise threshold is 20%
    rows = [row("a", [96, 100, 104]), row("b", [101]), row("c", [80])]  # b and c measured once
    d = tune.decide(obj, rows, 0.02)
    assert d["winner"] is None and d["tied"] == ["a", "b"]  # b inside a's spread, c far behind it
    rows = [row("a", [100, 103, 106]), row("b", [99])]  # 4% below a's median, 1% from a's slowest run
    assert tune.decide(obj, rows, 0.02)["tied"] == ["a", "b"]
    rows = [row("a", [100]), row("b", [90])]  # single runs: the gap alone, and the reason says so
    reason = "10.0% ahead of the runner-up (a side measured once: no interval, every run apart by more than the noise)"
    assert tune.decide(obj, rows, 0.02)["reason"] == reason


# --------------------------------------------------------------------------------------------------
# Promotion and the report


def finished(tmp_path):
    s, planned, excluded = planned_lab()
    return tune.run_search(s, planned, excluded, ModelDeploy(), tune.Store(tmp_path / "store"))


def test_promote_into_the_profiles_file_keeps_comments_and_shows_the_diff(tmp_path):
    out = finished(tmp_path)
    target = tmp_path / "profiles.yml"
    shutil.copy(profiles.PROFILES_FILE, target)
    before = target.read_text()
    body = tune.promotion_body(out.search, out.winner, out)
    diff, new = tune.promote_profile(target, "fastest", body)
    assert new.startswith(before.rstrip("\n").split("sglang_profiles:")[0])  # header comments kept
    assert "+  fastest:" in diff and "+    extends: baseline" in diff and "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE" in diff
    assert not [ln for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    loaded = profiles.load_profiles(target)
    launch = profiles.render("fastest", loaded, profiles.load_settings(), "0.5.23")
    assert launch.argv == out.winner.launches["lab-1"]["argv"] and launch.env == out.winner.launches["lab-1"]["env"]
    diff2, _ = tune.promote_profile(target, "fastest", body)  # promoting again changes nothing
    assert diff2 == ""


def test_promote_into_a_new_group_vars_file_copies_the_hosts_profiles_and_says_so(tmp_path):
    """Ansible replaces a variable whole: a file that starts defining sglang_profiles keeps the profiles the hosts
    had (the sglang role's defaults when they are unknown), or it would hide them."""
    out = finished(tmp_path)
    target = tmp_path / "group_vars" / "gpu.yml"
    hosts = {"mine": {"description": "the hosts' own", "args": {"tp-size": 8}}, "baseline": {"description": "b"}}
    diff, _ = tune.promote_profile(target, "fastest", tune.promotion_body(out.search, out.winner), hosts)
    assert set(profiles.load_profiles(target)) == {"mine", "baseline", "fastest"}
    assert diff.startswith(f"({target} had no sglang_profiles: it starts with the profiles the hosts use, mine,")
    other = tmp_path / "other.yml"
    diff, _ = tune.promote_profile(other, "fastest", {"description": "x"})
    assert set(profiles.load_profiles(other)) == set(profiles.load_profiles(profiles.PROFILES_FILE)) | {"fastest"}
    assert "it starts with the sglang role's default profiles, baseline, nextn," in diff
    with pytest.raises(tune.SearchError, match="profile name"):
        tune.promote_profile(target, "bad name", {"description": "x"})


def test_the_cli_reads_the_role_defaults_under_the_projects_group_vars_all(tmp_path, monkeypatch):
    """render/validate/profiles and tune --promote read the sglang role's defaults; the project's group_vars/all
    (Ansible's order: all/ file by file, else all.yml) replaces each variable it defines again, sglang_profiles whole;
    a vaulted value or file does not stop the read. --promote writes where sglang_profiles is defined, else a new
    group_vars/all/profiles.yml."""
    from sglang_deploy.tune import promotion

    monkeypatch.setattr(profiles, "GROUP_VARS", tmp_path)
    monkeypatch.setattr(promotion, "GROUP_VARS", tmp_path)
    defaults = profiles.load_profiles(profiles.PROFILES_FILE)
    assert profiles.load_profiles() == defaults and profiles.load_settings()["sglang_port"] == 30000
    assert promotion.default_target() == tmp_path / "all" / "profiles.yml"
    (tmp_path / "all.yml").write_text("sglang_port: 31000\n")
    (tmp_path / "all").mkdir()
    (tmp_path / "all" / "a.yml").write_text("sglang_tp: 4\nsglang_api_key: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n")
    (tmp_path / "all" / "b.yml").write_text("sglang_profiles:\n  only: {description: mine}\nsglang_tp: 2\n")
    (tmp_path / "all" / "c.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n6162\n")
    settings = profiles.load_settings()
    assert (settings["sglang_tp"], settings["sglang_port"], settings["sglang_host"]) == (2, 30000, "127.0.0.1")
    assert profiles.load_profiles() == {"only": {"description": "mine"}}
    assert promotion.default_target() == tmp_path / "all" / "b.yml"


def test_report_has_rankings_pareto_pruned_and_failed(tmp_path):
    out = finished(tmp_path)
    folder = tune_report.write(out, tmp_path / "report")
    md = (folder / "report.md").read_text()
    assert "synthetic" in md and "## decode_tok_s @ c=1 (max)" in md and "![Pareto plot](pareto.png)" in md
    assert "## Pruned before launch" in md and "[arch-moe-backend]" in md and "[spec-triple]" in md
    assert "## Failed" in md and "repeated_char" in md and "garbage" in md
    assert (folder / "pareto.png").stat().st_size > 10_000
    doc = json.loads((folder / "outcome.json").read_text())
    assert doc["counts"]["failed"] == 2 and doc["winner"]["key"] == out.winner.key
    text = tune_report.summary(out)
    assert text.startswith("LAB: emulated") and "=> winner #" in text


def test_pareto_front():
    assert tune_report.pareto_front([(1, 5), (2, 4), (1.5, 3), (3, 1), (0.5, 0.5)]) == [0, 1, 3]


def test_example_search_file_parses():
    s = tune.load_search(REPO / "examples" / "tune-lab.yml")
    cands, excluded = tune.expand(s)
    assert len(cands) >= 24


def test_failure_kind_from_the_readiness_result():
    assert api.search.failure_kind([{"journal": ["a", "Traceback", "RuntimeError: x"]}]) == (
        "crash",
        ["a", "Traceback", "RuntimeError: x"],
    )
    assert api.search.failure_kind([{"failed_check": {"check": "repeated_char", "output": "!!!!"}}]) == ("garbage", [])
    assert api.search.failure_kind([{"stage": "warming"}]) == ("not_ready", [])
    assert api.search.failure_kind([]) == ("deploy_error", [])


def test_host_facts_from_the_facts_playbook_data():
    data = {
        "sglang_tune_facts": {
            "h1": {
                "rule_facts": {"gpu_arch": "sm_120", "nvlink": None},
                "profiles": {"a": {}},
                "settings": {"sglang_tp": 8},
                "sglang_version": "0.5.23",
                "stack": {"bundle": "none"},
                "emulated": True,
            }
        }
    }
    (h,) = api.search.tune_host_facts(data)
    assert (h.host, h.rule_facts, h.sglang_version, h.emulated) == ("h1", {"gpu_arch": "sm_120"}, "0.5.23", True)


def test_promote_keeps_a_private_files_mode_and_masks_secrets_in_the_diff(tmp_path):
    out = finished(tmp_path)
    target = tmp_path / "host_vars.yml"
    target.write_text(
        "---\nsglang_api_key: sk-do-not-print-0123456789\nsglang_profiles:\n  baseline:\n    description: b\n"
    )
    target.chmod(0o600)
    body = tune.promotion_body(out.search, out.winner)
    body.pop("extends", None)
    diff, new = tune.promote_profile(target, "fastest", body)
    assert "sk-do-not-print" in new and "sk-do-not-print" not in diff and "+  fastest:" in diff
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_search_too_large_to_expand_is_refused_at_once():
    axes = {f"env.SGLANG_X{i}": list(range(10)) for i in range(12)}  # 10**12 combinations
    with pytest.raises(tune.SearchError, match="make 1000000000000 combinations"):
        tune.expand(search(axes=axes, constraints=[]))


def test_load_search_keeps_the_profiles_limits(tmp_path):
    path = tmp_path / "bomb.yml"
    path.write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    )
    with pytest.raises(tune.SearchError, match="aliases expand"):
        tune.load_search(path)


def test_promote_reads_the_target_with_the_profiles_limits(tmp_path):
    """--into /dev/zero read without end; a huge target filled memory."""
    with pytest.raises(tune.SearchError, match="not a regular file"):
        tune.promote_profile("/dev/zero", "fastest", {"description": "x"})
    big = tmp_path / "big.yml"
    with open(big, "wb") as f:
        f.truncate(profiles.MAX_YAML_BYTES + 1)
    with pytest.raises(tune.SearchError, match="bytes, more than"):
        tune.promote_profile(big, "fastest", {"description": "x"})


@pytest.mark.parametrize("text", ["ttft_p99_ms@c=32<=nan", "ttft_p99_ms@c=32<=inf", "ttft_p99_ms@c=32>=-inf"])
def test_a_limit_of_the_command_line_needs_a_finite_bound(text):
    """compare's --require goes through the search file's limit(): nan would hold for no value, inf for any."""
    work = tune.Workload(concurrency=(1, 32))
    with pytest.raises(tune.SearchError, match="a finite number"):
        searchfile.limit(measures.parse_measure(text, bounded=True), f"--require {text}", work)


@pytest.mark.parametrize(
    "text, work, says, not_says",
    [
        ("output_tok_s@c=8", {}, "@c=8: not a level of the workload [1, 32]; add it to --concurrency", "concurrency 8"),
        ("goodput_req_s@c=1", {}, "give --slo, e.g. --slo ttft_p99_ms=2000", "slo: {"),
        ("sla_rate_req_s", {"slo": {"ttft_p99_ms": 9}}, "give --sla-search LOW,HIGH", "sla_search: ["),
        ("output_tok_s", {}, "give the level, @c=N (a closed-loop level) or @rate=R", "concurrency: N"),
        ("output_tok_s@rate=3", {"request_rate": (2.0,)}, "@rate=3: not a request rate", "add it there"),
        ("ttft_p99_ms@c=1<=nan", {}, "give one bound, <=X or >=X, X a finite number", "max: or min:"),
    ],
)
def test_objectives_of_the_command_line_are_told_the_command_lines_fix(text, work, says, not_says):
    """compare's --objective and --require go through the search file's checks; their messages name the flags."""
    raw = measures.parse_measure(text, bounded="<=" in text)
    check = searchfile.limit if "<=" in text else searchfile.objective
    workload = tune.Workload(**({"concurrency": (1, 32)} | work))
    with pytest.raises(tune.SearchError) as err:
        check(raw, f"--objective {text}", workload)
    assert says in str(err.value) and not_says not in str(err.value)
    with pytest.raises(tune.SearchError) as err:  # the same check in a search file: its own syntax
        check(raw, "objectives[0]", workload)
    assert not_says in str(err.value)


class WrongDeploy(ModelDeploy):
    """ModelDeploy, where flashinfer_cutlass with pcie-ipc and no speculative decoding fails the quality gate (firm:
    wrong answers; else a drift past a tolerance)."""

    def __init__(self, firm: bool):
        super().__init__()
        self.firm = firm

    def __call__(self, p, workload, stage, repeat):
        ch = p.candidate.choices
        if (ch["moe-runner-backend"], ch["allreduce"], ch["spec"]) == ("flashinfer_cutlass", "pcie-ipc", "off"):
            self.calls.append((p.candidate.index, stage, repeat))
            error = "it does not answer right (quality gate on lab-1: answers: score 0.50)"
            return {"status": tune.FAILED, "kind": "quality", "firm": self.firm, "error": error, "metrics": {}}
        return super().__call__(p, workload, stage, repeat)


@pytest.mark.parametrize("firm", [True, False])
def test_a_combination_that_answered_wrong_prunes_the_candidates_that_hold_it(tmp_path, firm):
    """Issue 49: once a candidate fails the gate for a reason that is not numerics, the candidates that set every
    flag it sets (and more) are not run; a drift past a tolerance alone prunes nothing."""
    s, planned, excluded = planned_lab()
    deploy = WrongDeploy(firm)
    out = tune.run_search(s, planned, excluded, deploy, tune.Store(tmp_path))
    holding = [
        p
        for p in out.runnable
        if (p.candidate.choices["moe-runner-backend"], p.candidate.choices["allreduce"])
        == ("flashinfer_cutlass", "pcie-ipc")
        and p.candidate.choices["spec"] != "off"
    ]
    assert holding  # the search has candidates that hold the failing one's flags
    run = {index for index, _, _ in deploy.calls}
    skipped = [p.candidate.index for p, _ in out.skipped_wrong]
    if firm:
        assert skipped == [p.candidate.index for p in holding] and not run & set(skipped)
        assert out.counts()["not_run_wrong"] == len(holding)
        assert "not run (they hold a combination that answered wrong)" in tune_report.summary(out)
        assert "which failed the quality gate" in tune_report.markdown(out)
    else:
        assert skipped == [] and {p.candidate.index for p in holding} <= run
