"""sglang_bench and `sglang-deploy bench` against the emulated server on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from emulator_proc import REPO, Emulator, run_module  # first: puts the repo's module_utils on the import path

import sglang_bench
from ansible_collections.sglang.deploy.plugins.module_utils import bench
from ansible_collections.sglang.deploy.plugins.module_utils.bench import sweep
from sglang_deploy import cli

RATE, TTFT_MS = 172.0, 80.0


@pytest.fixture
def emulator(tmp_path):
    started = []

    def start(*flags, **env):
        emu = Emulator(tmp_path, *flags, decode_tok_s=RATE, ttft_ms=TTFT_MS, **env)
        started.append(emu)
        return emu.wait_ready()

    yield start
    for emu in started:
        emu.stop()


def drop_from_body(monkeypatch, key: str) -> None:
    """Requests without `key`: what a server that ignores that field sees."""
    original = sweep.chat_body

    def without(*args, **kwargs):
        body = original(*args, **kwargs)
        del body[key]
        return body

    monkeypatch.setattr(sweep, "chat_body", without)


def test_sweep_reports_the_configured_rates(emulator, tmp_path, capsys):
    emu = emulator(
        "--enable-metrics", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", accept_length=3
    )
    out_len = 128
    dest = tmp_path / "results" / "sub" / "bench.json"
    failed, res = run_module(
        sglang_bench,
        {
            "url": emu.url,
            "model": "qwen",
            "workload": {"concurrency": [1, 4], "requests": 4, "input_len": 32, "output_len": out_len, "warmup": 1},
            "dest": str(dest),
            "context": {"profile": "nextn"},
        },
        capsys,
    )
    assert not failed, res
    assert res["changed"] and res["dest"] == str(dest)
    written = json.loads(dest.read_text())
    assert written == json.loads(json.dumps(res["result"]))
    r = res["result"]
    assert r["server_emulated"] is True and r["context"] == {"profile": "nextn"}
    assert set(r["definitions"]) >= {
        "ttft_ms",
        "tpot_ms",
        "itl_ms",
        "e2e_ms",
        "decode_tok_s_per_request",
        "output_throughput_tok_s",
        "spec_accept_length",
    }
    assert r["started_at"].endswith("+00:00") and r["version"] == bench.BENCH_VERSION and r["host"]
    steps = 1 + math.ceil((out_len - 1) / 3)  # prefill token, then 3 tokens per verify step
    # No figure is bounded around the configured rate here: on a loaded machine the client reads a token late (4
    # busy loops beside a CI run: a TTFT of 102 ms from 80 ms). That the emulator sends at its rate is held on the
    # simulated clock (test_emulator.py: test_decode_is_paced_at_the_configured_rate,
    # test_a_late_first_token_does_not_speed_up_the_decode_after_it), and that these figures are computed right
    # from token times in test_bench_metrics.py (test_single_stream_figures_follow_the_definitions,
    # test_multi_token_chunks_inflate_itl_but_not_decode_rate, test_aggregate_throughput_uses_the_level_wall_time).
    # What holds on any machine: nothing arrives before the server's schedule lets it (the first token TTFT after
    # the send at the earliest, the last (n - 1) / RATE after it).
    for level in r["levels"]:
        assert (level["completed"], level["failed"]) == (4, 0)
        assert level["output_len_mismatch"]["count"] == 0
        assert level["ttft_ms"]["p50"] >= TTFT_MS, res["table"]
        assert level["e2e_ms"]["p50"] >= TTFT_MS + 1000 * (out_len - 1) / RATE, res["table"]
        # the last token chunk comes before the stream's end: the decode speed is at least 1000 / TPOT
        assert level["decode_tok_s_per_request"]["p50"] >= 1000 / level["tpot_ms"]["p50"] * (1 - 1e-9)
        assert level["tokens_per_chunk"]["aggregate"] == pytest.approx(out_len / steps)
        assert level["spec_accept_length"] == {"value": pytest.approx(out_len / (steps - 1)), "source": "metrics_delta"}
        assert level["output_tokens"] == 4 * out_len
    assert r["client"]["connections_opened"] == 1 + 1 + 4  # warm-up, c=1, c=4: one per worker, kept alive
    # c=1's requests follow each other (never more than one in flight); c=4's run together. Not a throughput ratio,
    # which a machine that holds one level up and not the other moves: the whole process held up stretches every
    # request of the level with its wall time.
    assert r["levels"][0]["achieved_concurrency"] <= 1 + 1e-9
    assert r["levels"][1]["achieved_concurrency"] > 1.5, res["table"]
    assert res["table"].startswith("EMULATED server: figures are synthetic")


def test_output_length_mismatch_is_reported_not_averaged(emulator, monkeypatch, capsys):
    emu = emulator()
    drop_from_body(monkeypatch, "ignore_eos")  # a server that ignores ignore_eos
    failed, res = run_module(
        sglang_bench,
        {
            "url": emu.url,
            "workload": {"concurrency": [2], "requests": 4, "input_len": 16, "output_len": 400, "warmup": 0},
        },
        capsys,
    )
    assert not failed
    level = res["result"]["levels"][0]
    mm = level["output_len_mismatch"]
    assert level["completed"] == 4 and mm["count"] == 4 and mm["expected"] == 400
    assert 0 < mm["examples"][0]["completion_tokens"] < 400
    assert level["output_tokens"] < 4 * 400
    assert "were not 400 tokens" in json.dumps(res["warnings"])
    assert "4 responses not 400 tokens" in res["table"]


def test_min_tokens_is_sent_only_when_asked(emulator, monkeypatch, capsys):
    """A server that ignores ignore_eos stops early; --min-tokens (module: min_tokens) still forces the length."""
    emu = emulator()
    drop_from_body(monkeypatch, "ignore_eos")
    work = {"concurrency": [1], "requests": 2, "input_len": 16, "output_len": 400, "warmup": 0}
    args = {"url": emu.url, "workload": work}
    failed, res = run_module(sglang_bench, {**args, "workload": {**work, "min_tokens": True}}, capsys)
    assert not failed, res
    level = res["result"]["levels"][0]
    assert level["output_len_mismatch"]["count"] == 0 and level["output_tokens"] == 800
    forced = res["result"]["workload"]["forced_length"]
    assert (
        forced["ignore_eos"] is True and forced["max_tokens"] == forced["min_tokens"] == "the request's output length"
    )
    failed, res = run_module(sglang_bench, args, capsys)
    assert res["result"]["workload"]["forced_length"]["min_tokens"] is None
    assert res["result"]["levels"][0]["output_len_mismatch"]["count"] == 2


def test_missing_usage_counts_as_failure(emulator, monkeypatch, capsys):
    emu = emulator()
    drop_from_body(monkeypatch, "stream_options")
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [1], "requests": 2, "output_len": 8, "warmup": 0}},
        capsys,
    )
    assert failed and "no request completed" in res["msg"]
    assert list(res["result"]["levels"][0]["errors"]) == ["no usage chunk (stream_options.include_usage ignored)"]


def test_server_errors_are_counted(emulator, capsys):
    emu = emulator(fault="http_500")
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [2], "requests": 3, "output_len": 8, "warmup": 0}},
        capsys,
    )
    assert failed
    level = res["result"]["levels"][0]
    assert level["failed"] == 3 and next(iter(level["errors"])).startswith("HTTP 500")


def test_reasoning_is_counted_and_reported_apart(emulator, capsys):
    emu = emulator("--reasoning-parser", "qwen3")
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [1], "requests": 2, "output_len": 40, "warmup": 0}},
        capsys,
    )
    assert not failed
    level = res["result"]["levels"][0]
    rs = level["reasoning"]
    assert rs["reasoning_chunks"] > 0 and rs["content_chunks"] > 0 and rs["reasoning_tokens"] > 0
    assert level["output_tokens"] == 80 and level["output_len_mismatch"]["count"] == 0
    assert level["ttfo_ms"]["p50"] > level["ttft_ms"]["p50"]


def test_accept_length_falls_back_to_server_info(emulator, capsys):
    emu = emulator("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", accept_length=2)
    failed, res = run_module(
        sglang_bench,
        {"url": emu.url, "workload": {"concurrency": [1], "requests": 2, "output_len": 33, "warmup": 0}},
        capsys,
    )
    assert not failed
    spec = res["result"]["levels"][0]["spec_accept_length"]
    # since server start: the emulator's own 8-token warm-up request is mixed in
    assert spec["source"] == "server_info_cumulative" and spec["value"] == pytest.approx(2.0, rel=0.05)
    assert spec["before"] is not None and spec["before"] != spec["value"]  # the level moved the average


def test_cli_prints_the_table_and_writes_the_json(emulator, tmp_path, monkeypatch, capsys):
    emu = emulator("--api-key", "k-123")
    monkeypatch.setenv("EMU_KEY", "k-123")
    dest = tmp_path / "cli.json"
    rc = cli.main(
        [
            "bench",
            "--url",
            emu.url,
            "--concurrency",
            "1,2",
            "--requests",
            "2",
            "--input-len",
            "16",
            "--output-len",
            "16",
            "--api-key-env",
            "EMU_KEY",
            "--json",
            str(dest),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "EMULATED server: figures are synthetic"
    result = json.loads(dest.read_text())
    assert [lvl["completed"] for lvl in result["levels"]] == [2, 2]
    assert "k-123" not in dest.read_text()
    assert cli.main(["bench", "--url", emu.url, "--concurrency", "1", "--requests", "1"]) == 1  # no key: 401
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--url", emu.url, "--concurrency", "0"])
    assert exc.value.code == 2


def test_the_workload_table_is_the_one_source(monkeypatch):
    """Every benchmark workload setting is in one table (bench.WORKLOAD), and each place that names settings agrees
    with it, so that a setting added in one place only fails here: the module's `workload` option (its argument
    spec, and its documentation as ansible-doc reads it), the command line's flags and defaults, the role's
    variables (defaults/main.yml and both entry points' argument specs: type, elements, choices, and the table's
    default or the role's "none" for it) and tune's search-file workload."""
    import subprocess
    import sys

    import yaml

    from sglang_deploy.compare import bench_vars
    from sglang_deploy.tune import measures

    table = bench.WORKLOAD
    listed = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
    expected = {
        name: {"type": s.type, "default": listed(s.default)}
        | ({"elements": s.elements} if s.elements else {})
        | ({"choices": list(s.choices)} if s.choices else {})
        for name, s in table.items()
    }

    def spec_of(option: dict) -> dict:
        return {k: option[k] for k in ("type", "elements", "choices") if k in option} | {
            "default": option.get("default")
        }

    # The module: the argument spec main() gives Ansible, and its documentation.
    seen = {}

    def capture(argument_spec, **kwargs):
        seen.update(argument_spec)
        raise SystemExit

    monkeypatch.setattr(sglang_bench, "AnsibleModule", capture)
    with pytest.raises(SystemExit):
        sglang_bench.main()
    assert {k: spec_of(v) for k, v in seen["workload"]["options"].items()} == expected
    doc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-j", "sglang.deploy.sglang_bench"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    documented = json.loads(doc.stdout)["sglang.deploy.sglang_bench"]["doc"]["options"]["workload"]["suboptions"]
    assert {k: spec_of(v) for k, v in documented.items()} == expected
    assert all(documented[name]["description"] == s.help for name, s in table.items())
    # The command line: a flag per setting (a mapping's sub-settings: one each), the table's default.
    args = cli.build_parser().parse_args(["bench", "--url", "http://h"])
    for name, s in table.items():
        if s.options:
            assert {k: getattr(args, f"{name}_{k}") for k in s.options} == s.options
        else:
            assert getattr(args, name) == listed(s.default), name
    # The role: a variable per setting, and no other sglang_benchmark_* variable than the role's own.
    role = REPO / "roles" / "sglang_benchmark"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    entry_points = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    own = {"enabled", "again", "results_dir", "host_dir"}
    for options in [defaults] + [entry["options"] for entry in entry_points.values()]:
        names = {k.removeprefix(bench_vars.ROLE_PREFIX) for k in options if k.startswith(bench_vars.ROLE_PREFIX)}
        assert names - own == set(table), sorted((names - own) ^ set(table))
    for name in table:
        role_default = defaults[bench_vars.ROLE_PREFIX + name]
        assert bench_vars.from_role(name, role_default) == listed(table[name].default), name
        for entry in entry_points.values():
            option = entry["options"][bench_vars.ROLE_PREFIX + name]
            assert spec_of(option) == expected[name] | {"default": role_default}, (name, option)
    # tune: a search file's workload takes every setting, and its Workload holds each.
    assert measures.WORKLOAD_KEYS == set(table)
    assert [f.name for f in dataclasses.fields(measures.Workload)] == [*table, "dataset_sha256"]
    assert [bench.default_requests(c) for c in (1, 8, 32)] == [8, 16, 64]
    role_spec = entry_points["main"]["options"]
    for text in (table["requests"].help, role_spec["sglang_benchmark_requests"]["description"]):
        assert "2 x concurrency" in text and "at least 8" in text or "max(8, 2 x concurrency)" in text
    assert "once before the first level" in role_spec["sglang_benchmark_warmup"]["description"]
    doc = (REPO / "docs" / "benchmark.md").read_text()
    results = " ".join(doc[doc.index("## What a deploy measures") :].split())
    assert "max(8, 2 x concurrency)" in results and "warm-up requests once (default 2" in results
    assert f"about {table['input_len'].default} prompt tokens" in results
    assert f"forced to {table['output_len'].default} tokens by default" in results
