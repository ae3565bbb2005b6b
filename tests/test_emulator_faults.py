"""The emulator's faults stall and slow (issue 50): on the simulated clock (tests/sim_clock.py), the engine's timing
exactly, whatever the host's load."""

from __future__ import annotations

import asyncio

import pytest

import sim_clock
from sglang_deploy.emulator import faults
from sglang_deploy.emulator.config import FAULTS, Config
from sglang_deploy.emulator.engine import Engine, Plan

MODEL = "Qwen/Qwen3.5-397B-A17B-NVFP4"
RATES = {"SGLANG_EMU_TTFT_MS": "5", "SGLANG_EMU_DECODE_TOK_S": "1000"}


def simulated(fault: str | None, scenario):
    settings = {**RATES, **({"SGLANG_EMU_FAULT": fault} if fault else {})}

    async def main():
        return await scenario(Engine(Config(["--model-path", MODEL], settings)))

    return sim_clock.run(main())


async def steps(engine, tokens: int, internal: bool = False) -> list:
    """The times of each step of one request for ``tokens`` tokens (EOS ignored)."""
    loop, stamps = asyncio.get_running_loop(), []
    async for _ in engine.run(Plan("x", 1, tokens, 0, True, False, False), internal):
        stamps.append(loop.time())
    return stamps


def test_both_faults_are_in_the_fault_table():
    assert {"stall", "slow"} <= set(FAULTS)


def test_stall_admits_a_request_that_never_gets_a_token_while_the_warm_up_passes():
    async def scenario(engine):
        request = asyncio.ensure_future(steps(engine, 10))
        await asyncio.sleep(3600)  # an hour on the simulated clock
        seen = (request.done(), engine.pacer.running, engine.stats.emitted_tokens)
        warm_up = await steps(engine, 3, internal=True)
        request.cancel()
        return seen, warm_up

    (done, running, emitted), warm_up = simulated("stall", scenario)
    assert (done, running, emitted) == (False, 1, 0)  # /metrics: one running request, no token generated
    assert len(warm_up) == 3


def test_slow_runs_at_a_share_of_the_rate_and_without_a_fault_at_the_rate():
    slow = simulated("slow", lambda engine: steps(engine, 101))
    normal = simulated(None, lambda engine: steps(engine, 101))
    assert normal[0] == pytest.approx(0.005) and normal[-1] - normal[0] == pytest.approx(0.1)
    assert slow[0] == pytest.approx(0.005 / faults.SLOW_SHARE)
    assert slow[-1] - slow[0] == pytest.approx(0.1 / faults.SLOW_SHARE)
