"""The quality gate's fingerprint store on the controller (sglang_deploy.fingerprints) and the gate's judgement of
fingerprints (ansible_collections.sglang.deploy.plugins.module_utils.quality): what is broken at once, drift against a reference, the settings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sglang_deploy import fingerprints
from ansible_collections.sglang.deploy.plugins.module_utils import quality

PROMPT = quality.FINGERPRINT_PROMPTS[0]


def prints(ids=(5, 6, 7, 8), logprobs=(-0.1, -0.2, -0.3, -0.4), prompt=PROMPT) -> list:
    return [{"prompt": prompt, "ids": list(ids), "logprobs": list(logprobs), "top": [[i] for i in ids]}]


def test_a_kept_fingerprint_is_the_reference_of_the_same_host_model_and_profile_first(tmp_path):
    store = str(tmp_path)
    fingerprints.save(store, "qwen", "gpu-1", "stack-a", "baseline", prints())
    other = fingerprints.save(store, "qwen", "gpu-1", "stack-a", "nextn", prints(ids=(9, 9, 9, 1)))
    assert fingerprints.reference(store, "qwen", "gpu-1", "baseline")["fingerprint"] == prints()
    # a profile with none of its own is held against the newest of the model; another model has none
    assert fingerprints.reference(store, "qwen", "gpu-1", "dense")["file"] == other
    assert fingerprints.reference(store, "llama", "gpu-1", "baseline") is None
    # a candidate stack's deploy of baseline is held against the one it replaces
    assert fingerprints.reference(store, "qwen", "gpu-1", "baseline")["stack"] == "stack-a"


def test_one_host_never_becomes_another_hosts_reference(tmp_path):
    """Red-team: a hostile host that passes its own gate with wrong tokens would have failed every honest host."""
    fingerprints.save(str(tmp_path), "qwen", "evil", "s", "baseline", prints(ids=(1, 1, 2, 2)))
    assert fingerprints.reference(str(tmp_path), "qwen", "gpu-1", "baseline") is None


@pytest.mark.parametrize(
    "entry",
    [
        [],
        {"fingerprint": "x"},
        {"fingerprint": [{"prompt": "not one of ours", "ids": [1], "logprobs": [-1.0]}]},
        {"fingerprint": [{"prompt": PROMPT, "ids": [1, 2], "logprobs": [-1.0]}]},
        {"fingerprint": [{"prompt": PROMPT, "ids": ["1"], "logprobs": [-1.0]}]},
        {"fingerprint": [{"prompt": PROMPT, "ids": [1], "logprobs": [None]}]},
        {"fingerprint": [{"prompt": PROMPT, "ids": [1], "logprobs": [-1.0], "top": [list(range(21))]}]},
        {"fingerprint": [{"prompt": PROMPT, "ids": [1] * 257, "logprobs": [-1.0] * 257, "top": []}]},
    ],
)
def test_a_stored_fingerprint_that_is_not_one_is_refused_naming_the_file(tmp_path, entry):
    path = tmp_path / "qwen" / "gpu-1" / "s" / "baseline.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(entry))
    with pytest.raises(fingerprints.FingerprintError, match=f"{path}.*remove"):
        fingerprints.reference(str(tmp_path), "qwen", "gpu-1", "baseline")


def test_names_from_a_host_stay_inside_the_store(tmp_path):
    kept = fingerprints.save(str(tmp_path), "../../etc", "..", "../x", "p/../../q", prints())
    parts = Path(kept).relative_to(tmp_path).parts
    assert len(parts) == 4 and not {"..", "."} & set(parts)


def test_a_link_planted_at_the_fingerprint_is_refused_and_not_followed(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    dest = fingerprints.path_for(str(tmp_path / "store"), "qwen", "gpu-1", "s", "baseline")
    dest.parent.mkdir(parents=True)
    dest.symlink_to(target)
    with pytest.raises(ValueError, match="not a regular file"):
        fingerprints.save(str(tmp_path / "store"), "qwen", "gpu-1", "s", "baseline", prints())
    assert target.read_text() == "keep"


@pytest.mark.parametrize(
    ("got", "named"),
    [
        (prints(logprobs=(-0.1, math.nan, -0.3, -0.4)), "NaN"),
        (prints(logprobs=(-0.1, None, -0.3, -0.4)), "NaN"),
        (prints(logprobs=(-0.1, math.inf, -0.3, -0.4)), "NaN"),
        (prints(logprobs=(-0.1, 0.5, -0.3, -0.4)), "> 0"),
        (prints(ids=(), logprobs=()), "no token"),
        (prints(ids=[0] * 8, logprobs=[-0.1] * 8), "repeated 8 times"),
    ],
)
def test_a_broken_fingerprint_fails_at_once(got, named):
    assert named in " ".join(quality.broken(got))


def test_drift_against_the_reference_and_the_tolerances():
    ref = prints(ids=(5, 6, 7, 8))
    same = quality.drift(prints(logprobs=(-0.1, -0.2, -0.3, -0.9)), ref)
    assert (same["agreement"], same["max_logprob_drift"]) == (1.0, 0.5)
    moved = quality.drift(prints(ids=(5, 6, 1, 2)), ref)
    assert moved["agreement"] == 0.5 and moved["prompts"][0]["first_difference"] == 2
    s = quality.checked_settings({})
    assert quality.held(same, s, lossless=False) == []
    assert "greedy tokens moved: token agreement 0.50" in quality.held(moved, s, lossless=False)[0]
    nearly = quality.drift(prints(ids=(5, 6, 7, 2)), ref)
    assert quality.held(nearly, s, lossless=False) == []
    assert "lossless mode (speculative decoding) changed greedy tokens" in quality.held(nearly, s, lossless=True)[0]
    assert "logprob drift 0.500 over 0.100" in quality.held(same, {**s, "max_logprob_drift": 0.1}, False)[0]
    assert quality.held(quality.drift(prints(), []), s, False) == []  # no reference: nothing to hold against


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"pass_mark": 1.5}, "from 0 to 1"),
        ({"pass_mark": "x"}, "pass_mark"),
        ({"bogus": 1}, "unknown quality"),
        ({"top_k": 1000}, "from 0 to 20"),
        ({"fingerprint_tokens": 10**6}, "from 0 to 256"),
    ],
)
def test_quality_settings_are_checked(given, named):
    with pytest.raises(ValueError, match=named):
        quality.checked_settings(given)
    assert quality.checked_settings({"pass_mark": "0.9", "top_k": "3"}) == {
        **quality.DEFAULTS,
        "pass_mark": 0.9,
        "top_k": 3,
    }


@pytest.mark.parametrize(
    ("text", "expected", "case", "ok"),
    [
        ("42", "42", False, True),
        ("The answer is 42.", "42", False, True),
        ("420", "42", False, False),
        ("paris", "Paris", False, True),
        ("blue", "BLUE", True, False),
        ("3, 4, 5, 6", "3,4,5,6", False, False),
    ],
)
def test_an_answer_passes_when_it_holds_the_expected_one_as_a_word(text, expected, case, ok):
    assert quality.answered(text, expected, case) is ok


def test_a_folder_of_the_store_that_is_a_link_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "qwen").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="link"):
        fingerprints.save(str(tmp_path / "store"), "qwen", "gpu-1", "s", "baseline", prints())
    assert list(elsewhere.iterdir()) == []


def test_two_names_never_share_a_segment():
    assert fingerprints.part("gpu_1") == "gpu_1" and fingerprints.part("gpu/1") != "gpu_1"
    assert len({fingerprints.part(n) for n in ("gpu/1", "gpu 1", "gpu_1", "../gpu_1", "gpu-1")}) == 5


def test_a_hostile_hosts_fingerprint_is_not_kept_whatever_it_sends(tmp_path):
    """Red team: token ids of 4,300 digits made a 92 MB file; the ids are bounded and the file is checked before it is
    written; a logprob of 400 digits is refused (float() cannot take it)."""
    huge = int("9" * 4299)
    with pytest.raises(fingerprints.FingerprintError, match="whole number"):
        fingerprints.save(str(tmp_path), "qwen", "evil", "s", "p", prints(ids=(huge, 1, 2, 3)))
    with pytest.raises(fingerprints.FingerprintError, match="finite"):
        fingerprints.save(str(tmp_path), "qwen", "evil", "s", "p", prints(logprobs=(10**400, -0.2, -0.3, -0.4)))
    assert not list(tmp_path.rglob("*.json"))


def test_a_benchmark_result_is_written_only_up_to_a_bound():
    """Red team: 1 MB of nested lists from a host became a 405 MB indented file on the controller."""
    from sglang_deploy.compare import validate

    deep = [0] * 10
    for _ in range(200):
        deep = [deep]
    with pytest.raises(ValueError, match="deeper"):
        validate.result_text({"started_at": "x", "x": deep})
    with pytest.raises(ValueError, match="over"):
        validate.result_text({"x": "y" * (validate.MAX_RESULT_BYTES + 1)})
    assert json.loads(validate.result_text({"levels": [{"concurrency": 1}]})) == {"levels": [{"concurrency": 1}]}
    assert validate.number(10**400) is False and validate.number(3) is True
