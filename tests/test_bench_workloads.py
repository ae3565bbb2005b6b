"""Workloads (issue 22 items 2-3): bench_serving's datasets and flags, request-rate levels with Poisson arrivals,
SLOs, goodput and the highest rate under an SLA; unusable input refused before any generation request."""

from __future__ import annotations

import hashlib
import json
import math
import random
import socket

import pytest
from emulator_proc import Emulator  # first: puts the repo's module_utils on the import path
from lab_host import LAB_HOST

from sglang_deploy import cli
from ansible_collections.sglang.deploy.plugins.module_utils import bench, server_http
from ansible_collections.sglang.deploy.plugins.module_utils.bench import dataset, metrics, workload
from ansible_collections.sglang.deploy.plugins.module_utils.bench.metrics import Timeline, level_metrics
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import Endpoint

LOAD = {"input_len": 32, "output_len": 16, "range_ratio": 1.0, "seed": 42}


@pytest.fixture
def emulator(tmp_path):
    started = []

    def start(*flags, **env):
        emu = Emulator(tmp_path, *flags, **{"decode_tok_s": 500, "ttft_ms": 20, **env})
        started.append(emu)
        return emu.wait_ready()

    yield start
    for emu in started:
        emu.stop()


def write_tmp(text: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".jsonl")
    with open(fd, "w") as fh:
        fh.write(text)
    return path


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def chat_line(text: str, **extra) -> str:
    return json.dumps({"messages": [{"role": "user", "content": text}], **extra})


# ------------------------------------------------------------------------------------------------ settings


def test_rates_and_slos_parse_or_name_the_fix():
    assert workload.parse_rates("1, 2.5,inf") == [1.0, 2.5, math.inf]
    for bad in ("0", "-1", "nan", "x", "", "2,0"):
        with pytest.raises(ValueError, match="above 0"):
            workload.parse_rates(bad)
    for same in ("2,2", "1.0000001,1.0000002", "inf,1e400"):  # one label, one level key: the second would be lost
        with pytest.raises(ValueError, match="are one level .* give each rate once"):
            workload.parse_rates(same)
    assert workload.parse_rates("1.00001,1.00002") == [1.00001, 1.00002]
    assert workload.parse_slo("ttft_p99_ms=2000, tpot_mean_ms=50") == {"ttft_p99_ms": 2000.0, "tpot_mean_ms": 50.0}
    with pytest.raises(ValueError, match="unknown SLO metric 'ttft_p42_ms'.*ttft_p99_ms"):
        workload.parse_slo("ttft_p42_ms=1")
    with pytest.raises(ValueError, match="unknown SLO metric 'goodput'"):
        workload.parse_slo("goodput=1")
    for bad in ("ttft_p99_ms=-1", "ttft_p99_ms", "ttft_p99_ms=inf", "ttft_p99_ms=x"):
        with pytest.raises(ValueError, match="positive number of milliseconds"):
            workload.parse_slo(bad)


def check(**kw):
    return workload.check_settings(**{"concurrency": [1], "input_len": 8, "output_len": 8, "warmup": 0, **kw})[1]


def test_levels_follow_the_mode():
    assert check() == [workload.Level(1)]
    assert check(max_concurrency=4) == [workload.Level(4)]
    assert check(request_rate=[2.0, math.inf], max_concurrency=4) == [workload.Level(4, 2.0), workload.Level(4)]
    assert check(sla_search=(1, 8), slo={"ttft_p99_ms": 100}) == []
    assert workload.Level(None, 2.0).default_requests() == 20 and workload.Level(8).default_requests() == 16
    assert workload.Level(4, 0.5).label == "0.5 req/s (c<=4)" and workload.Level(8).label == "c=8"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be at least 1"),
        ({"request_rate": "0"}, "above 0"),
        ({"sla_search": (1, 8)}, "needs SLOs"),
        ({"sla_search": (8, 1), "slo": {"ttft_p99_ms": 1}}, "0 < LOW < HIGH"),
        ({"sla_search": (0, 1), "slo": {"ttft_p99_ms": 1}}, "0 < LOW < HIGH"),
        ({"sla_search": (1, 2), "slo": {"ttft_p99_ms": 1}, "request_rate": [1]}, "not both"),
        (
            {"sla_search": (1, 2), "slo": {"ttft_p99_ms": 1}, "sla_search_steps": 0},
            "sla_search_steps must be at least 1",
        ),
        ({"slo": {"nope_p99_ms": 1}}, "unknown SLO metric"),
    ],
)
def test_unusable_settings_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        check(**kw)


def test_an_unknown_setting_is_refused_with_the_known_ones():
    with pytest.raises(
        ValueError, match="unknown benchmark setting 'request_rates': use concurrency, request_rate, max_concurrency"
    ):
        bench.check_workload(request_rates=[1])
    w, levels, data = bench.check_workload(max_concurrency=3)
    assert (
        w["seed"] == bench.WORKLOAD["seed"].default
        and levels == [workload.Level(3)]
        and data.info["dataset_name"] == "random"
    )


# numpy 2.5.5: np.random.seed(SEED); [np.random.exponential(1 / RATE) for _ in range(n)] -- what bench_serving draws
# (tests/test_bench_serving_real.py compares 1000 gaps with the numpy beside the real bench_serving).
NUMPY_GAPS = {
    (42, 4.0): [0.11731702249421477, 0.7525303577293803, 0.32918642338636234, 0.2282356384439883, 0.04240621761558657],
    (0, 16.0): [0.049742156760194375, 0.07849567268536486, 0.0577014466127543],
    (4294967295, 0.5): [0.20546578398207474, 4.869556940666425, 3.112128933714502],
}


@pytest.mark.parametrize(("seed", "rate"), list(NUMPY_GAPS))
def test_arrival_gaps_are_bench_servings_for_the_same_seed(seed, rate):
    gaps = workload.arrival_gaps(seed, rate)
    assert [next(gaps) for _ in NUMPY_GAPS[seed, rate]] == NUMPY_GAPS[seed, rate]  # bit for bit


def test_arrival_gaps_equal_numpys_for_many_seeds_and_rates():
    import numpy as np  # matplotlib's dependency, so in every venv of the project

    rng = random.Random(7)
    cases = [(0, 1), (2**32 - 1, 3.5), (1, 1e-9), (42, 1e9)] + [
        (rng.randrange(2**32), rng.uniform(0.1, 500)) for _ in range(20)
    ]
    for seed, rate in cases:
        np.random.seed(seed)
        theirs = [float(np.random.exponential(1.0 / rate)) for _ in range(300)]
        gaps = workload.arrival_gaps(seed, rate)
        assert [next(gaps) for _ in theirs] == theirs, (seed, rate)


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True, "4x", "-3", " "])
def test_a_seed_bench_serving_cannot_take_is_refused(seed):
    with pytest.raises(
        ValueError, match="seed must be (a whole number from 0 to 4294967295|at least 0|at most 4294967295), got"
    ):
        bench.check_workload(seed=seed)


def test_a_seed_of_digits_is_that_number():  # an INI inventory's value, which Ansible's int type takes too
    assert bench.check_workload(seed="7")[0]["seed"] == 7 and bench.check_workload(seed=" 42 ")[0]["seed"] == 42


# ------------------------------------------------------------------------------------------------ datasets


def test_random_lengths_follow_bench_servings_range_ratio():
    fixed = dataset.load("random", **LOAD)
    assert [fixed.row(i).output_len for i in range(5)] == [16] * 5
    assert fixed.row(3) == dataset.load("random", **LOAD).row(3) and fixed.row(3) != fixed.row(4)
    ranged = dataset.load("random", **{**LOAD, "input_len": 100, "output_len": 100, "range_ratio": 0.5})
    rows = [ranged.row(i) for i in range(200)]
    assert all(50 <= r.output_len <= 100 for r in rows) and len({r.output_len for r in rows}) > 20
    assert all(45 <= r.prompt_len <= 100 for r in rows)


def test_shared_prefix_groups_share_their_system_prompt():
    gsp = {"num_groups": 3, "prompts_per_group": 4, "system_prompt_len": 50, "question_len": 5}
    data = dataset.load("generated-shared-prefix", **LOAD, gsp=gsp)
    prompts = [data.row(i).messages[0]["content"] for i in range(12)]
    systems = {p.split("\n\n")[0] for p in prompts}
    assert len(systems) == 3 and len(set(prompts)) == 12
    assert all(len(s.split()) == 50 for s in systems)
    assert [data.row(i) for i in range(12)] == [
        dataset.load("generated-shared-prefix", **LOAD, gsp=gsp).row(i) for i in range(12)
    ]
    assert data.info["rows"] == 12 and data.info["gsp_system_prompt_len"] == 50


def test_custom_and_sharegpt_files_are_read_with_their_lengths(tmp_path):
    lines = [
        chat_line("Hello there, how are you", max_tokens=7),
        "",
        json.dumps({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi you"}]}),
        json.dumps(
            {"conversations": [{"role": "user", "content": "a b c"}, {"role": "assistant", "content": "x y z w"}]}
        ),
    ]
    path = write(tmp_path, "c.jsonl", "\n".join(lines))
    data = dataset.load("custom", path=path, **LOAD)
    assert [(r.output_len, len(r.messages)) for r in data.rows] == [(7, 1), (16, 2), (4, 1)]
    assert data.info["dataset_sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    share = [
        {"conversations": [{"from": "human", "value": f"question number {i}"}, {"from": "gpt", "value": "a b c"}]}
        for i in range(5)
    ] + [{"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]}]
    data = dataset.load("sharegpt", path=write(tmp_path, "s.json", json.dumps(share)), **LOAD)
    assert len(data.rows) == 5 and data.info["pruned"] == 1 and {r.output_len for r in data.rows} == {3}
    assert data.row(5) == data.row(0)  # a sweep longer than the file cycles


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("custom", None, "cannot read dataset"),
        ("custom", "", "holds no usable request"),
        ("custom", "{not json\n", "line 1 is not JSON"),
        ("custom", "[1]\n", "line 1 is a JSON list, not one JSON object per line"),
        ("custom", '{"prompt": "x"}\n', "give `messages`"),
        ("custom", '{"messages": [{"role": "user"}]}\n', "string `role` and a string `content`"),
        ("custom", chat_line("a b", max_tokens=1), "output length must be an integer of at least 2"),
        ("custom", b"\xff\xfe", "not UTF-8"),
        ("sharegpt", "{}", "is a JSON dict, not a list of conversations"),
        ("sharegpt", "[", "is not JSON"),
        ("sharegpt", "[]", "holds no usable request"),
        ("sharegpt", '[{"conversations": [{"from": "human"}, {"from": "gpt", "value": "x"}]}]', "string `value`"),
    ],
)
def test_unusable_dataset_files_are_refused(name, content, message, tmp_path):
    path = tmp_path / "data"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message):
        dataset.load(name, path=str(path), **LOAD)


def test_calibrated_prompts_count_in_the_servers_tokens():
    data = dataset.load("random", **{**LOAD, "input_len": 200})
    assert 190 <= data.row(0).prompt_len <= 200 and data.info["tokens_per_word"] is None
    data.calibrate(2.0)  # a tokenizer that makes two tokens of each common word
    assert 90 <= data.row(1).prompt_len <= 100 and data.info["tokens_per_word"] == 2.0
    gsp = {"num_groups": 1, "prompts_per_group": 2, "system_prompt_len": 100, "question_len": 10}
    shared = dataset.load("generated-shared-prefix", **LOAD, gsp=gsp)
    shared.calibrate(1.25)
    assert len(shared.row(0).messages[0]["content"].split("\n\n")[0].split()) == 80
    rows = dataset.load("custom", path=write_tmp(chat_line("w " * 60)), **LOAD)
    rows.check_context(100)
    rows.calibrate(1.5)  # 60 words are 90 tokens: with 16 out they no longer fit 100
    with pytest.raises(ValueError, match="about 90 prompt \\+ 16 output tokens"):
        rows.check_context(100)


def test_recorded_answers_give_output_lengths_in_the_servers_tokens(tmp_path):
    """sharegpt answers (and custom conversations without output_len) set the output length as bench_serving does,
    in the server's tokens once calibrated; a fixed length (--sharegpt-output-len, max_tokens) is kept as given."""
    share = [{"conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "w " * 40}]}]
    path = write(tmp_path, "s.json", json.dumps(share))
    data = dataset.load("sharegpt", path=path, **LOAD)
    assert data.row(0).output_len == 40  # one token per word until the server's ratio is known
    data.calibrate(1.5)
    assert data.row(0).output_len == 60 and data.row(1).output_len == 60
    with pytest.raises(ValueError, match="about 4 prompt \\+ 60 output tokens"):
        data.check_context(64)
    fixed = dataset.load("sharegpt", path=path, **LOAD, sharegpt_output_len=40)
    fixed.calibrate(1.5)
    assert fixed.row(0).output_len == 40
    lines = [
        json.dumps({"conversations": [{"value": "a b"}, {"value": "x " * 10}]}),
        json.dumps({"conversations": [{"value": "a b"}, {"value": "x " * 10}], "output_len": 5}),
        chat_line("a b", max_tokens=7),
    ]
    custom = dataset.load("custom", path=write(tmp_path, "c.jsonl", "\n".join(lines)), **LOAD)
    custom.calibrate(1.3)
    assert [custom.row(i).output_len for i in range(3)] == [13, 5, 7]


def test_recorded_answers_are_counted_by_the_servers_tokenizer(tmp_path):
    """Where the server tokenizes a list of texts (SGLang's /v1/tokenize), each sharegpt answer asks for exactly its
    count, as bench_serving's tokenizer does; elsewhere its words x the sample's tokens per word."""
    from test_bench_hostile import Scripted, good_stream

    def tokenize(lists: bool):
        def answer(conn, n):
            doc = {"count": [16, 16, 16] if lists and n > 1 else 1300, "max_model_len": 4096}
            body = json.dumps(doc).encode()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
            conn.sendall(head + body)

        return answer

    share = [
        {"conversations": [{"from": "human", "value": f"question {i} here"}, {"from": "gpt", "value": "w " * 20}]}
        for i in range(3)
    ]
    path = write(tmp_path, "s.json", json.dumps(share))
    dest = tmp_path / "r.json"
    argv = ["bench", "--dataset-name", "sharegpt", "--dataset-path", path, "--concurrency", "1", "--requests", "3"]
    argv += ["--warmup", "0", "--json", str(dest)]
    for lists, rc, lengths, counted in ((True, 0, 16, "server tokens (/v1/tokenize)"), (False, 1, 26, "words x")):
        server = Scripted({"/v1/tokenize": tokenize(lists), "/v1/chat/completions": good_stream(16)})
        try:
            assert cli.main([*argv, "--url", server.url]) == rc
        finally:
            server.close()
        r = json.loads(dest.read_text())
        assert r["workload"]["answer_lengths"].startswith(counted) and r["workload"]["tokens_per_word"] == 1.3
        mismatch = r["levels"][0]["output_len_mismatch"]
        assert mismatch["count"] == (0 if lists else 3) and mismatch["expected"] == lengths
        assert server.asked["/v1/tokenize"] == 2  # the sample, then the answers (refused as a list: the ratio)


def test_the_emulator_counts_prompt_tokens_as_the_benchmark_plans_them():
    """Both count one token per word (the emulator is copied to lab hosts alone, so each holds the rule)."""
    from sglang_deploy.emulator.generation import prompt_token_count

    for text in (
        "Request 3: write a long essay",
        "a  b\n\nc\td",
        dataset.load("random", **LOAD).row(0).messages[0]["content"],
    ):
        assert prompt_token_count(text) == dataset.approx_tokens(text)


def test_dataset_settings_are_checked():
    with pytest.raises(ValueError, match="needs --dataset-path"):
        dataset.load("custom", **LOAD)
    with pytest.raises(ValueError, match="is for the sharegpt, custom and trace datasets"):
        dataset.load("random", path="x", **LOAD)
    with pytest.raises(
        ValueError, match="dataset_name must be one of random, sharegpt, custom, generated-shared-prefix"
    ):
        bench.check_workload(dataset_name="mooncake")
    with pytest.raises(ValueError, match="random_range_ratio must be at most 1, got 1.5"):
        bench.check_workload(random_range_ratio=1.5)
    with pytest.raises(ValueError, match="--gsp-num-groups must be a positive integer"):
        dataset.load("generated-shared-prefix", **LOAD, gsp={"num_groups": 0})
    with pytest.raises(ValueError, match="1000000000 x 16, over the limit of 1000000 prompts"):
        bench.check_workload(dataset_name="generated-shared-prefix", gsp={"num_groups": 10**9})
    assert bench.check_workload(
        dataset_name="generated-shared-prefix", gsp={"num_groups": 1000, "prompts_per_group": 1000}
    )
    known = "num_groups, prompts_per_group, system_prompt_len, question_len"
    with pytest.raises(ValueError, match=f"unknown gsp setting 'num_group': use {known}"):
        bench.check_workload(dataset_name="generated-shared-prefix", gsp={"num_group": 4})
    with pytest.raises(ValueError, match="unknown gsp setting 'output_len'"):
        bench.check_workload(gsp={"output_len": 4})  # a typo is named whatever the dataset
    with pytest.raises(ValueError, match="gsp must be a mapping of num_groups"):
        bench.check_workload(dataset_name="generated-shared-prefix", gsp=[("num_groups", 4)])


def test_a_request_over_the_context_is_named(tmp_path):
    data = dataset.load(
        "custom", path=write(tmp_path, "c.jsonl", chat_line("a b", max_tokens=4) + "\n" + chat_line("w " * 90)), **LOAD
    )
    data.check_context(200)
    with pytest.raises(
        ValueError, match="request 2 of .*about 90 prompt \\+ 16 output tokens do not fit .* 100 tokens"
    ):
        data.check_context(100)
    with pytest.raises(ValueError, match="its longest request"):
        dataset.load("random", **{**LOAD, "input_len": 500}).check_context(256)


# ------------------------------------------------------------------------------------------------ SLO maths


def tl(t_send: float, ttft: float, n: int, gap: float) -> Timeline:
    times = [t_send + ttft + j * gap for j in range(n)]
    return Timeline(t_send=t_send, t_end=times[-1], token_times=times, completion_tokens=n, prompt_tokens=5)


def test_goodput_counts_requests_meeting_every_slo():
    tls = [tl(0.0, 0.05, 11, 0.01), tl(0.0, 0.30, 11, 0.01), tl(0.0, 0.05, 11, 0.05), Timeline(error="HTTP 500")]
    m = level_metrics(tls, 4, 11, slo={"ttft_p50_ms": 100, "tpot_mean_ms": 20})
    wall = m["wall_s"]
    assert m["goodput_req_s"] == pytest.approx(1 / wall)  # fast request only: slow first token, slow decode, failed
    assert m["slo"]["checks"]["ttft_p50_ms"] == {"limit": 100, "value": pytest.approx(50.0), "met": True}
    assert m["slo"]["checks"]["tpot_mean_ms"]["met"] is False and m["slo"]["met"] is False
    no_slo = level_metrics(tls[:3], 3, 11)
    assert no_slo["slo"] is None and no_slo["goodput_req_s"] == pytest.approx(no_slo["request_throughput_req_s"])
    met = level_metrics(tls[:1], 1, 11, slo={"itl_p99_ms": 11})
    assert met["slo"]["met"] and met["goodput_req_s"] > 0
    assert metrics.request_meets((10.0, 1.0, 20.0, [5.0, 50.0]), {"itl_mean_ms": 20}) is False


# ------------------------------------------------------------------------------------------------ end to end


def bench_cli(url: str, tmp_path, *extra) -> tuple:
    dest = tmp_path / "r.json"
    rc = cli.main(["bench", "--url", url, "--warmup", "0", "--output-len", "8", "--json", str(dest), *extra])
    return rc, json.loads(dest.read_text()) if dest.exists() else None


def test_output_details_keep_each_request_of_each_level(emulator, tmp_path):
    emu = emulator()
    rc, r = bench_cli(emu.url, tmp_path, "--concurrency", "1,2", "--requests", "4", "--output-details")
    assert rc == 0
    for level in r["levels"]:
        rows = level["requests_detail"]
        assert len(rows) == level["requests"] == 4 and min(row["send_ms"] for row in rows) == 0.0
        assert all(row["error"] is None and row["completion_tokens"] == 8 for row in rows)
        assert all(0 < row["ttft_ms"] <= row["e2e_ms"] for row in rows)
        ttfts = sorted(row["ttft_ms"] for row in rows)  # to the microsecond
        assert level["ttft_ms"]["p99"] == pytest.approx(metrics.percentile(ttfts, 99), abs=1e-3)
    rc, plain = bench_cli(emu.url, tmp_path, "--concurrency", "1", "--requests", "2")
    assert rc == 0 and "requests_detail" not in plain["levels"][0]


def test_output_details_without_a_json_file_is_refused_before_any_request(capsys):
    assert cli.main(["bench", "--url", "http://127.0.0.1:9", "--output-details"]) == 2
    assert "give --json FILE too" in capsys.readouterr().err


def test_a_custom_dataset_through_the_cli(emulator, tmp_path, capsys):
    emu = emulator()
    lines = [chat_line(f"prompt {i} " + "word " * (5 + i), max_tokens=4 + i) for i in range(6)]
    path = write(tmp_path, "traffic.jsonl", "\n".join(lines))
    rc, r = bench_cli(
        emu.url,
        tmp_path,
        "--dataset-name",
        "custom",
        "--dataset-path",
        path,
        "--concurrency",
        "2",
        "--num-prompts",
        "6",
    )
    assert rc == 0, capsys.readouterr()
    level = r["levels"][0]
    assert level["completed"] == 6 and level["output_len_mismatch"]["count"] == 0
    assert level["output_tokens"] == sum(4 + i for i in range(6))
    w = r["workload"]
    assert w["dataset_name"] == "custom" and w["dataset_sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert w["seed"] == 42 and w["mode"] == "concurrency"
    assert "custom" in capsys.readouterr().out


def test_request_rate_levels_arrive_as_a_seeded_poisson_process(emulator, tmp_path, capsys):
    emu = emulator()
    rc, r = bench_cli(
        emu.url,
        tmp_path,
        "--request-rate",
        "25,inf",
        "--max-concurrency",
        "4",
        "--num-prompts",
        "20",
        "--slo",
        "ttft_p99_ms=5000",
    )
    assert rc == 0
    paced, burst = r["levels"]
    assert (paced["label"], paced["request_rate"], paced["concurrency"]) == ("25 req/s (c<=4)", 25.0, 4)
    assert (burst["label"], burst["request_rate"]) == ("c=4", None)
    gaps = workload.arrival_gaps(42, 25.0)
    span = sum(next(gaps) for _ in range(19))  # the gaps between 20 arrivals
    assert paced["wall_s"] >= span  # no request went before its arrival time
    assert paced["slo"]["met"] and paced["goodput_req_s"] == pytest.approx(paced["request_throughput_req_s"])
    assert r["workload"]["request_rates"] == [25.0, "inf"] and r["workload"]["mode"] == "request_rate"
    assert r["workload"]["arrivals"] == workload.ARRIVALS
    assert "SLA met" in capsys.readouterr().out


def test_the_sla_search_finds_the_highest_rate_that_holds(emulator, tmp_path, capsys):
    # per-stream decode = min(500, 1000 / running): TPOT 2 ms alone, 16 ms with all 16 requests in flight (400
    # req/s). The SLO of 8 ms (8 or fewer running) holds at 5 req/s with 4x room: a loaded machine, which only
    # lengthens TPOT, does not break it there (4 ms, 2x, was closer), and cannot make 400 req/s hold.
    emu = emulator(aggregate_tok_s=1000)
    rc, r = bench_cli(
        emu.url,
        tmp_path,
        "--slo",
        "tpot_p50_ms=8",
        "--sla-search",
        "5,400",
        "--sla-search-steps",
        "3",
        "--num-prompts",
        "16",
        "--output-len",
        "32",
    )
    out = capsys.readouterr().out
    search = r["sla_search"]
    assert [p["rate"] for p in search["probes"]][:2] == [5.0, 400.0]
    assert len(r["levels"]) == len(search["probes"]) == 5
    assert search["probes"][0]["sla_met"] and not search["probes"][1]["sla_met"]
    held = [p["rate"] for p in search["probes"] if p["sla_met"]]
    assert search["best_rate"] == max(held) and 5 < search["best_rate"] < 400  # a bisection held
    assert f"highest request rate meeting the SLA: {search['best_rate']:g} req/s" in out
    assert rc == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--dataset-name", "custom", "--dataset-path", "{tmp}/missing.jsonl"], "cannot read dataset"),
        (["--dataset-name", "custom", "--dataset-path", "{tmp}/empty.jsonl"], "holds no usable request"),
        (["--dataset-name", "sharegpt", "--dataset-path", "{tmp}/empty.jsonl"], "is not JSON"),
        (["--dataset-name", "custom"], "needs --dataset-path"),
        (["--request-rate", "0"], "above 0"),
        (["--request-rate", "-2"], "above 0"),
        (["--slo", "ttft_p100_ms=5"], "unknown SLO metric"),
        (["--max-concurrency", "0"], "max_concurrency must be at least 1"),
        (["--sla-search", "1,8"], "needs SLOs"),
        (["--sla-search", "1"], "two request rates"),
        (["--random-range-ratio", "2"], "random_range_ratio must be at most 1, got 2.0"),
    ],
)
def test_unusable_workloads_are_refused_before_any_request(extra, message, tmp_path, capsys):
    (tmp_path / "empty.jsonl").write_text("\n")
    listener = socket.create_server(("127.0.0.1", 0))  # accepts nothing: any request would hang the test
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with listener:
        try:
            rc = cli.main(
                ["bench", "--url", url, "--timeout", "2", *[x.replace("{tmp}", str(tmp_path)) for x in extra]]
            )
        except SystemExit as exc:  # argparse's refusal of a flag's value
            rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def generated(emu) -> float:
    text = server_http.request(Endpoint.parse(emu.url), "GET", "/metrics").body.decode()
    return metrics.parse_prometheus(text).get("sglang:num_requests_total", 0.0)


def test_a_prompt_over_the_servers_context_is_refused_before_generating(emulator, tmp_path, capsys):
    emu = emulator("--context-length", "64", "--enable-metrics")
    before = generated(emu)
    path = write(tmp_path, "c.jsonl", chat_line("w " * 60))
    rc = cli.main(["bench", "--url", emu.url, "--dataset-name", "custom", "--dataset-path", path, "--warmup", "1"])
    assert rc == 2
    assert "do not fit the server's context of 64 tokens" in capsys.readouterr().err
    assert generated(emu) == before


def test_the_module_takes_the_workload(emulator, tmp_path, capsys):
    import sglang_bench
    from emulator_proc import run_module

    emu = emulator()
    path = write(tmp_path, "t.jsonl", "\n".join(chat_line(f"q {i} a b c", max_tokens=5) for i in range(4)))
    work = {"warmup": 0, "dataset_name": "custom", "dataset_path": path, "requests": 4}

    def module(**more):
        return run_module(sglang_bench, {"url": emu.url, "workload": {**work, **more}}, capsys)

    failed, res = module(request_rate=["50", "inf"], max_concurrency=2, slo={"e2e_p99_ms": 5000}, seed=7)
    assert not failed, res
    r = res["result"]
    assert [lv["label"] for lv in r["levels"]] == ["50 req/s (c<=2)", "c=2"]
    assert all(lv["slo"]["met"] and lv["output_tokens"] == 20 for lv in r["levels"])
    assert r["workload"]["seed"] == 7 and r["workload"]["dataset_sha256"]
    failed, res = module(slo={"e2e_p99_ms": 5000}, sla_search=[5, 50], sla_search_steps=1)
    assert not failed and res["result"]["sla_search"]["best_rate"] == 50
    for bad, message in (
        ({"request_rate": ["0"]}, "above 0"),
        ({"slo": {"ttft_p98_ms": 1}}, "unknown SLO metric"),
        ({"seed": -1}, "seed must be at least 0, got -1"),
        ({"requests_per_level": 3}, "requests_per_level"),  # Ansible's check: no such setting
    ):
        failed, res = module(**bad)
        assert failed and message in res["msg"]


@pytest.mark.lab
def test_the_role_runs_a_custom_dataset_at_request_rates_and_an_sla_search_on_the_lab(tmp_path, capsys):
    """End to end on the lab, through `sglang-deploy deploy` and its workload flags: the dataset file goes from the
    controller to the host, the levels are request rates and the probes of an SLA search, and the fetched result
    records the workload."""

    path = write(
        tmp_path, "traffic.jsonl", "\n".join(chat_line(f"question {i} " + "w " * 20, max_tokens=16) for i in range(8))
    )
    flags = ["--dataset-name", "custom", "--dataset-path", path, "--num-prompts", "8", "--warmup", "1", "--seed", "3"]
    flags += ["--max-concurrency", "4", "--slo", "e2e_p99_ms=10000"]

    def deploy(*more: str) -> dict:
        rc = cli.main(["deploy", "baseline", "--json", *flags, *more])
        out = capsys.readouterr().out
        assert rc == 0, out[-3000:]
        return json.loads(out)["data"]["sglang_benchmark"][LAB_HOST]

    # The first run deploys baseline where the lab host serves nothing yet (the test must not depend on the tests
    # before it in its lane); the lab lock is held: tests/conftest.py's lab_exclusive.
    r = deploy("--request-rate", "20,inf", "--bench-again")
    s = deploy("--tags", "benchmark", "--sla-search", "5,40", "--sla-search-steps", "1")["sla_search"]
    assert [lv["label"] for lv in r["levels"]] == ["20 req/s (c<=4)", "c=4"]
    assert all(lv["completed"] == 8 and lv["output_tokens"] == 128 and lv["slo"]["met"] for lv in r["levels"])
    w = r["workload"]
    assert w["dataset_name"] == "custom" and w["seed"] == 3 and w["mode"] == "request_rate"
    assert w["dataset_sha256"] == hashlib.sha256(open(path, "rb").read()).hexdigest()
    assert s["best_rate"] == 40 and [p["rate"] for p in s["probes"]] == [5, 40]
