"""tune with the benchmark's workloads (issue 22 item 3): a search file's workload takes every setting of the
benchmark (datasets, request rates, SLOs, the SLA search), and goodput and the highest rate under the SLA are
objectives and limits."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from sglang_deploy import tune
from sglang_deploy.compare import figures
from sglang_deploy.tune import report as tune_report
from test_tune import SEARCH, ModelDeploy, host

SLO = {"ttft_p99_ms": 2000, "tpot_p99_ms": 50}
SLA = {"sla_search": [1, 32], "max_concurrency": 16, "slo": SLO, "input_len": 64}
RATES = {"request_rate": [2, 8], "max_concurrency": 16, "slo": SLO}


def sla_search(**over):
    doc = {**SEARCH, "workload": SLA, "objectives": [{"metric": "sla_rate_req_s"}], "limits": [], **over}
    return tune.parse_search(doc, name="sla")


def rate_search(**over):
    doc = {
        **SEARCH,
        "workload": RATES,
        "objectives": [{"metric": "goodput_req_s", "rate": 8}, {"metric": "output_tok_s", "rate": 2}],
        "limits": [{"metric": "ttft_p99_ms", "rate": 8, "max": 1500}],
        **over,
    }
    return tune.parse_search(doc, name="rates")


def test_a_workload_of_request_rates_under_an_sla_becomes_the_roles_variables(tmp_path, monkeypatch):
    data = tmp_path / "traffic.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}) + "\n")
    monkeypatch.chdir(tmp_path)
    s = sla_search(workload={**SLA, "dataset_name": "custom", "dataset_path": "traffic.jsonl", "seed": 3})
    assert [o.name for o in s.objectives] == ["sla_rate_req_s (SLA search)"] and s.objectives[0].goal == "max"
    ev = s.workload.extravars()
    assert ev["sglang_benchmark_sla_search"] == [1.0, 32.0] and ev["sglang_benchmark_request_rate"] == []
    assert ev["sglang_benchmark_slo"] == SLO and ev["sglang_benchmark_max_concurrency"] == 16
    assert ev["sglang_benchmark_dataset_name"] == "custom" and ev["sglang_benchmark_seed"] == 3
    assert ev["sglang_benchmark_dataset_path"] == str(data)  # on the controller, absolute: the role copies it
    assert ev["sglang_benchmark_requests"] == 0 and ev["sglang_benchmark_input_len"] == 64
    assert s.workload.peak_concurrency == 16  # what the rules check the launch against
    assert "SLA search 1-32 req/s (at most 16 in flight); dataset custom" in s.workload.describe()
    r = rate_search()
    assert [o.name for o in r.objectives] == ["goodput_req_s @ 8 req/s", "output_tok_s @ 2 req/s"]
    assert r.limits[0].text == "ttft_p99_ms @ 8 req/s <= 1500" and r.objectives[0].goal == "max"
    assert r.workload.extravars()["sglang_benchmark_request_rate"] == [2.0, 8.0]


@pytest.mark.parametrize(
    "workload, objectives, needle",
    [
        (
            {"sla_search": [1, 32]},
            [{"metric": "sla_rate_req_s"}],
            "workload: an SLA search needs SLOs",
        ),
        (
            {"request_rate": [2]},
            [{"metric": "sla_rate_req_s"}],
            "sla_rate_req_s counts against the SLOs: give the workload its slo",
        ),
        (
            {"request_rate": [2], "slo": SLO},
            [{"metric": "sla_rate_req_s"}],
            "give the workload sla_search: [LOW, HIGH]",
        ),
        ({"concurrency": [1, 32]}, [{"metric": "goodput_req_s", "concurrency": 32}], "give the workload its slo"),
        ({"request_rate": [2, 8], "slo": SLO}, [{"metric": "goodput_req_s", "rate": 4}], "rate 4: not a request rate"),
        ({"request_rate": [2], "slo": SLO}, [{"metric": "goodput_req_s"}], "concurrency: N (a closed-loop level)"),
        ({"request_rate": [0]}, [{"metric": "output_tok_s", "rate": 2}], "workload: bad request rate"),
        (
            {"max_concurrency": 0, "request_rate": [2]},
            [{"metric": "output_tok_s", "rate": 2}],
            "max_concurrency must be at least 1",
        ),
        ({"request_rate": [2], "slo": {"ttft_p98_ms": 9}}, [], "unknown SLO metric"),
        ({"concurrency": [1, 32], "dataset_name": "custom", "dataset_path": "/nonexistent.jsonl"}, [], "cannot read"),
        ({"sla_search": [1, 8], "request_rate": [2], "slo": SLO}, [], "either request rates or an SLA search"),
    ],
)
def test_sla_objectives_and_workloads_a_search_cannot_use_are_refused(workload, objectives, needle):
    doc = {**SEARCH, "workload": workload, "objectives": objectives or SEARCH["objectives"], "limits": []}
    with pytest.raises(tune.SearchError) as err:
        tune.parse_search(doc)
    assert needle in str(err.value)


def test_two_stage_keeps_the_sla_search_and_the_rates():
    with pytest.raises(tune.SearchError, match="two_stage.workload must keep the SLA search"):
        sla_search(two_stage={"workload": {"sla_search": None, "concurrency": [1]}, "top": 2})
    with pytest.raises(tune.SearchError, match="must keep rate 8"):
        rate_search(two_stage={"workload": {"request_rate": [2]}, "top": 2})
    assert sla_search(two_stage={"workload": {"output_len": 32}, "top": 2}).short.sla_search == (1.0, 32.0)
    assert rate_search(two_stage={"workload": {"requests": 8}, "top": 2}).short.request_rate == (2.0, 8.0)


def result(best, goodput: float, ttft: float) -> dict:
    """A benchmark result of request-rate levels 2 and 8 and an SLA search (bench.run_benchmark's shape)."""
    levels = [
        {"concurrency": 16, "request_rate": rate, "label": f"{rate} req/s", "goodput_req_s": g, "ttft_ms": {"p99": t}}
        for rate, g, t in ((2, 2.0, 100.0), (8, goodput, ttft))
    ] + [{"concurrency": 4, "request_rate": None, "label": "c=4", "goodput_req_s": 3.0}]
    probes = [{"rate": 1.0, "sla_met": best is not None}]
    return {"levels": levels, "sla_search": {"best_rate": best, "probes": probes}}


def test_goodput_and_the_sla_rate_are_read_from_the_result():
    m = figures.level_metrics(result(5.6, 7.5, 900.0))
    assert m["sla"] == {"sla_rate_req_s": 5.6}
    assert (m["rate=8"]["goodput_req_s"], m["rate=8"]["ttft_p99_ms"], m["4"]["goodput_req_s"]) == (7.5, 900.0, 3.0)
    assert figures.level_metrics(result(None, 1.0, 900.0))["sla"] == {"sla_rate_req_s": 0.0}  # even LOW broke the SLA
    assert "sla" not in figures.level_metrics({"levels": [], "sla_search": None})


class SlaDeploy(ModelDeploy):
    """The model's candidates measured as request-rate runs with an SLA search: pcie-ipc holds the highest rate,
    nextn's goodput at 8 req/s is best but its TTFT breaks the limit."""

    def __call__(self, p, workload, stage, repeat):
        self.calls.append((p.candidate.index, stage, repeat))
        ch = p.candidate.choices
        best = 4.0 * (2 if ch["allreduce"] == "pcie-ipc" else 1) * (0.5 if ch["moe-runner-backend"] == "triton" else 1)
        goodput = 6.0 + (1.5 if ch["spec"] == "nextn" else 0)
        ttft = 2000.0 if ch["spec"] == "nextn" else 500.0
        metrics = {"lab-1": figures.level_metrics(result(best, goodput, ttft))}
        return {"status": tune.OK, "metrics": metrics, "emulated": True}


def test_a_search_ranks_by_the_sla_rate_and_goodput_within_the_limits(tmp_path):
    s = sla_search(limits=[{"metric": "sla_rate_req_s", "min": 3}])
    planned = tune.plan(s, tune.expand(s)[0], [host()])
    out = tune.run_search(s, planned, [], SlaDeploy(), tune.Store(tmp_path / "sla"))
    rate_rank = out.rankings["sla_rate_req_s (SLA search)"]
    assert rate_rank[0]["median"] == 8.0 and "allreduce=pcie-ipc" in rate_rank[0]["label"]
    assert [r["median"] for r in rate_rank if not r["within_limits"]] == [2.0] * 2  # triton without pcie-ipc
    md = tune_report.markdown(out, plot_name=None)
    assert "## sla_rate_req_s (SLA search) (max)" in md and "sla_rate_req_s (SLA search) >= 3" in md
    assert "- Workload: SLA search 1-32 req/s (at most 16 in flight)" in md and '"ttft_p99_ms": 2000' in md
    s = rate_search()
    planned = tune.plan(s, tune.expand(s)[0], [host()])
    out = tune.run_search(s, planned, [], SlaDeploy(), tune.Store(tmp_path / "rates"))
    good = out.rankings["goodput_req_s @ 8 req/s"]
    assert all(r["within_limits"] == ("spec=nextn" not in r["label"]) for r in good)
    assert good[0]["median"] == 6.0 and not good[-1]["within_limits"] and good[-1]["median"] == 7.5
    assert "ttft_p99_ms @ 8 req/s <= 1500 (got 2000.0)" in good[-1]["limits_broken"]
    assert "## goodput_req_s @ 8 req/s (max)" in tune_report.markdown(out, plot_name=None)


def test_a_limit_on_the_sla_rate():
    s = sla_search(limits=[{"metric": "sla_rate_req_s", "min": 6}])
    assert s.limits[0].text == "sla_rate_req_s (SLA search) >= 6" and s.limits[0].level == "sla"
    assert s.limits[0].holds(8.0) and not s.limits[0].holds(4.0)


def test_run_keys_of_closed_loop_searches_stay_and_a_changed_dataset_is_measured_again(tmp_path):
    from sglang_deploy.tune.planning import run_key

    w = tune.parse_search(SEARCH).workload
    before = {"concurrency": [1, 32], "input_len": 64, "output_len": 32, "requests": 4, "warmup": 2}
    doc = {"candidate": "k", "workload": before, "vars": {}, "repeat": 0}
    # the key a search stored before the workload took datasets and rates: its runs still resume
    assert run_key("k", w, {}, 0) == hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]
    assert run_key("k", rate_search().workload, {}, 0) != run_key("k", w, {}, 0)
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "a b"}]}) + "\n")
    custom = {**SEARCH["workload"], "dataset_name": "custom", "dataset_path": str(data)}
    first = run_key("k", tune.parse_search({**SEARCH, "workload": custom}).workload, {}, 0)
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "other words"}]}) + "\n")
    assert run_key("k", tune.parse_search({**SEARCH, "workload": custom}).workload, {}, 0) != first


def test_runs_of_rates_stored_before_the_arrivals_were_bench_servings_are_measured_again():
    """A rate or SLA workload's run key names how its arrivals are drawn (bench.ARRIVALS), so runs stored before
    (other gaps for the same seed) are not resumed into a comparison with new ones; closed-loop keys stay."""
    import dataclasses

    from ansible_collections.sglang.deploy.plugins.module_utils import bench
    from sglang_deploy.tune.planning import run_key

    for work in (rate_search().workload, sla_search().workload):
        assert work.key_fields()["arrivals"] == bench.ARRIVALS
        old = {k: v for k, v in work.key_fields().items() if k != "arrivals"}
        doc = {"candidate": "k", "workload": old, "vars": {}, "repeat": 0}
        stored = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:20]
        assert run_key("k", work, {}, 0) != stored
    assert "arrivals" not in tune.parse_search(SEARCH).workload.key_fields()
    only_inf = dataclasses.replace(rate_search().workload, request_rate=(math.inf,))
    assert "arrivals" not in only_inf.key_fields()  # all at once: no gap is drawn


def test_the_same_dataset_file_from_another_folder_keeps_the_run_key(tmp_path, monkeypatch):
    """The key holds the file's sha256, not its path: a copy in another clone resumes the stored runs."""
    from sglang_deploy.tune.planning import run_key

    keys = []
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "a"}]}) + "\n")
        monkeypatch.chdir(tmp_path / folder)
        custom = {**SEARCH["workload"], "dataset_name": "custom", "dataset_path": "t.jsonl"}
        work = tune.parse_search({**SEARCH, "workload": custom}).workload
        assert work.dataset_path == str(tmp_path / folder / "t.jsonl")  # the role still copies it from there
        keys.append(run_key("k", work, {}, 0))
    assert keys[0] == keys[1]


def test_the_sla_example_search_parses():
    from sglang_deploy.paths import REPO

    s = tune.load_search(REPO / "examples" / "tune-sla.yml")
    assert [o.name for o in s.objectives] == ["sla_rate_req_s (SLA search)"] and s.workload.levels() == ["sla"]
    assert s.workload.extravars()["sglang_benchmark_sla_search"] == [1.0, 32.0] and len(tune.expand(s)[0]) == 4
