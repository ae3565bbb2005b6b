"""Profile comparison (sglang_deploy.compare.compare_report) on synthetic benchmark results."""

from __future__ import annotations

import pytest

from sglang_deploy.compare import compare_report, figures
from ansible_collections.sglang.deploy.plugins.module_utils import bench
from sglang_deploy.api import Failure, HostOutcome, RunResult

HOST = "gpu-1"


def level(
    concurrency: int, decode_tok_s: float, ttft_s: float, accept: float | None = None, n: int = 4, out: int = 32
) -> dict:
    """A level measured by bench.level_metrics from synthetic timelines: `concurrency` requests at a time."""
    timelines = []
    for i in range(n):
        t_send = (i // concurrency) * (ttft_s + out / decode_tok_s)
        first = t_send + ttft_s
        times = [first + k / decode_tok_s for k in range(out)]
        timelines.append(bench.Timeline(t_send=t_send, t_end=times[-1], token_times=times, completion_tokens=out))
    m = bench.level_metrics(timelines, concurrency, out)
    m["spec_accept_length"] = {"value": accept, "source": "metrics_delta"} if accept else None
    return m


def result(levels: list, emulated: bool = False) -> dict:
    return {
        "server_emulated": emulated,
        "levels": levels,
        "workload": {"input_len": 256, "output_len": 32, "requests_per_level": {"1": 4, "4": 4}},
    }


def run(profile: str, res: dict | None, failure: str | None = None) -> RunResult:
    r = RunResult(
        playbook="site.yml",
        status="failed" if failure else "successful",
        rc=2 if failure else 0,
        hosts={HOST: HostOutcome(ok=30, failed=1 if failure else 0)},
        profile=profile,
        data={"sglang_benchmark": {HOST: res}} if res else {},
        artifacts=f"/tmp/{profile}",
    )
    if failure:
        r.failures = [Failure(HOST, "Wait for the server to be ready and to answer sanely", failure, "sglang_ready")]
    return r


@pytest.fixture
def comparison() -> compare_report.Comparison:
    runs = {
        "baseline": run("baseline", result([level(1, 100.0, 0.10), level(4, 80.0, 0.12)])),
        "nextn": run("nextn", result([level(1, 250.0, 0.09, accept=2.5), level(4, 160.0, 0.11, accept=2.4)])),
        "broken": run("broken", None, failure="Profile broken did not come up: exited 1\nTraceback ..."),
    }
    return compare_report.build_comparison(["baseline", "nextn", "broken"], runs)


def row(comp, profile, c):
    return next(r for r in comp.rows if r["profile"] == profile and r["concurrency"] == c)


def test_rows_carry_the_figures_of_each_level(comparison):
    assert [(r["concurrency"], r["profile"]) for r in comparison.rows] == [
        (1, "baseline"),
        (1, "nextn"),
        (1, "broken"),
        (4, "baseline"),
        (4, "nextn"),
        (4, "broken"),
    ]
    r = row(comparison, "nextn", 1)
    assert r["decode_tok_s"] == pytest.approx(250.0)
    assert r["ttft_p50_ms"] == pytest.approx(90.0)
    assert r["accept_length"] == 2.5
    assert r["output_tok_s"] > 0
    assert row(comparison, "baseline", 4)["accept_length"] is None


def test_ratios_are_to_the_first_profile(comparison):
    assert row(comparison, "baseline", 1)["decode_ratio"] == pytest.approx(1.0)
    assert row(comparison, "nextn", 1)["decode_ratio"] == pytest.approx(2.5)
    assert row(comparison, "nextn", 4)["decode_ratio"] == pytest.approx(2.0)
    out_base = row(comparison, "baseline", 4)["output_tok_s"]
    assert row(comparison, "nextn", 4)["output_ratio"] == pytest.approx(
        row(comparison, "nextn", 4)["output_tok_s"] / out_base
    )
    assert row(comparison, "broken", 4)["decode_ratio"] is None and row(comparison, "broken", 4)["missing"]


def test_failed_profile_makes_the_comparison_fail(comparison):
    assert not comparison.ok
    assert list(comparison.failures()) == ["broken"]
    table = compare_report.format_table(comparison)
    assert "broken: FAILED on gpu-1, task 'Wait for the server to be ready and to answer sanely'" in table
    assert "no result" in table


def test_table_and_markdown(comparison):
    table = compare_report.format_table(comparison)
    assert compare_report.SYNTHETIC_NOTE not in table
    nextn_1 = next(line for line in table.splitlines() if line.split()[:2] == ["c=1", "nextn"])
    assert "250.0" in nextn_1 and "2.50" in nextn_1
    md = compare_report.markdown(comparison)
    assert "| c=1 | nextn |" in md and "![output and decode tok/s against concurrency](compare.png)" in md
    assert "## Failures" in md and "Traceback ..." in md


def test_incomparable_workloads_are_not_ranked():
    """Results of another dataset, seed or mode are shown side by side but get no ratio."""
    other = result([level(1, 250.0, 0.09), level(4, 160.0, 0.11)])
    other["workload"] = {**other["workload"], "dataset_name": "sharegpt", "dataset_sha256": "ab" * 32}
    comp = compare_report.build_comparison(
        ["baseline", "other"],
        {"baseline": run("baseline", result([level(1, 100.0, 0.1)])), "other": run("other", other)},
    )
    assert comp.workload["differs"] == "dataset_name" and not comp.workload["same_for_all"]
    assert all(r["decode_ratio"] is None and r["output_ratio"] is None for r in comp.rows)
    assert "NOT RANKED: the profiles ran different workloads (dataset_name differs)" in compare_report.format_table(
        comp
    )
    assert "differs between profiles: dataset_name; not ranked" in compare_report.markdown(comp)


def test_answers_counted_otherwise_are_not_ranked():
    """The same dataset whose recorded answers one host counted with the server's tokenizer and another in words
    asks for other output lengths: not the same workload."""
    counted = {}
    for name, how in (("baseline", "server tokens (/v1/tokenize)"), ("other", "words x tokens_per_word")):
        counted[name] = result([level(1, 100.0, 0.1)])
        counted[name]["workload"] = {**counted[name]["workload"], "dataset_name": "sharegpt", "answer_lengths": how}
    comp = compare_report.build_comparison(
        ["baseline", "other"], {name: run(name, res) for name, res in counted.items()}
    )
    assert comp.workload["differs"] == "answer_lengths" and comp.rows[1]["output_ratio"] is None


def test_rate_levels_goodput_and_the_sla_rate_are_compared():
    def rated(rate: float, goodput: float, best: float) -> dict:
        m = level(4, 100.0, 0.1)
        m.update(label=f"{rate:g} req/s (c<=4)", request_rate=rate, goodput_req_s=goodput)
        res = result([m])
        res["sla_search"] = {"best_rate": best}
        return res

    runs = {"a": run("a", rated(2.0, 1.5, 4.0)), "b": run("b", rated(2.0, 1.9, 8.0))}
    comp = compare_report.build_comparison(["a", "b"], runs)
    assert [(r["level"], r["profile"], r["goodput_req_s"]) for r in comp.rows] == [
        ("2 req/s (c<=4)", "a", 1.5),
        ("2 req/s (c<=4)", "b", 1.9),
    ]
    assert comp.sla == {"a": {HOST: 4.0}, "b": {HOST: 8.0}}
    assert "b on gpu-1: highest rate meeting the SLA 8.00 req/s" in compare_report.format_table(comp)
    assert "Highest request rate meeting the SLA" in compare_report.markdown(comp)


def test_emulated_results_are_labelled(tmp_path):
    runs = {
        p: run(p, result([level(1, s, 0.08), level(4, s * 0.8, 0.08)], emulated=True))
        for p, s in (("a", 100.0), ("b", 120.0))
    }
    comp = compare_report.build_comparison(["a", "b"], runs)
    assert comp.emulated and comp.ok
    assert compare_report.format_table(comp).splitlines()[0] == compare_report.SYNTHETIC_NOTE
    assert compare_report.SYNTHETIC_NOTE in compare_report.markdown(comp)


def test_write_report_makes_markdown_png_and_json(comparison, tmp_path):
    out = compare_report.write_report(comparison, tmp_path / "cmp")
    png = (out / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert (out / "report.md").read_text().startswith("# SGLang profile comparison: baseline vs nextn vs broken")
    assert '"profiles": [' in (out / "comparison.json").read_text()


def test_no_plot_without_figures(tmp_path):
    runs = {p: run(p, None, failure="boom") for p in ("a", "b")}
    out = compare_report.write_report(compare_report.build_comparison(["a", "b"], runs), tmp_path / "cmp")
    assert not (out / "compare.png").exists()
    assert "compare.png" not in (out / "report.md").read_text()


def test_a_fleet_is_compared_per_host_and_through_the_router(tmp_path):
    """Per-host smoke results of two replicas and the sweep through the router, labelled apart."""
    runs = {}
    for name, speed in (("baseline", 100.0), ("nextn", 200.0)):
        r = run(name, None)
        per_host = result([level(4, speed, 0.1)], emulated=True)
        through = result([level(1, speed, 0.1), level(4, speed * 0.9, 0.1)], emulated=True)
        through["workload"] = {"input_len": 256, "output_len": 256, "requests_per_level": {"1": 8, "4": 8}}
        through["context"] = {"through_router": True, "replicas": {"gpu-1": {}, "gpu-2": {}}}
        r.data = {
            "sglang_benchmark": {"gpu-1": per_host, "gpu-2": per_host},
            "sglang_fleet_benchmark": {"router-1": through},
        }
        runs[name] = r
    comp = compare_report.build_comparison(["baseline", "nextn"], runs)
    assert comp.targets == [("gpu-1", "host"), ("gpu-2", "host"), ("router-1", "router")]
    assert comp.routers == {"router-1": ["gpu-1", "gpu-2"]}
    routed = [(r["concurrency"], r["profile"]) for r in comp.rows if r["via"] == "router"]
    assert routed == [(1, "baseline"), (1, "nextn"), (4, "baseline"), (4, "nextn")]
    assert next(r for r in comp.rows if r["via"] == "router" and r["profile"] == "nextn")["decode_ratio"] == (
        pytest.approx(2.0)
    )
    # The per-host workload is not mixed with the router's (another sweep).
    assert comp.workload["same_for_all"] and comp.workload["output_len"] == 32
    assert comp.router_workload["output_len"] == 256
    table = compare_report.format_table(comp).splitlines()
    assert table[0] == compare_report.SYNTHETIC_NOTE
    assert "host gpu-1 (on its own, out of the router)" in table
    assert "through router router-1 (the aggregate its clients see: 2 replicas)" in table
    out = compare_report.write_report(comp, tmp_path / "cmp")
    md = (out / "report.md").read_text()
    assert "## through router router-1 (the aggregate its clients see: 2 replicas)" in md
    assert "- Through router `router-1` (the aggregate its clients see): replicas gpu-1, gpu-2" in md
    assert (out / "compare.png").stat().st_size > 10_000


def test_profiles_are_ranked_by_the_sla_rate_and_goodput_within_the_limits():
    from sglang_deploy import tune

    def rated(goodput: float, best: float | None, decode: float) -> dict:
        m = level(4, decode, 0.1)
        m.update(label="8 req/s (c<=4)", request_rate=8.0, goodput_req_s=goodput)
        res = result([m])
        res["sla_search"] = {"best_rate": best, "probes": [{"rate": 1.0}]}
        return res

    runs = {
        "a": run("a", rated(1.5, 4.0, 100.0)),
        "b": run("b", rated(1.9, 8.0, 20.0)),
        "c": run("c", rated(1.2, None, 100.0)),
    }
    work = tune.Workload(request_rate=(8.0,), max_concurrency=4, slo={"ttft_p99_ms": 500})
    objectives = [tune.Objective("sla_rate_req_s", None, "max"), tune.Objective("goodput_req_s", None, "max", 8.0)]
    limits = [tune.Limit("decode_tok_s", None, min=50.0, rate=8.0)]
    assert [o.level for o in objectives] == ["sla", "rate=8"] and work.levels() == ["rate=8"]
    comp = compare_report.build_comparison(["a", "b", "c"], runs, objectives=objectives, limits=limits)
    sla = comp.rankings["sla_rate_req_s (SLA search)"]
    assert [(r["profile"], r["value"], r["within_limits"]) for r in sla] == [
        ("a", 4.0, True),
        ("c", 0.0, True),  # even the search's lowest rate broke the SLA
        ("b", 8.0, False),  # the highest rate, but its decode speed is under the limit
    ]
    assert sla[2]["ratio"] == 2.0 and sla[2]["limits_broken"] == ["decode_tok_s @ 8 req/s >= 50 (got 20.00)"]
    good = comp.rankings["goodput_req_s @ 8 req/s"]
    assert [r["profile"] for r in good] == ["a", "c", "b"] and good[1]["ratio"] == pytest.approx(0.8)
    text = compare_report.format_table(comp)
    assert "ranked by sla_rate_req_s (SLA search) (max) within decode_tok_s @ 8 req/s >= 50: 1. a 4.00, " in text
    assert "3. b 8.00 (x2.00) [over: decode_tok_s @ 8 req/s >= 50 (got 20.00)]" in text
    assert "- Ranked by goodput_req_s @ 8 req/s (max)" in compare_report.markdown(comp)
    assert comp.to_dict()["rankings"]["goodput_req_s @ 8 req/s"][0]["profile"] == "a"
    for name in "ab":  # rates drawn as bench_serving draws them, c's by an older release (no `arrivals`)
        runs[name].data["sglang_benchmark"][HOST]["workload"]["arrivals"] = bench.ARRIVALS
    comp = compare_report.build_comparison(["a", "b", "c"], runs, objectives=objectives)
    assert comp.rankings == {} and comp.workload["differs"] == "arrivals"
    runs["c"].data["sglang_benchmark"][HOST]["workload"]["arrivals"] = bench.ARRIVALS
    assert compare_report.build_comparison(["a", "b", "c"], runs, objectives=objectives).rankings
    runs["c"].data["sglang_benchmark"][HOST]["workload"]["seed"] = 7  # an incomparable workload: nothing ranked
    comp = compare_report.build_comparison(["a", "b", "c"], runs, objectives=objectives)
    assert comp.rankings == {} and "not ranked, the workloads differ" in compare_report.format_table(comp)


def test_only_measurements_on_the_first_profiles_hosts_are_ranked():
    """tune's rule: a profile whose deploy failed, or with requests that failed at the ranked level, is no
    measurement; one measured on other hosts averages other hosts. Each is listed as not ranked, with why."""
    from sglang_deploy import tune

    def measured(decode: float, failed: int = 0) -> dict:
        m = level(4, decode, 0.1)
        m.update(failed=failed, completed=m["requests"] - failed)
        return result([level(1, decode, 0.1), m])

    runs = {
        "a": run("a", measured(100.0)),
        "broke": run("broke", measured(900.0), failure="the restart after the benchmark failed"),
        "partial": run("partial", measured(800.0, failed=3)),
        "wider": run("wider", measured(700.0)),
        "slower": run("slower", measured(50.0)),
    }
    runs["wider"].data["sglang_benchmark"]["gpu-2"] = measured(10.0)
    objectives = [tune.Objective("output_tok_s", 4, "max"), tune.Objective("output_tok_s", 1, "max")]
    comp = compare_report.build_comparison(list(runs), runs, objectives=objectives)
    at4 = comp.rankings["output_tok_s @ c=4"]
    assert [(r["profile"], r["rank"]) for r in at4] == [
        ("a", 1),
        ("slower", 2),
        ("broke", None),
        ("partial", None),
        ("wider", None),
    ]
    assert [r["not_ranked"] for r in at4[2:]] == [
        "the deploy failed",
        "3 benchmark requests failed at c=4 (on gpu-1)",
        "measured on gpu-1, gpu-2, the first profile a on gpu-1",
    ]
    at1 = comp.rankings["output_tok_s @ c=1"]  # its requests at c=1 all answered
    assert [r["profile"] for r in at1 if r["rank"]] == ["partial", "a", "slower"]
    text = compare_report.format_table(comp)
    assert "; not ranked: broke (the deploy failed), partial (3 benchmark requests failed at c=4 (on gpu-1))" in text
    assert "not ranked: broke (the deploy failed)" in compare_report.markdown(comp)
    assert comp.to_dict()["rankings"]["output_tok_s @ c=4"][3]["not_ranked"].startswith("3 benchmark requests")


def test_an_sla_search_that_stopped_early_is_not_ranked_as_zero():
    from sglang_deploy import tune

    def searched(best: float | None, failed: int = 0) -> dict:
        m = level(4, 100.0, 0.1)
        m.update(label="1 req/s (c<=4)", request_rate=1.0, goodput_req_s=0.5, failed=failed)
        m["completed"] = m["requests"] - failed
        res = result([m])
        res["sla_search"] = {"best_rate": best, "probes": [{"rate": 1.0}]}
        res["stopped"] = "no answer within the timeout" if failed else None
        return res

    runs = {"a": run("a", searched(None)), "died": run("died", searched(None, failed=4))}
    comp = compare_report.build_comparison(
        ["a", "died"], runs, objectives=[tune.Objective("sla_rate_req_s", None, "max")]
    )
    ranking = comp.rankings["sla_rate_req_s (SLA search)"]
    assert [(r["profile"], r["value"], r["rank"]) for r in ranking] == [("a", 0.0, 1), ("died", None, None)]
    assert ranking[1]["not_ranked"] == "4 benchmark requests failed in the SLA search (on gpu-1)"
    assert figures.level_metrics(runs["died"].benchmarks[HOST])["sla"] == {"sla_rate_req_s": None}


def test_the_report_names_the_order_of_the_deploys_when_it_is_not_the_order_given():
    runs = {p: run(p, result([level(1, 100.0, 0.10)])) for p in ("b", "a")}
    moved = compare_report.markdown(compare_report.build_comparison(["a", "b"], runs, measured_order=["b", "a"]))
    assert "Deployed in this order: b, a (each round the reverse of the one before, the profile the hosts" in moved
    kept = compare_report.markdown(compare_report.build_comparison(["a", "b"], runs, measured_order=["a", "b"]))
    assert "Deployed in this order" not in kept
    assert compare_report.build_comparison(["a", "b"], runs, measured_order=["b", "a"]).to_dict()["measured_order"] == [
        "b",
        "a",
    ]


def _repeated(decodes: dict) -> dict:
    """profile -> one run per decode speed given (c=1), as compare's repeats give them."""
    return {p: [run(p, result([level(1, d, 0.10)])) for d in speeds] for p, speeds in decodes.items()}


def test_repeats_give_each_figure_its_spread_and_each_profile_a_verdict_against_the_first(tmp_path):
    runs = _repeated({"a": [100.0, 101.0, 99.0], "same": [100.5, 99.5, 100.0], "fast": [120.0, 121.0, 119.0]})
    comp = compare_report.build_comparison(["a", "same", "fast"], runs, measured_order=list("a s f f s a a s f"))
    assert comp.repeats == 3 and comp.ok
    a, same, fast = (row(comp, p, 1) for p in ("a", "same", "fast"))
    assert a["spread"]["decode_tok_s"]["n"] == 3 and a["values"]["decode_tok_s"] == pytest.approx([100, 101, 99])
    assert a["decode_tok_s"] == pytest.approx(100.0) and a["vs_first"] == {}
    assert same["vs_first"]["decode_tok_s"]["verdict"] == "no difference"
    assert fast["vs_first"]["decode_tok_s"]["verdict"] == "better" and fast["decode_ratio"] == pytest.approx(1.2)
    assert fast["vs_first"]["decode_tok_s"]["low"] > 1.15
    text = compare_report.format_table(comp)
    assert "median (min-max) over 3 repeats" in text
    assert "100.0 (99.0-101.0)" in text  # a's decode speed
    assert "c=1 same: out tok/s x" in text and "no difference at this noise" in text
    assert "c=1 fast: out tok/s x" in text and "dec tok/s x1.200" in text and "better than a" in text
    md = compare_report.markdown(comp)
    assert "Against **a**:" in md and "| deploy a (3/3) | successful |" in md
    out = compare_report.write_report(comp, tmp_path / "cmp")
    doc = __import__("json").loads((out / "comparison.json").read_text())
    assert doc["repeats"] == 3 and doc["rows"][1]["vs_first"]["decode_tok_s"]["verdict"] == "no difference"
    assert (out / "compare.png").stat().st_size > 10_000


def test_one_run_each_says_there_is_no_verdict():
    comp = compare_report.build_comparison(["a", "b"], _repeated({"a": [100.0], "b": [150.0]}))
    assert row(comp, "b", 1)["vs_first"]["decode_tok_s"]["why"] == "one run a side: no spread measured"
    assert "1 run per profile: too few for a verdict (--repeats 3 or more for one)" in compare_report.format_table(comp)


def test_a_profile_within_the_noise_of_the_leader_is_ranked_tied():
    from sglang_deploy import tune

    runs = _repeated({"a": [100.0, 104.0, 97.0], "b": [102.0, 98.0, 105.0], "c": [60.0, 61.0, 59.0]})
    objectives = [tune.Objective("decode_tok_s", 1, "max")]
    comp = compare_report.build_comparison(["a", "b", "c"], runs, objectives=objectives)
    rows = comp.rankings[objectives[0].name]
    assert [(r["profile"], r.get("tied")) for r in rows] == [("b", None), ("a", True), ("c", False)]
    assert rows[2]["vs_leader"]["verdict"] == "worse"
    text = compare_report.format_table(comp)
    assert "1. b 102.00 (98.00-105.00) (x1.02), 2. a 100.00 (97.00-104.00) [tied with the leader at this noise]" in text


def _unsound(how: str) -> dict:
    """A sound result spoilt as a hostile or broken host might publish it."""
    good = result([level(1, 100.0, 0.10)])
    if how == "string":
        return "a benchmark result"
    if how == "inf":
        good["levels"][0]["output_throughput_tok_s"] = float("inf")
    elif how == "level":
        good["levels"][0] = ["not", "a", "level"]
    elif how == "completed":
        good["levels"][0]["completed"] = "4"
    elif how == "many":
        good["levels"] = good["levels"] * 10_000
    return good


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("string", "a JSON str, not a benchmark result (an object)"),
        ("inf", "level 1: output_throughput_tok_s is inf, not a finite number >= 0"),
        ("level", "level 1: a JSON list, not an object"),
        ("completed", "level 1: requests and completed must be counts, completed <= requests, got 4 and '4'"),
        ("many", "10000 levels, more than the 128 compare and tune read: benchmark fewer levels"),
    ],
)
def test_an_unsound_result_is_dropped_with_its_reason_and_the_sound_runs_kept(how, why, tmp_path):
    """A host's benchmark result was read unchecked: a string, `inf` or a malformed level crashed compare at the end
    (the report lost), 10,000 levels took 366 s (issue 48 R7). The unsound one is dropped, its reason shown; the
    sound runs of the profile are kept."""
    import json
    import time

    runs = _repeated({"a": [100.0, 101.0, 99.0], "b": [100.5, 99.5, 100.0]})
    runs["b"][1].data["sglang_benchmark"][HOST] = _unsound(how)
    t0 = time.monotonic()
    comp = compare_report.build_comparison(["a", "b"], runs)
    assert time.monotonic() - t0 < 60  # guards the 366 s of reading every level before the refusal, not speed
    line = f"b (deploy 2/3) on {HOST}: benchmark result dropped: {why}"
    assert comp.dropped() == [line] and row(comp, "b", 1)["runs"] == 2
    assert line in compare_report.format_table(comp) and f"- {line}" in compare_report.markdown(comp)
    out = compare_report.write_report(comp, tmp_path / "cmp")
    assert json.loads((out / "comparison.json").read_text())["dropped"] == [line]


def test_a_repeat_of_inf_is_no_verdict_where_it_was_called_better():
    """Mixed `inf` among the repeats gave the interval [0.750, 0.000] and the verdict "better"; dropped, the two
    runs left on that side are too few for a verdict (noise.MIN_RUNS a side)."""
    runs = _repeated({"a": [100.0, 101.0, 99.0], "b": [75.0, 76.0, 74.0]})
    for r in runs["b"][:1]:
        r.data["sglang_benchmark"][HOST]["levels"][0]["decode_tok_s_per_request"]["mean"] = float("inf")
    v = row(compare_report.build_comparison(["a", "b"], runs), "b", 1)["vs_first"]["decode_tok_s"]
    assert v["verdict"] == "no difference" and v["n"] == 2 and v["low"] <= v["high"]


def _gated(res: dict, passed: bool, problem: str = "") -> dict:
    quality = {
        "passed": passed,
        "mode": "report",
        "problems": [problem] if problem else [],
        "answers": {"score": 1.0 if passed else 0.5},
        "drift": {"agreement": 1.0},
    }
    return {**res, "context": {"deployed": {"quality": quality}}}


def test_a_profile_that_does_not_answer_right_is_never_the_leader_whatever_its_speed():
    """Issue 49: fast-wrong is the fastest, but its gate failed (report mode: its deploy went on; enforce: the deploy
    failed and rolled back); slow-right leads, and the table, report and JSON say why."""
    from sglang_deploy import tune

    wrong = "answers: score 0.50 under the pass mark 0.80; 'What is 17 + 25?' expected '42', got '43'"
    runs = {
        "slow-right": [run("slow-right", _gated(result([level(4, 100.0, 0.1)]), True)) for _ in range(3)],
        "fast-wrong": [run("fast-wrong", _gated(result([level(4, 130.0, 0.1)]), False, wrong)) for _ in range(3)],
    }
    objectives = [tune.Objective("output_tok_s", 4, "max")]
    comp = compare_report.build_comparison(["fast-wrong", "slow-right"], runs, objectives=objectives)
    ranked = comp.rankings["output_tok_s @ c=4"]
    assert [(r["profile"], r["rank"]) for r in ranked] == [("slow-right", 1), ("fast-wrong", None)]
    assert ranked[1]["not_ranked"].startswith(f"it does not answer right (quality gate on {HOST}: answers: score 0.50")
    text = compare_report.format_table(comp)
    assert "fastest that answers right: slow-right (" in text and "not counted: fast-wrong (it does not answer" in text
    assert f"quality gate fast-wrong: repeat 1: {HOST}: FAILED (answers 0.50, agreement 1.00)" in text
    assert "- Fastest that answers right: slow-right" in compare_report.markdown(comp)
    d = comp.to_dict()
    assert d["fastest_that_answers_right"].startswith("fastest that answers right: slow-right")
    assert [g[HOST]["passed"] for g in d["quality"]["fast-wrong"]] == [False] * 3
    # enforce: the gate failed the deploy (rescued, then the rollback's failure); the reason still comes through
    failed = run("fast-wrong", None, failure="Profile fast-wrong did not come up: ...")
    failed.rescued = [
        Failure(
            HOST,
            "Check that the server answers right",
            "...",
            "sglang_quality",
            quality=figures.gate.summary({"passed": False, "problems": [wrong]}),
        )
    ]
    comp = compare_report.build_comparison(
        ["fast-wrong", "slow-right"], {**runs, "fast-wrong": [failed]}, objectives=objectives
    )
    assert comp.rankings["output_tok_s @ c=4"][1]["not_ranked"].startswith("it does not answer right")
    assert "not counted: fast-wrong (it does not answer right" in compare_report.format_table(comp)


@pytest.mark.parametrize(
    "context", [{"deployed": "a string"}, {"deployed": {"quality": ["a", "list"]}}, {"deployed": None}]
)
def test_a_deployed_context_that_is_no_mapping_counts_as_no_gate(context):
    """A host's result whose context.deployed is a string crashed compare and tune at the end (issue 48, red-team
    of R7): a part that is no mapping is read as absent, the gate as not checked."""
    runs = {name: [run(name, {**result([level(4, 100.0, 0.1)]), "context": context})] for name in ("a", "b")}
    comp = compare_report.build_comparison(["a", "b"], runs)
    assert runs["a"][0].gate == {} and figures.gate.of_result(runs["a"][0].benchmarks[HOST]) is None
    assert "quality gate a: repeat 1: not checked" in compare_report.format_table(comp)
    assert figures.measurement_problem(True, runs["a"][0].benchmarks) is None


def test_a_kept_result_of_the_same_deploy_is_found_and_nothing_else(tmp_path):
    """Issue 52: a re-run that changes nothing skips its benchmark when the controller keeps a result of the same
    profile on the same launch, unit and stack (the result's context.deployed.identity)."""
    import json

    from sglang_deploy.compare import measured

    host = tmp_path / "gpu-1"
    host.mkdir()
    for stamp, profile, identity in [
        ("20261206T010000+0000", "baseline", "a"),
        ("20261206T020000+0000", "baseline", "b"),
        ("20261206T030000+0000", "nextn-baseline", "c"),
    ]:
        (host / f"{stamp}-{profile}.json").write_text(json.dumps({"context": {"deployed": {"identity": identity}}}))
    (host / "20261206T040000+0000-baseline.json").write_text('{"context": "not a mapping"}')
    assert measured.measured(str(tmp_path), "gpu-1", "baseline", "a").endswith("010000+0000-baseline.json")
    assert measured.measured(str(tmp_path), "gpu-1", "baseline", "c") == ""  # another profile's file, by its identity
    assert measured.measured(str(tmp_path), "gpu-1", "baseline", "") == ""  # no identity: nothing skipped on a guess
    assert measured.measured(str(tmp_path), "gpu-2", "baseline", "a") == ""


def test_a_hosts_control_characters_are_escaped_in_the_table_and_the_report(tmp_path):
    """A host's failure message and a gate's problem went raw into report.md and the table: an escape sequence
    retitled or cleared the terminal that showed them, an override reordered them (issue 48, red-team)."""
    hostile = "\x1b]0;pwned\x07\x1b[2J\u202egpj.exe\x9b"
    runs = {
        "a": [run("a", _gated(result([level(4, 100.0, 0.1)]), False, f"answers: {hostile}"))],
        "b": [run("b", None, failure=f"exited 1: {hostile}\nnext line {hostile}")],
    }
    comp = compare_report.build_comparison(["a", "b"], runs)
    folder = compare_report.write_report(comp, tmp_path / "cmp")
    for text in (compare_report.format_table(comp), (folder / "report.md").read_text()):
        assert not any(c in text for c in "\x1b\x07\u202e\x9b")
        assert "\\x1b]0;pwned\\x07\\x1b[2J\\u202egpj.exe\\x9b" in text and "\n" in text
