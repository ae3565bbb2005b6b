"""Our trace replay against the real `python -m sglang.bench_serving --dataset-name mooncake` (sglang 0.5.16) on
the emulator (issue 51, item 3; benchmarks/trace_parity.py measures the timing figures with repeats): one small
trace each way, the counts compared exactly, as the tools report them and as the server saw them (its request log).

* `matched`: one hash id a request and the input length bench_serving's replay sends for one id
  (trace_parity.their_words): both tools send the same requests, input and output tokens;
* `shaped`: 1 to 3 ids a request and the trace's own lengths: the output tokens agree, the input tokens do not by
  definition (bench_serving 0.5.16 builds a prompt from the ids alone, 127 words an id + 11, whatever input_length
  says; ours sends input_length), each tool's count checked against its own definition.

When the requests arrive is a wall-clock figure a loaded machine moves: benchmarks/trace_parity.py prints each
tool's arrival span and lag at the server; our replay's send times are asserted on the simulated clock in
tests/test_traffic_replay.py. Skips without the bench_serving Python, as tests/test_bench_serving_real.py does (which
says how to install it).
"""

from __future__ import annotations

from bench_serving_run import Stepped
from emulator_proc import Emulator
from test_bench_serving_real import bench_serving_python
from trace_parity import ours, server_view, their_flags, their_words, theirs_of, traces

from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture

REQUESTS, RATE = 16, 10.0


def test_trace_replays_send_the_same_requests_and_tokens_at_the_same_times(tmp_path):
    python = bench_serving_python()
    made = traces(tmp_path, REQUESTS, RATE)
    emu = Emulator(tmp_path, decode_tok_s=200, ttft_ms=20).wait_ready()
    levels = [["--dataset-path", path, "--num-prompts", str(REQUESTS)] for path, _records in made.values()]
    theirs_run = Stepped(
        python,
        tmp_path / "theirs.jsonl",
        levels,
        their_flags(emu.url, tmp_path, 1.0),
        tmp_path / "t.log",
        mooncake_fix=True,
    )
    runs = {}
    try:
        capture.switch(emu.url, None, True)
        for name, (path, records) in made.items():
            for tool in ("bench_serving", "ours"):
                seen = len(emu.log_lines())
                figures = theirs_of(theirs_run.level()[0]) if tool == "bench_serving" else ours(emu.url, path, 1.0)
                runs[name, tool] = figures, server_view(emu.log_lines()[seen:], records, 1.0)
    finally:
        theirs_run.close()
        emu.stop()
    for name, (_path, records) in made.items():
        outputs = sum(r.output_length for r in records)
        inputs = {
            "ours": sum(r.input_length for r in records),
            "bench_serving": sum(their_words(len(r.hash_ids)) for r in records),
        }
        for tool in ("ours", "bench_serving"):
            figures, view = runs[name, tool]
            assert figures["requests completed"] == view["requests"] == REQUESTS, (name, tool, figures)
            assert figures["total output tokens"] == view["output_tokens"] == outputs, (name, tool, figures, view)
            assert figures["total input tokens"] == view["input_tokens"] == inputs[tool], (name, tool, figures, view)
        assert (inputs["ours"] == inputs["bench_serving"]) == (name == "matched"), inputs
