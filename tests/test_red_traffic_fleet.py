"""Red-team proofs against the fleet capture (issue 51)."""

from __future__ import annotations

from pathlib import Path

from emulator_proc import run_module  # noqa: F401  first: puts the repo's module_utils on the path

from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace

FIXTURE = Path(__file__).parent / "fixtures" / "smg-1.13.0-request-log.txt"
R = trace.Record


def test_what_a_host_returns_cannot_confirm_a_guessed_prompt():
    """Before 356fa63 a host returned hash ids numbered on the host (0, 1, 2...). Now it returns the blocks' raw
    digests (first 8 bytes of an unsalted sha256 chain of the token ids) in the module result, which lands in the
    async job file, the runner's artifacts and events: anyone holding them can confirm a guessed prompt (a system
    prompt, a document, a short answer: one block) by hashing its token ids. A per-capture secret key (HMAC, no_log,
    dropped after the merge) keeps the cross-host equality without that."""
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture

    secret_prompt = [101, 2023, 2003, 1996, 3595, 102]  # a short prompt's token ids: one partial block
    got = [capture.Captured(1.0, len(secret_prompt), 3, tuple(trace.block_digests(secret_prompt)), None)]
    returned = capture.to_trace(got, numbered=False)[0].hash_ids
    guess = tuple(int.from_bytes(d, "big") for d in trace.block_digests(secret_prompt))
    assert returned != guess, "the host's result confirms the guessed prompt"
