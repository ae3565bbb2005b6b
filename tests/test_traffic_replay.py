"""A trace replayed by the benchmark (issue 51): prompts of its lengths sharing its prefix blocks, output lengths
forced, requests sent at its arrival times (asserted on the simulated clock, tests/sim_clock.py)."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
import sim_clock
from emulator_proc import Emulator  # first: puts the repo's module_utils on the import path

from sglang_deploy import cli
from ansible_collections.sglang.deploy.plugins.module_utils import bench, server_http
from ansible_collections.sglang.deploy.plugins.module_utils.bench import dataset, sweep, trace, workload
from ansible_collections.sglang.deploy.plugins.module_utils.bench.client import Target


def poisson_trace(n: int, rate: float, seed: int = 3) -> list:
    """n records: Poisson arrivals at `rate`, lengths from 40 to 1500 tokens, a 1024-token prefix shared by
    groups of requests (3 groups), output lengths 2 to 40."""
    rng, t, out = random.Random(seed), 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        n_in = rng.randint(40, 1500)
        group = i % 3
        ids = [100 + 2 * group, 101 + 2 * group][: -(-n_in // trace.BLOCK_TOKENS)]
        ids += [1000 + i * 4 + j for j in range(len(ids), -(-n_in // trace.BLOCK_TOKENS))]
        out.append(trace.Record(round(t * 1000, 3), n_in, rng.randint(2, 40), tuple(ids)))
    return out


def load(records, tmp_path, **kw) -> dataset.Dataset:
    path = trace.write(records, str(tmp_path / "trace.jsonl"))
    return dataset.load("trace", path=path, input_len=1, output_len=2, range_ratio=1.0, seed=42, **kw)


def test_replay_prompts_have_the_traces_lengths_and_share_its_blocks(tmp_path):
    records = poisson_trace(60, 4.0)
    data = load(records, tmp_path)
    rows = [data.row(i) for i in range(len(records))]
    assert [r.prompt_len for r in rows] == [r.input_length for r in records]  # one word a token on the emulator
    assert [r.output_len for r in rows] == [r.output_length for r in records]
    text = {i: rows[i].messages[0]["content"].split() for i in range(len(rows))}
    for i, j in ((0, 3), (1, 4), (2, 5)):  # same group: the blocks of the same hash ids, the same words
        a, b = records[i].hash_ids, records[j].hash_ids
        shared = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        n = min(shared * trace.BLOCK_TOKENS, records[i].input_length, records[j].input_length)
        assert n >= 40 and text[i][:n] == text[j][:n]
        assert text[i][n : n + 20] != text[j][n : n + 20]  # past the shared blocks: their own words
    assert text[0][:50] != text[1][:50]  # other groups: other words


def test_replay_times_scale_loop_and_cut(tmp_path):
    records = [trace.Record(t, 10, 5) for t in (1000.0, 1500.0, 3000.0)]
    data = load(records, tmp_path, trace_time_scale=2.0, trace_loops=2)
    # from the first record, x2; the second loop after the span (2 s) and one mean gap (1 s)
    assert [data.arrival(i) for i in range(6)] == pytest.approx([0, 1, 4, 6, 7, 10])
    assert data.info["rows"] == 6 and data.info["trace_records"] == 3
    assert load(records, tmp_path, requests=4, trace_loops=2).info["rows"] == 4
    _w, levels, cut = bench.check_workload(
        dataset_name="trace", dataset_path=str(tmp_path / "trace.jsonl"), requests=2, max_concurrency=3
    )
    assert levels == [workload.Level(3, trace=2)] and levels[0].label == "trace (c<=3)"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"request_rate": [2]}, "a trace sets its own arrivals"),
        ({"sla_search": [1, 2], "slo": {"ttft_p99_ms": 1}}, "a trace sets its own arrivals"),
        ({"trace_time_scale": 0}, "trace_time_scale must be above 0"),
        ({"trace_loops": 0}, "trace_loops must be at least 1"),
        ({"dataset_path": None}, "the trace dataset needs --dataset-path"),
    ],
)
def test_unusable_replay_settings_are_refused(kw, message, tmp_path):
    path = trace.write([trace.Record(0, 10, 5)], str(tmp_path / "t.jsonl"))
    with pytest.raises(ValueError, match=message):
        bench.check_workload(**{"dataset_name": "trace", "dataset_path": path, **kw})


def replayed(records, data, hold: float) -> list:
    """The loop times at which a trace level sends its requests to a server answering in 5 s, on the simulated
    clock; the loop held `hold` seconds at the 11th send (a busy host)."""
    target = Target(server_http.Endpoint.parse("http://127.0.0.1:9"), None)
    run = sweep._Run(target, "m", data, 10.0, False, False)
    level = workload.Level(None, trace=len(records))
    sent = []

    async def replay():
        lv = sweep._Level(run, level, [b""] * len(records), [2] * len(records))
        loop = asyncio.get_running_loop()

        async def one(i: int) -> None:
            sent.append(loop.time())
            if i == 10:
                loop.advance(hold)
            await asyncio.sleep(5.0)  # a slow answer

        lv.one = one
        await lv.dispatch(seed=0)
        await asyncio.gather(*lv.tasks)

    sim_clock.run(replay())
    return sent


def test_requests_are_sent_at_the_traces_times_on_the_simulated_clock(tmp_path):
    """The replay's send times are the trace's timestamps x the scale, exactly, whatever the server takes (the
    sends do not wait for answers), so its arrival rate and burstiness are the trace's; a late send does not shift
    the ones after it."""
    records = poisson_trace(400, 20.0)
    data = load(records, tmp_path, trace_time_scale=0.5)
    due = [(r.timestamp - records[0].timestamp) / 1000 * 0.5 for r in records]
    sent = replayed(records, data, 0.0)
    assert sent == pytest.approx(due, abs=1e-9)
    gaps = [b - a for a, b in zip(sent, sent[1:])]
    cv = (sum((g - sum(gaps) / len(gaps)) ** 2 for g in gaps) / len(gaps)) ** 0.5 / (sum(gaps) / len(gaps))
    assert cv == pytest.approx(trace.summary(records)["burstiness_cv"], abs=0.05)
    assert (len(sent) - 1) / (sent[-1] - sent[0]) == pytest.approx(2 * trace.summary(records)["rate_req_s"], rel=0.02)
    held = replayed(records, data, 0.3)
    held_until = due[10] + 0.3  # those due while the loop was held go at once after it, the rest on time
    assert held == pytest.approx([held_until if i > 10 and d < held_until else d for i, d in enumerate(due)], abs=1e-9)


def test_a_trace_replayed_against_the_emulator_keeps_its_lengths(tmp_path, capsys):
    """Bounds: every request's output is its trace's length exactly (forced), the server counts the trace's input
    lengths exactly (the emulator counts a word a token; a real tokenizer's count is within the chat template's
    tokens plus the word-to-token ratio's error). When each request goes is held on the simulated clock above: here
    send_ms counts from the first request's send, which a loaded machine can delay past the schedule's start."""
    records = poisson_trace(24, 40.0)
    path = trace.write(records, str(tmp_path / "trace.jsonl"))
    emu = Emulator(tmp_path, decode_tok_s=2000, ttft_ms=5)
    try:
        emu.wait_ready()
        dest = tmp_path / "r.json"
        args = ["bench", "--url", emu.url, "--dataset-name", "trace", "--dataset-path", path, "--warmup", "0"]
        rc = cli.main([*args, "--output-details", "--json", str(dest)])
    finally:
        emu.stop()
    assert rc == 0, capsys.readouterr()
    r = json.loads(dest.read_text())
    (level,) = r["levels"]
    assert level["label"] == "trace" and level["completed"] == len(records)
    assert [d["completion_tokens"] for d in level["requests_detail"]] == [x.output_length for x in records]
    assert level["prompt_tokens_mean"] == pytest.approx(sum(x.input_length for x in records) / len(records))
    w = r["workload"]
    assert (w["mode"], w["dataset_name"], w["trace_time_scale"], w["trace_loops"]) == ("trace", "trace", 1.0, 1)
    assert w["arrivals"] == sweep.TRACE_ARRIVALS
