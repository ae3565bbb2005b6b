"""Host-to-host checkpoint copies (the sglang_model role's fan-out): who copies from whom, round by round. Runs on
the controller (the filter sglang_model_fanout_rounds); the copies themselves are the role's tasks."""

from __future__ import annotations


def fanout_rounds(hosts: list[str], holding: list[bool]) -> list[dict[str, str]]:
    """Who copies the checkpoint from whom, round by round: hosts in play order, holding[i] true where hosts[i]
    already has it. Without a holder, the first host that lacks it gets it from the source ('' in round 0); then in
    each round every holder serves one host that lacks it, so the holders double: log2(N) + 1 rounds for N hosts.
    Returns one mapping receiver -> source host per round."""
    holders = [host for host, has in zip(hosts, holding) if has]
    waiting = [host for host, has in zip(hosts, holding) if not has]
    rounds = []
    if waiting and not holders:
        rounds.append({waiting[0]: ""})
        holders, waiting = [waiting[0]], waiting[1:]
    while waiting:
        now = dict(zip(waiting, holders))
        rounds.append(now)
        holders, waiting = holders + list(now), waiting[len(now) :]
    return rounds
