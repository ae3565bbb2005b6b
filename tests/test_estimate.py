"""compare's and tune's time estimate (compare/estimate.py): each deploy, benchmark and restore from what earlier
runs on the same hosts took, else a stated guess (issue 52, item 8)."""

from __future__ import annotations

import json

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
