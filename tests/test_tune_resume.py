"""A resumed search (issue 23, tune): it restores what served before the search began, counts the time of all its
runs, and the report and the promotion say only what is true. api.tune() runs here with the playbooks stood in
for (facts, status, deploy): the lab test in test_tune_lab.py runs the real ones."""

from __future__ import annotations

import shlex
import shutil
from types import SimpleNamespace

import pytest
import yaml

from sglang_deploy import api, cli, tune
from sglang_deploy.tune import report as tune_report
from sglang_deploy.launch import profiles
from test_tune import LAB_FACTS, SEARCH, ModelDeploy, planned_lab


class Killed(BaseException):
    """The controller dies (kill -9): nothing after it runs, neither restore nor report."""


class Lab:
    """One host whose serving profile the stand-in deploys change; the benchmark figures come from ModelDeploy's
    table. kill_at: the deploy number (1-based, benchmark deploys only) during which the controller dies."""

    def __init__(self, monkeypatch, serving="nextn", kill_at=None):
        self.serving = serving
        self.kill_at = kill_at
        self.deploys: list = []
        self.model = ModelDeploy()
        monkeypatch.setattr(api.runner, "run_playbook", self.facts)
        monkeypatch.setattr(api.operations, "status", self.status)
        monkeypatch.setattr(api.operations, "deploy", self.deploy)

    def facts(self, playbook, **kw):
        assert playbook == api.search.TUNE_FACTS_PLAYBOOK
        raw = {
            "profiles": profiles.load_profiles(),
            "settings": profiles.load_settings(),
            "sglang_version": "0.5.23",
            "rule_facts": LAB_FACTS,
            "emulated": True,
        }
        return SimpleNamespace(ok=True, data={"sglang_tune_facts": {"lab-1": raw}}, failures=[], error=None)

    def status(self, **kw):
        host = api.HostStatus("lab-1", self.serving, "active", "running", self.serving, None)
        return api.StatusResult(hosts={"lab-1": host}, run=api.RunResult("playbooks/status.yml", "successful", 0))

    def deploy(self, profile, inventory=None, limit=None, extravars=None, on_event=None):
        self.serving = profile
        benchmark = extravars.get("sglang_benchmark_enabled") is not False
        self.deploys.append((profile, benchmark))
        if benchmark and self.kill_at == sum(b for _, b in self.deploys):
            raise Killed
        done = SimpleNamespace(
            status="successful", ok=True, emulated=True, artifacts="", elapsed_s=0.1, failures=[], error=None, rc=0
        )
        done.benchmarks, done.dropped_benchmarks, done.gate = {}, {}, {}
        if benchmark:
            p = next(q for q in self.planned if q.profile == profile)
            fields = self.model(p, None, "full", 0)
            done.benchmarks = {"lab-1": {"levels": levels(fields.get("metrics", {}).get("lab-1", {}))}}
        return done


def levels(metrics: dict) -> list:
    return [
        {
            "concurrency": int(c),
            "output_throughput_tok_s": m["output_tok_s"],
            "decode_tok_s_per_request": {"mean": m["decode_tok_s"]},
            "ttft_ms": {"p99": m["ttft_p99_ms"]},
        }
        for c, m in metrics.items()
    ]


@pytest.fixture
def search():
    s, planned, _ = planned_lab()
    return s, planned


def test_a_resumed_search_restores_what_served_before_it_began(search, monkeypatch, tmp_path):
    s, planned = search
    lab = Lab(monkeypatch, serving="nextn", kill_at=3)
    lab.planned = planned
    with pytest.raises(Killed):
        api.tune(s, out_dir=tmp_path)
    assert lab.serving.startswith("tune-")  # the killed run left its candidate serving
    lab.kill_at = None
    res = api.tune(s, out_dir=tmp_path)
    assert res.ok and lab.deploys[-1] == ("nextn", False) and lab.serving == "nextn"
    assert "before" not in tune.Store(tmp_path).meta()  # restored: a later search reads the hosts afresh


def test_a_resumed_run_with_nothing_left_to_measure_still_restores(search, monkeypatch, tmp_path):
    s, planned = search
    lab = Lab(monkeypatch, serving="nextn")
    lab.planned = planned
    tune.Store(tmp_path).update_meta(before={"lab-1": "nextn"})  # a run killed after its last measurement
    for p in planned:  # every run stored
        if not p.pruned:
            store = tune.Store(tmp_path)
            store.put(tune.run_key(p.key, s.workload, s.vars, 0), {**rec(p, s), **lab.model(p, None, "full", 0)})
    lab.serving = planned[-1].profile or "tune-x"
    res = api.tune(s, out_dir=tmp_path)
    assert res.outcome.new_runs == 0 and lab.deploys == [("nextn", False)] and lab.serving == "nextn"


def rec(p, s) -> dict:
    return {
        "key": "k",
        "candidate_key": p.key,
        "candidate": p.candidate.index,
        "label": p.candidate.label,
        "choices": p.candidate.choices,
        "profile": p.profile,
        "stage": "full",
        "repeat": 0,
        "elapsed_at_s": 1.0,
    }


class Clock:
    """10 s a reading, from 0."""

    def __init__(self):
        self.now = -10

    def __call__(self) -> float:
        self.now += 10
        return self.now


def test_elapsed_and_time_to_winner_count_every_run_of_the_search(tmp_path):
    s, planned, excluded = planned_lab()
    store = tune.Store(tmp_path)
    first = tune.run_search(s, planned, excluded, ModelDeploy(fail_after=2), store, clock=Clock())
    assert first.cancelled and first.elapsed_s > 0
    clock = Clock()
    out = tune.run_search(s, planned, excluded, ModelDeploy(), store, clock=clock)
    assert out.elapsed_s == first.elapsed_s + clock.now  # the killed run's time and the resumed run's
    # The winner (cutlass, pcie-ipc, nextn: the 4th runnable) was measured in the resumed run.
    done = {r["candidate_key"]: r["elapsed_at_s"] for r in out.records}
    assert out.time_to_winner_s == done[out.winner.key] > first.elapsed_s
    assert tune.Store(tmp_path).meta()["spent_s"] == out.elapsed_s


# --------------------------------------------------------------------------------------------------
# The report's promote command; promoting a candidate over a limit; nulls


def test_the_reports_promote_command_is_what_the_parser_accepts(search, monkeypatch, tmp_path):
    s, planned = search
    lab = Lab(monkeypatch)
    lab.planned = planned
    path = tmp_path / "my search.yml"
    path.write_text(yaml.safe_dump({**SEARCH, "name": "t"}, sort_keys=False))
    out = tmp_path / "out"
    assert cli.main(["tune", str(path), "-i", "inventory/lab.yml", "--out", str(out)]) == 0
    md = (out / "report" / "report.md").read_text()
    assert "--promote-to" not in md
    (line,) = [ln for ln in md.splitlines() if "writes it as profile NAME" in ln]
    words = shlex.split(line.split("`")[1])
    assert words[:2] == ["sglang-deploy", "tune"]
    args = cli.build_parser().parse_args(words[1:])
    assert (args.search, args.inventory, args.out) == (str(path), "inventory/lab.yml", str(out))
    assert (args.promote, args.into) == ("NAME", str(tune.promotion.default_target()))


def over_limit_search():
    s, planned, _ = planned_lab()
    s.limits = [tune.Limit("ttft_p99_ms", 32, max=150.0)]  # ModelDeploy's 200 ms breaks it for every candidate
    return s, planned


def test_a_candidate_over_a_limit_is_promoted_only_with_over_limit(monkeypatch, tmp_path):
    s, planned = over_limit_search()
    lab = Lab(monkeypatch)
    lab.planned = planned
    target = tmp_path / "profiles.yml"
    shutil.copy(profiles.PROFILES_FILE, target)
    kw = dict(out_dir=tmp_path / "out", promote="fast", promote_into=target, candidate="1")
    with pytest.raises(
        tune.SearchError, match=r"--candidate 1 broke a limit .*ttft_p99_ms @ c=32 <= 150 .*--over-limit"
    ):
        api.tune(s, **kw)
    assert "fast:" not in target.read_text()
    res = api.tune(s, over_limit=True, **kw)
    assert "broke a limit: ttft_p99_ms @ c=32 <= 150 (got 200.0)" in res.promoted["warning"]
    assert "fast" in profiles.load_profiles(target)


def test_a_null_that_removes_nothing_is_not_written(tmp_path):
    s, planned, _ = planned_lab(
        tune.parse_search(
            {
                **SEARCH,
                "axes": {"enable-mscclpp": [None, True], "moe-runner-backend": [None, "triton"]},
                "constraints": [],
            },
            name="t",
        )
    )
    (p,) = [q for q in planned if q.candidate.choices == {"enable-mscclpp": "null", "moe-runner-backend": "null"}]
    body = tune.promotion_body(s, p, base_profiles=profiles.load_profiles())
    # baseline sets moe-runner-backend (the null removes it) but not enable-mscclpp
    assert body["args"] == {"moe-runner-backend": None}
    target = tmp_path / "profiles.yml"
    shutil.copy(profiles.PROFILES_FILE, target)
    _, text = tune.promote_profile(target, "plain", body)
    own = text.split("\n  plain:")[1]
    assert "enable-mscclpp:" not in own and "moe-runner-backend:" in own
    launch = profiles.render("plain", profiles.load_profiles(target), profiles.load_settings(), "0.5.23")
    assert launch.argv == p.launches["lab-1"]["argv"]


# --------------------------------------------------------------------------------------------------
# The Pareto plot


class SlowFirstToken(ModelDeploy):
    """The PCIe-IPC candidates (the fastest) break the search's TTFT limit."""

    def __call__(self, p, workload, stage, repeat):
        fields = super().__call__(p, workload, stage, repeat)
        if fields["status"] == tune.OK and p.candidate.choices["allreduce"] == "pcie-ipc":
            fields["metrics"]["lab-1"]["32"]["ttft_p99_ms"] = 3000.0
        return fields


def test_the_pareto_plot_marks_limit_breakers_and_keeps_labels_clear_of_the_legend(tmp_path):
    s, planned, excluded = planned_lab()
    out = tune.run_search(s, planned, excluded, SlowFirstToken(), tune.Store(tmp_path))
    _, _, pts = tune_report.plot_points(out)
    over = [pt for pt in pts if pt["over"]]
    assert over and all(pt["planned"].candidate.choices["allreduce"] == "pcie-ipc" for pt in over)
    assert not [pt for pt in over if pt["front"]]  # the fastest, but not eligible: not on the front
    assert [pt for pt in pts if pt["front"]]
    fig = tune_report.figure(out)
    fig.canvas.draw()
    (ax,) = fig.axes
    (legend,) = fig.legends
    assert "over a limit (not eligible)" in [t.get_text() for t in legend.get_texts()]
    assert not legend.get_window_extent().overlaps(ax.get_window_extent())
    labels = [t.get_text() for t in ax.texts]
    assert sum(t.endswith("over limit") for t in labels) == len(over)


def test_repeats_are_kept_by_a_resumed_search_and_the_terminal_names_the_promote_command(
    search, monkeypatch, tmp_path, capsys
):
    s, planned = search
    lab = Lab(monkeypatch)
    lab.planned = planned
    res = api.tune(s, out_dir=tmp_path, repeats=3)
    assert tune.Store(tmp_path).meta()["repeats"] == 3
    repeated = [r for r in res.outcome.records if r["repeat"] > 0]
    assert repeated and max(r["repeat"] for r in repeated) == 2  # the top candidates measured 3 times in all
    benchmarks = sum(b for _, b in lab.deploys)
    res = api.tune(s, out_dir=tmp_path)  # resumed without --repeats: the same runs, all stored, none again
    assert sum(b for _, b in lab.deploys) == benchmarks
    assert sum(r["repeat"] > 0 for r in res.outcome.records) == len(repeated)
    with pytest.raises(tune.SearchError, match="repeats: a whole number from 1 to 50"):
        api.tune(s, out_dir=tmp_path, repeats=0)
    path = tmp_path / "s.yml"
    path.write_text(yaml.safe_dump({**SEARCH, "name": "t"}, sort_keys=False))
    capsys.readouterr()
    assert cli.main(["tune", str(path), "--out", str(tmp_path / "cli"), "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert f"promote the winner: sglang-deploy tune {path} --out {tmp_path / 'cli'} --promote NAME --into" in out


def test_promoting_a_candidate_tied_with_the_leader_says_so(search, monkeypatch, tmp_path):
    s, planned = search
    s.noise = 0.9  # every gap within the noise: every candidate within the limits tied with the leader
    lab = Lab(monkeypatch)
    lab.planned = planned
    target = tmp_path / "profiles.yml"
    shutil.copy(profiles.PROFILES_FILE, target)
    res = api.tune(s, out_dir=tmp_path / "out", repeats=2)
    tied = res.outcome.decisions[s.objectives[0].name]["tied"]
    assert res.outcome.winner is None and len(tied) > 1
    chosen = next(p for p in planned if p.key == tied[1])
    res = api.tune(
        s, out_dir=tmp_path / "out", promote="pick", promote_into=target, candidate=str(chosen.candidate.index)
    )
    assert f"candidate #{chosen.candidate.index} is tied with " in res.promoted["warning"]
    assert "no measured difference makes it the better one" in res.promoted["warning"]


def test_the_plan_estimates_the_whole_search_from_the_runs_it_has_ahead(search, monkeypatch, tmp_path, capsys):
    """Issue 52, item 8: tune printed no estimate (584 s on the lab). The plan counts each run still ahead as a
    deploy and a benchmark, then the restore; a resumed search counts only what is not stored."""
    from sglang_deploy import paths

    monkeypatch.setattr(paths, "RESULTS", tmp_path / "results")  # no earlier run: the guess
    s, planned = search
    lab = Lab(monkeypatch)
    lab.planned = planned
    seen: list = []
    res = api.tune(s, out_dir=tmp_path / "out", repeats=2, on_plan=seen.append)
    est, runnable = seen[0].estimate, sum(1 for p in planned if not p.pruned)
    top = min(runnable, 3 * len(s.objectives))  # at most: the objectives' top 3 may overlap
    assert (est["deploys"], est["benchmarks"], est["restores"]) == (runnable + top, runnable + top, 1)
    assert runnable < res.outcome.new_runs <= runnable + top
    assert est["text"].endswith("no earlier run on these hosts: a guess")
    assert res.outcome.to_dict()["estimate"] == est  # outcome.json and --json
    seen.clear()
    api.tune(s, out_dir=tmp_path / "out", on_plan=seen.append)  # resumed: the first runs are stored
    assert seen[0].estimate["deploys"] == top
    from sglang_deploy.cli.tune import print_plan

    print_plan(seen[0])
    assert f"  {seen[0].estimate['text']}\n" in capsys.readouterr().err
