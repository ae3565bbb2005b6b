"""The operator's own traffic (issue 51): the trace format bench_serving's Mooncake replay reads, its import,
summary and plot."""

from __future__ import annotations

import json
import os
import random
import stat

import pytest

from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace
from sglang_deploy.traffic import traffic, traffic_plot


def line(ts, n_in, n_out, ids=()) -> str:
    return json.dumps({"timestamp": ts, "input_length": n_in, "output_length": n_out, "hash_ids": list(ids)})


def write(tmp_path, *lines, name="t.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# A Mooncake trace's first lines (kvcache-ai/Mooncake FAST25-release/arxiv-trace/mooncake_trace.jsonl's form).
MOONCAKE = [
    '{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}',
    '{"timestamp": 0, "input_length": 7319, "output_length": 490, "hash_ids": [0, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28]}',
    '{"timestamp": 3052, "input_length": 7234, "output_length": 794, "hash_ids": [0, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42]}',
]


def test_a_mooncake_trace_reads_and_writes_back_in_its_format(tmp_path):
    records, sha = trace.read(write(tmp_path, *MOONCAKE))
    assert records[1] == trace.Record(0.0, 7319, 490, (0, *range(15, 29)))
    assert len(sha) == 64
    dest = trace.write(records, str(tmp_path / "out" / "copy.jsonl"))
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600
    assert [json.loads(x) for x in open(dest)] == [json.loads(x) for x in MOONCAKE]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "line 1: give one JSON object per line"),
        ('{"timestamp": 0, "input_length": 5}', "line 1: no 'output_length'"),
        (line(-1, 5, 5), "timestamp must be a finite number"),
        (line(0, 5, 5) + "\n" + line(1e300, 5, 5), "line 2: timestamp 1e\\+300 ms is over 604800000 ms"),
        (line(0, 0, 5), "input_length must be a whole number of tokens from 1"),
        (line(0, 5, True), "output_length must be a whole number"),
        (line(0, 600, 5, (1, 2, 3)), "3 hash_ids for 600 input tokens, over its 2 blocks of 512"),
        (line(0, 5, 5, (-1,)), "hash_ids must be a list of non-negative integers"),
        ("{not json", "line 1 is not JSON"),
        ("\n\n", "holds no request"),
    ],
)
def test_a_bad_trace_is_refused_naming_the_line_and_the_fix(text, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        trace.read(write(tmp_path, text))


def test_a_trace_of_epoch_timestamps_within_7_days_reads():
    start = 1.7e12
    records = trace.parse("\n".join([line(start, 5, 5), line(start + trace.MAX_SPAN_MS, 5, 5)]), "trace x")
    assert [r.timestamp - start for r in records] == [0, trace.MAX_SPAN_MS]


def test_a_trace_over_its_bounds_or_not_a_file_is_refused(tmp_path):
    path = write(tmp_path, *MOONCAKE)
    with pytest.raises(ValueError, match="over 0 MiB: cut it"):
        trace.read(path, max_bytes=100)
    with pytest.raises(ValueError, match="holds over 2 requests"):
        trace.parse("\n".join(MOONCAKE), "trace x", max_records=2)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        trace.read(str(fifo))  # returns at once: a FIFO's open does not wait for a writer


def test_the_summary_measures_rate_burstiness_lengths_and_prefix_reuse():
    rng = random.Random(7)
    t, records = 0.0, []
    for i in range(4000):
        t += rng.expovariate(5.0)  # Poisson arrivals at 5 req/s
        records.append(trace.Record(t * 1000, 1000 + i % 10, 100, (0, 1, 2 + i)))  # 2 of 3 blocks shared
    s = trace.summary(records)
    assert s["requests"] == 4000 and s["rate_req_s"] == pytest.approx(5.0, rel=0.05)
    assert s["burstiness_cv"] == pytest.approx(1.0, abs=0.05)  # Poisson: the gaps' sd equals their mean
    assert s["prefix_reuse_share"] == pytest.approx((2 * 4000 - 2) / (3 * 4000))
    assert s["input_length"]["p50"] == pytest.approx(1004.5) and s["output_length"]["max"] == 100
    even = trace.summary([trace.Record(i * 100.0, 10, 10) for i in range(10)])
    assert even["burstiness_cv"] == pytest.approx(0.0, abs=1e-9) and even["rate_req_s"] == pytest.approx(10.0)
    assert even["prefix_reuse_share"] is None


def test_block_hashes_are_equal_exactly_where_the_prefix_is():
    shared = list(range(1024))
    a = trace.block_digests([*shared, *range(5000, 5300)])
    b = trace.block_digests([*shared, *range(6000, 6100)])
    c = trace.block_digests([7, *shared[1:], *range(5000, 5300)])  # first block differs: no block after it equal
    assert len(a) == 3 and a[:2] == b[:2] and a[2] != b[2]
    assert not set(c) & set(a)
    assert trace.numbered([a, b, c]) == [(0, 1, 2), (0, 1, 3), (4, 5, 6)]


def test_import_checks_sorts_and_writes_a_trace_from_zero(tmp_path):
    src = write(tmp_path, line(5000, 10, 3), line(2000, 20, 4, (9,)))
    out = traffic.import_trace(src, str(tmp_path / "imported.jsonl"))
    assert [json.loads(x)["timestamp"] for x in open(out["path"])] == [0, 3000]
    assert out["summary"]["requests"] == 2
    records, s = traffic.summarize(out["path"])
    lines = traffic.summary_lines(s)
    assert "2 requests over 3 s" in lines[0] and lines[-1].startswith("output_length")
    png = traffic_plot.plot(records, "t")
    assert png.startswith(b"\x89PNG")


def test_the_traffic_commands_summarise_plot_and_import(tmp_path, capsys):
    from sglang_deploy import cli

    src = write(tmp_path, *MOONCAKE)
    png = tmp_path / "t.png"
    assert cli.main(["traffic", "summary", src, "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "3 requests over 3.05 s" in out and "prefix reuse" in out and png.read_bytes().startswith(b"\x89PNG")
    assert cli.main(["traffic", "summary", src, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prefix_reuse_share"] == pytest.approx(2 / 44)
    assert cli.main(["traffic", "import", src, "--out", str(tmp_path / "i.jsonl")]) == 0
    assert "imported 3 requests" in capsys.readouterr().out
    assert cli.main(["traffic", "summary", write(tmp_path, "[]", name="bad.jsonl")]) == 2
    assert "line 1: give one JSON object per line" in capsys.readouterr().err
