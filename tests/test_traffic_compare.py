"""A trace's replay as compare and tune read it (issue 51): its own level key `trace` (not the concurrency of its cap,
which a closed-loop level owns, nor rate=inf), objectives at it, and the reports' lengths from the trace's figures
instead of the unused input_len/output_len."""

from __future__ import annotations

import pytest

from sglang_deploy.api.results import HostOutcome, RunResult
from sglang_deploy.compare import compare_report, figures
from ansible_collections.sglang.deploy.plugins.module_utils.bench import table, trace
from sglang_deploy.tune import measures, searchfile


def _level(concurrency, ok: float) -> dict:
    return {
        "concurrency": concurrency,
        "request_rate": None,
        "label": "trace" + (f" (c<={concurrency})" if concurrency else ""),
        "requests": 4,
        "completed": 4,
        "failed": 0,
        "output_throughput_tok_s": ok,
    }


def _run(profile: str, res: dict) -> RunResult:
    data = {"sglang_benchmark": {"h": res}}
    return RunResult("site.yml", "successful", 0, {"h": HostOutcome(ok=1)}, profile=profile, data=data)


def _records() -> list:
    return [trace.Record(i * 100.0, 600 + i, 5, (0, 1 + i)) for i in range(4)]


def _result(concurrency=4, ok: float = 100.0) -> dict:
    workload = {"dataset_name": "trace", "mode": "trace", "rows": 4, "trace_time_scale": 1.0, "trace_loops": 1}
    workload |= {"dataset_path": "/x/captured.jsonl", "trace_summary": trace.brief(_records())}
    workload |= {"input_len": 256, "output_len": 256}
    return {"workload": workload, "levels": [_level(concurrency, ok)]}


@pytest.mark.parametrize("cap", [None, 4])
def test_a_trace_level_has_its_own_key_whatever_its_cap(cap):
    res = _result(cap)
    assert list(figures.level_metrics(res)) == ["trace"]
    assert figures.metric_value({"metrics": {"h": figures.level_metrics(res)}}, "output_tok_s", "trace") == 100.0
    assert figures.level_text("trace") == "the trace"
    res["levels"][0]["failed"] = 1
    assert figures.measurement_problem(True, {"h": res}, "trace") == "1 benchmark requests failed at the trace (on h)"
    # a closed-loop level of the same concurrency keeps its key
    closed = {"workload": {"mode": "concurrency"}, "levels": [_level(4, 1.0)]}
    assert list(figures.level_metrics(closed)) == ["4"]


def test_tune_and_compare_objectives_read_the_trace_level():
    w = measures.Workload(dataset_name="trace", dataset_path="/x/captured.jsonl", trace_time_scale=2.0)
    assert w.levels() == ["trace"]
    assert w.describe() == "trace replay (time x2, 1 loop(s)); dataset trace /x/captured.jsonl, seed 42"
    obj = searchfile.objective({"metric": "output_tok_s"}, "objectives[0]", w)
    assert (obj.level, obj.name) == ("trace", "output_tok_s @ trace")
    lim = searchfile.limit(measures.parse_measure("ttft_p99_ms<=500", bounded=True), "--require x", w)
    assert lim.level == "trace" and lim.text == "ttft_p99_ms @ trace <= 500"
    with pytest.raises(searchfile.SearchError, match="a trace is replayed as one level: no @c=N or @rate=R"):
        searchfile.objective(measures.parse_measure("output_tok_s@c=4"), "--objective output_tok_s@c=4", w)


def test_the_reports_give_the_traces_figures_not_in_256_out_256():
    res = _result()
    text = table.describe(res["workload"])
    assert text == (
        "trace captured.jsonl (4 requests, time x1.0: 10.00 req/s, in p50 602 out p50 5 tokens, prefix reuse 0.38)"
    )
    runs = {name: _run(name, r) for name, r in (("a", res), ("b", _result(ok=90.0)))}
    comp = compare_report.build_comparison(["a", "b"], runs)
    out = compare_report.format_table(comp)
    assert "in=256" not in out and text in out and "trace (c<=4)" in out
    assert f"- Workload: {text} (forced)" in compare_report.markdown(comp, None)
    # a hostile summary is shown as "-", never a traceback
    res["workload"]["trace_summary"] = {"rate_req_s": "x", "input_length_p50": True}
    assert "- req/s, in p50 -" in table.describe(res["workload"])


def test_a_trace_replayed_faster_says_the_rate_it_is_scheduled_at():
    workload = _result()["workload"] | {"trace_time_scale": 0.5}
    assert "time x0.5: 10.00 req/s in the trace, 20.00 scheduled, in p50" in table.describe(workload)


def test_a_search_file_takes_a_trace_workload_without_concurrency_levels(tmp_path):
    path = trace.write(_records(), str(tmp_path / "captured.jsonl"))
    doc = {"name": "t", "base": "baseline", "axes": {"launch": {"a": {}, "b": {"args": {"enable-mscclpp": True}}}}}
    doc["workload"] = {"dataset_name": "trace", "dataset_path": path, "trace_time_scale": 2.0, "max_concurrency": 8}
    doc |= {"objectives": [{"metric": "output_tok_s"}], "limits": [{"metric": "ttft_p99_ms", "max": 2000}]}
    search = searchfile.parse_search(doc, "t", str(tmp_path / "search.yml"))
    assert search.workload.levels() == ["trace"] and [o.level for o in search.objectives] == ["trace"]
    assert search.workload.extravars()["sglang_benchmark_trace_time_scale"] == 2.0
