"""compare's and tune's time estimate (compare/estimate.py): each deploy, benchmark and restore from what earlier
runs on the same hosts took, else a stated guess (issue 52, item 8)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from sglang_deploy import api
from sglang_deploy.compare import estimate


def _write(path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _results(tmp_path):
    """Two benchmarks of 20 and 30 s on h; a compare on h (measured deploys of 60 and 70 s, a restore of 30 s) and
    one on another host; a tune run on h of 80 s."""
    for i, (start, end) in enumerate([("09:00:00", "09:00:20"), ("10:00:00", "10:00:30")]):
        _write(tmp_path / "h" / f"{i}.json", {"started_at": f"2026-12-06T{start}+00:00", "finished_at": f"2026-12-06T{end}+00:00"})  # fmt: skip
    run = {"hosts": {"h": {}}, "elapsed_s": 60.0}
    _write(
        tmp_path / "compare-1" / "comparison.json",
        {"runs": {"a": [run], "b": [{**run, "elapsed_s": 70.0}]}, "restores": [{**run, "elapsed_s": 30.0}]},
    )
    _write(tmp_path / "compare-2" / "comparison.json", {"runs": {"a": [{"hosts": {"other": {}}, "elapsed_s": 900}]}})
    _write(tmp_path / "tune-s" / "runs" / "k.json", {"measured": {"h": {}}, "elapsed_s": 80.0})
    return tmp_path


def test_the_figures_are_the_medians_of_the_earlier_runs_on_these_hosts(tmp_path):
    t = estimate.timings(_results(tmp_path), {"h"})
    # measured deploys 60, 70, 80 (median 70) less the median benchmark (25); the restore measured apart
    assert (t.deploy_s, t.bench_s, t.restore_s, t.runs) == (45.0, 25.0, 30.0, 4)
    assert estimate.timings(tmp_path, None).runs == 5  # any host: the other host's run too


def test_without_an_earlier_run_the_estimate_says_it_is_a_guess(tmp_path):
    t = estimate.timings(tmp_path / "none", {"h"})
    assert t == estimate.Timings() and t.runs == 0
    got = estimate.estimate(7, 6, 1, t)
    assert got["total_s"] == 7 * 45 + 6 * 25 + 45
    assert got["text"] == (
        "about 8 min: 7 deploys x ~45 s, 6 benchmarks x ~25 s, 1 restore x ~45 s; no earlier run on these hosts: "
        "a guess"
    )


def test_a_damaged_or_hostile_result_is_skipped(tmp_path):
    _write(tmp_path / "h" / "bad.json", {"started_at": "yesterday", "finished_at": 3})
    (tmp_path / "h" / "broken.json").write_text("{")
    _write(tmp_path / "compare-x" / "comparison.json", {"runs": {"a": [{"hosts": {"h": {}}, "elapsed_s": "9e9"}]}})
    assert estimate.timings(tmp_path, {"h"}) == estimate.Timings()


def test_benchmark_times_alone_do_not_make_a_measured_deploy(tmp_path):
    """A result's sweep (1.5 s on the lab) leaves out the role's work around it: with no measured deploy to split,
    the run is still a guess."""
    _write(tmp_path / "h" / "r.json", {"started_at": "2026-12-06T09:00:00+00:00", "finished_at": "2026-12-06T09:00:01.5+00:00"})  # fmt: skip
    assert estimate.timings(tmp_path, {"h"}) == estimate.Timings()


# Issue 52, item 8: a host's first compare guessed "about 7 min" and took 708.5 s on an H100, though the plain
# deploys before it were timed. Every deploy that passed and restarted a server is kept in results/<host>/deploys.json.
T0 = datetime(2026, 12, 7, 9, 0, tzinfo=timezone.utc)


def _run(rows, ok=True, elapsed=100.0, benched=(), artifacts="/runner/1/artifacts/a", profile="baseline"):
    """A site.yml run as api.results reads it: the summary's rows (host, outcome), the hosts it benchmarked."""
    return api.RunResult(
        playbook="site.yml",
        status="successful" if ok else "failed",
        rc=0 if ok else 2,
        hosts={h: api.HostOutcome(ok=9, changed=1, failed=int(not ok)) for h, _ in rows},
        failures=[] if ok else [api.Failure(host=rows[0][0], task="Wait for the server", message="no")],
        data={
            "sglang_fleet": [{"host": h, "serves": profile, "outcome": o} for h, o in rows],
            "sglang_benchmark": {h: {"levels": []} for h in benched},
        },
        artifacts=artifacts,
        elapsed_s=elapsed,
        profile=profile,
    )


def _kept(results, host) -> list:
    return json.loads((results / host / estimate.DEPLOYS).read_text())


def test_a_deploy_that_passed_is_kept_on_each_host_it_restarted(tmp_path):
    run = _run([("h1", "deployed"), ("h2", "unchanged")], elapsed=123.44, benched=["h1"])
    assert estimate.record_deploys(tmp_path, run, now=T0) == [str(tmp_path / "h1" / "deploys.json")]
    assert _kept(tmp_path, "h1") == [
        {
            "finished_at": "2026-12-07T09:00:00+00:00",
            "elapsed_s": 123.4,
            "outcome": "deployed",
            "benchmarked": True,
            "profile": "baseline",
            "artifacts": "/runner/1/artifacts/a",
        }
    ]
    assert not (tmp_path / "h2").exists()  # unchanged: its server did not restart, no deploy measured there


def test_a_failed_or_no_op_deploy_is_not_kept(tmp_path):
    assert estimate.record_deploys(tmp_path, _run([("h", "deployed")], ok=False), now=T0) == []
    assert estimate.record_deploys(tmp_path, _run([("h", "unchanged")]), now=T0) == []
    assert estimate.record_deploys(tmp_path, _run([("h", "rolled back")]), now=T0) == []
    assert estimate.record_deploys(tmp_path, _run([("../x", "deployed")]), now=T0) == []  # not a host name
    for name in ("history", "quality", "compare-x", "tune-y"):  # the results folder's own folders
        assert estimate.record_deploys(tmp_path, _run([(name, "deployed")]), now=T0) == []
    assert list(tmp_path.iterdir()) == []


def test_deploy_keeps_its_run_in_the_controllers_results(monkeypatch):
    """api.deploy (and so compare's, tune's and canary's deploys) writes it under paths.RESULTS (here the test's)."""
    from sglang_deploy import paths

    monkeypatch.setattr(api.runner, "run_playbook", lambda *a, **k: _run([("h", "deployed")]))
    api.deploy("baseline", limit="h")
    assert [d["elapsed_s"] for d in _kept(paths.RESULTS, "h")] == [100.0]


def test_plain_deploys_alone_make_the_estimate(tmp_path):
    """No compare or tune ran: two deploys that benchmarked (100, 120 s) are measured deploys, one without a
    benchmark (60 s) a deploy alone, which a restore is."""
    for i, (secs, benched) in enumerate([(100.0, ["h"]), (120.0, ["h"]), (60.0, [])]):
        estimate.record_deploys(tmp_path, _run([("h", "deployed")], elapsed=secs, benched=benched, artifacts=f"/a/{i}"))
    t = estimate.timings(tmp_path, {"h"})
    # median 110 less the guessed benchmark (no benchmark result here to split it)
    assert t == estimate.Timings(deploy_s=85.0, bench_s=25.0, restore_s=60.0, runs=0, deploys=3)
    assert estimate.estimate(2, 2, 1, t)["text"] == (
        "about 5 min: 2 deploys x ~85 s, 2 benchmarks x ~25 s, 1 restore x ~60 s; from 3 earlier deploys on these hosts"
    )
    assert estimate.timings(tmp_path, {"other"}) == estimate.Timings()  # another host's deploys are not these hosts'


def test_deploys_without_a_benchmark_leave_the_benchmark_a_guess_and_say_so(tmp_path):
    estimate.record_deploys(tmp_path, _run([("h", "deployed")], elapsed=60.0))
    t = estimate.timings(tmp_path, ["h"])
    assert (t.deploy_s, t.bench_s, t.restore_s, t.deploys) == (60.0, 25.0, 60.0, 1)
    assert estimate.estimate(1, 1, 0, t)["text"].endswith(
        "from 1 earlier deploy on these hosts, the benchmarks a guess"
    )


def test_a_run_counts_once_over_its_hosts_and_beside_its_compare(tmp_path):
    """A roll of two hosts is in both deploys.json; a compare's deploy is in its comparison.json too."""
    estimate.record_deploys(tmp_path, _run([("h1", "deployed"), ("h2", "deployed")], benched=["h1", "h2"]))
    assert estimate.timings(tmp_path, ["h1", "h2"]).deploys == 1
    compared = _run([("h1", "deployed")], elapsed=90.0, benched=["h1"], artifacts="/runner/2/artifacts/b")
    estimate.record_deploys(tmp_path, compared)
    _write(tmp_path / "compare-1" / "comparison.json", {"runs": {"a": [compared.to_dict()]}})
    t = estimate.timings(tmp_path, ["h1", "h2"])
    assert (t.runs, t.deploys) == (1, 1)
    assert estimate.estimate(1, 1, 0, t)["text"].endswith("from 1 earlier run and 1 earlier deploy on these hosts")


def test_a_damaged_or_hostile_deploys_file_is_skipped(tmp_path):
    good = {"finished_at": "2026-12-07T09:00:00+00:00", "elapsed_s": 50, "outcome": "deployed", "benchmarked": False}
    good |= {"profile": "baseline", "artifacts": ""}
    bad = [
        {**good, "elapsed_s": -5},
        {**good, "elapsed_s": "9e9"},
        {**good, "elapsed_s": 1e9},
        {**good, "elapsed_s": True},
        {**good, "benchmarked": "yes"},
        {**good, "outcome": "unchanged"},
        {**good, "profile": "../x"},
        {**good, "finished_at": "yesterday"},
        {**good, "artifacts": "x" * 5000},
        {k: v for k, v in good.items() if k != "profile"},
        "deployed",
    ]
    _write(tmp_path / "h" / estimate.DEPLOYS, [*bad, good])
    assert (estimate.timings(tmp_path, ["h"]).deploys, estimate.timings(tmp_path, ["h"]).restore_s) == (1, 50.0)
    for doc in ({"deploys": [good]}, "[" * 5000, [good] + [{"pad": "x" * estimate.MAX_DEPLOYS_BYTES}]):
        (tmp_path / "h" / estimate.DEPLOYS).write_text(doc if isinstance(doc, str) else json.dumps(doc))
        assert estimate.timings(tmp_path, ["h"]) == estimate.Timings()  # not a list, too deep, over the bound
    # the next deploy rewrites the file with what it can read back, and only that
    _write(tmp_path / "h" / estimate.DEPLOYS, [*bad, good])
    estimate.record_deploys(tmp_path, _run([("h", "deployed")], elapsed=70.0), now=T0)
    assert [d["elapsed_s"] for d in _kept(tmp_path, "h")] == [50, 70.0]


def test_a_linked_host_folder_is_not_written_through(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "h").symlink_to(tmp_path / "elsewhere")
    assert estimate.record_deploys(tmp_path / "results", _run([("h", "deployed")]), now=T0) == []
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_each_host_keeps_its_newest_deploys_only(tmp_path):
    for i in range(estimate.KEEP_DEPLOYS + 5):
        run = _run([("h", "deployed")], elapsed=float(10 + i), artifacts=f"/a/{i}")
        estimate.record_deploys(tmp_path, run, now=T0 + timedelta(minutes=i))
    kept = _kept(tmp_path, "h")
    assert [d["elapsed_s"] for d in kept] == [float(10 + i) for i in range(5, estimate.KEEP_DEPLOYS + 5)]
    assert kept[-1]["finished_at"] == (T0 + timedelta(minutes=estimate.KEEP_DEPLOYS + 4)).isoformat()
    # a longer file (written by hand) is read for its newest KEEP_DEPLOYS only
    _write(tmp_path / "h" / estimate.DEPLOYS, kept + kept)
    assert estimate.timings(tmp_path, ["h"]).deploys == estimate.KEEP_DEPLOYS
