"""The emulator against the quality gate (ansible_collections.sglang.deploy.plugins.module_utils.quality, issue 49): right answers and sound logprobs
without a fault; the faults wrong, nan_logprobs, nondeterministic and spec_changes_tokens each caught by the gate."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest
from emulator_proc import Emulator

from sglang_deploy.emulator import answers
from sglang_deploy.emulator.config import Config
from ansible_collections.sglang.deploy.plugins.module_utils import quality
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import Endpoint

SPEC = ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3")
FAST = {"ttft_ms": 1, "decode_tok_s": 5000}
QUICK = {"timeout": 20.0}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Started once, on demand: name -> a ready Emulator."""
    started: dict = {}
    kinds = {
        "plain": ((), {}),
        "wrong": ((), {"fault": "wrong"}),
        "nan": ((), {"fault": "nan_logprobs"}),
        "nondeterministic": ((), {"fault": "nondeterministic"}),
        "spec": (SPEC, {}),
        "spec_lossy": (SPEC, {"fault": "spec_changes_tokens"}),
    }

    def get(name: str) -> Emulator:
        if name not in started:
            flags, env = kinds[name]
            started[name] = Emulator(tmp_path_factory.mktemp(name), *flags, **FAST, **env).wait_ready()
        return started[name]

    yield get
    for e in started.values():
        e.stop()


def post(e: Emulator, path: str, body: dict) -> dict:
    req = urllib.request.Request(e.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())


def prints(e: Emulator) -> list:
    return quality.fingerprint(Endpoint.parse(e.url), None, quality.checked_settings(QUICK))


def test_every_question_is_answered_right_in_chat_stream_and_completions(servers):
    e = servers("plain")
    for qid, prompt, expected, case in quality.QUESTIONS:
        chat = post(e, "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], "max_tokens": 64})
        choice = chat["choices"][0]
        assert quality.answered(choice["message"]["content"], expected, case), (qid, choice)
        assert choice["finish_reason"] == "stop" and chat["usage"]["completion_tokens"] < 10
        text = post(e, "/v1/completions", {"prompt": prompt, "max_tokens": 64})["choices"][0]["text"]
        assert quality.answered(text, expected, case), (qid, text)
    streamed = urllib.request.urlopen(
        urllib.request.Request(
            e.url + "/v1/chat/completions",
            json.dumps({"messages": [{"role": "user", "content": quality.QUESTIONS[-1][1]}], "stream": True}).encode(),
            {"Content-Type": "application/json"},
        ),
        timeout=20,
    ).read()
    events = [json.loads(line[6:]) for line in streamed.decode().split("\n\n") if line.startswith("data: {")]
    content = "".join(c["delta"].get("content") or "" for ev in events for c in ev["choices"])
    assert content == "3,4,5,6"


def test_an_answer_is_followed_by_words_when_eos_is_ignored_and_other_prompts_keep_the_vocabulary(servers):
    e = servers("plain")
    body = {"messages": [{"role": "user", "content": quality.QUESTIONS[0][1]}], "max_tokens": 5, "ignore_eos": True}
    answer = post(e, "/v1/chat/completions", body)["choices"][0]
    assert answer["finish_reason"] == "length" and answer["message"]["content"].startswith("42 ")
    assert answers.answer("tell me about the emulator") is None
    assert answers.answer("List the numbers from 1 to 1000 separated by commas") is None


def test_the_gate_passes_against_the_emulator_without_a_fault(servers):
    e = servers("plain")
    result = quality.gate(e.url, settings=QUICK)
    assert result["passed"], result["problems"]
    assert result["answers"]["score"] == 1.0
    again = quality.gate(e.url, settings=QUICK, reference=result["fingerprint"])
    assert again["passed"] and again["drift"]["agreement"] == 1.0 and again["drift"]["max_logprob_drift"] == 0


def test_generate_logprobs_are_deterministic_finite_and_the_top_k_puts_the_chosen_token_first(servers):
    e = servers("plain")
    body = {
        "text": "The capital of France is",
        "sampling_params": {"temperature": 0, "max_new_tokens": 12},
        "return_logprob": True,
        "top_logprobs_num": 5,
    }
    out = post(e, "/generate", body)
    meta = out["meta_info"]
    assert [t[1] for t in meta["output_token_logprobs"]] == out["output_ids"]
    assert all(-3 <= t[0] < 0 and math.isfinite(t[0]) and t[2] is None for t in meta["output_token_logprobs"])
    for (lp, tid, _), row in zip(meta["output_token_logprobs"], meta["output_top_logprobs"]):
        assert len(row) == 5 and row[0][:2] == [lp, tid] and max(r[0] for r in row) == lp
        assert len({r[1] for r in row}) == 5
    assert post(e, "/generate", body)["meta_info"]["output_token_logprobs"] == meta["output_token_logprobs"]
    plain = post(e, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 3}})["meta_info"]
    assert "output_token_logprobs" not in plain and "output_top_logprobs" not in plain


def test_wrong_answers_a_fixed_share_and_the_gate_names_them(servers):
    e = servers("wrong")
    first = quality.gate(e.url, settings=QUICK)
    answers_ = first["answers"]
    assert not first["passed"] and answers_["score"] < quality.DEFAULTS["pass_mark"]
    wrong_ids = [w["id"] for w in answers_["wrong"]]
    expected = [q[0] for q in quality.QUESTIONS if answers.is_wrong(q[1], 0.5)]
    assert wrong_ids == expected and len(wrong_ids) < len(quality.QUESTIONS)
    assert "answers: score" in first["problems"][0] and quality.QUESTIONS[0][1] in first["problems"][0]
    assert [w["id"] for w in quality.gate(e.url, settings=QUICK)["answers"]["wrong"]] == wrong_ids
    assert not quality.broken(first["fingerprint"])  # only the answers are wrong
    assert first["firm"]  # not numerics: tune prunes what holds this combination


def test_nan_logprobs_are_reported_broken(servers):
    problems = quality.broken(prints(servers("nan")))
    assert len(problems) == len(quality.FINGERPRINT_PROMPTS) and "logprob None at token 0" in problems[0]


def test_nondeterministic_tokens_disagree_from_call_to_call(servers):
    e = servers("nondeterministic")
    one, two = prints(e), prints(e)
    d = quality.drift(two, one)
    assert d["agreement"] < 1 and all(r["first_difference"] in (None, 2, 3, 4) for r in d["prompts"])
    assert quality.held(d, quality.checked_settings(QUICK), lossless=False)
    drifted = quality.gate(e.url, settings=QUICK, reference=one)
    assert not drifted["passed"] and not drifted["firm"]  # a drift past a tolerance alone may be numerics


def test_spec_changes_tokens_is_flagged_against_the_non_speculative_fingerprint(servers):
    reference = prints(servers("plain"))
    assert quality.drift(prints(servers("spec")), reference)["agreement"] == 1.0
    result = quality.gate(servers("spec_lossy").url, settings=QUICK, reference=reference, lossless=True)
    assert not result["passed"]
    assert [r["first_difference"] for r in result["drift"]["prompts"]] == [5] * len(quality.FINGERPRINT_PROMPTS)
    assert any("lossless mode" in p for p in result["problems"]) and result["firm"]


def test_spec_changes_tokens_without_speculative_decoding_changes_nothing(servers, tmp_path):
    e = Emulator(tmp_path, **FAST, fault="spec_changes_tokens").wait_ready()
    try:
        assert quality.drift(prints(e), prints(servers("plain")))["agreement"] == 1.0
    finally:
        e.stop()


@pytest.mark.parametrize("share", ["-0.1", "1.5"])
def test_wrong_share_out_of_range_is_refused_naming_the_setting(share, capsys):
    with pytest.raises(SystemExit) as exc:
        Config(["--model-path", "m"], {"SGLANG_EMU_WRONG_SHARE": share})
    assert exc.value.code == 2 and "SGLANG_EMU_WRONG_SHARE must be from 0 to 1" in capsys.readouterr().err


def test_a_fingerprint_with_no_tokens_on_both_sides_is_reported_broken_not_a_crash():
    empty = [{"prompt": p, "ids": [], "logprobs": [], "top": []} for p in quality.FINGERPRINT_PROMPTS]
    d = quality.drift(empty, empty)
    assert d["agreement"] == 1.0 and quality.held(d, quality.checked_settings(None), lossless=True) == []
    assert all("no token came back" in problem for problem in quality.broken(empty))
