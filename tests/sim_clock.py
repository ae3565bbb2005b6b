"""A simulated clock for asyncio code that takes its time from the loop (loop.time, call_at, asyncio.sleep), as the
emulator's engine does: the loop never sleeps, it jumps to its next timer, so every time is exact and the host's
load cannot change it."""

from __future__ import annotations

import asyncio
import selectors


class SimulatedLoop(asyncio.SelectorEventLoop):
    def __init__(self):
        self.now = 0.0
        super().__init__(_JumpingSelector(self))

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """The loop held up (a busy host): the time moves on while no callback runs."""
        self.now += seconds


class _JumpingSelector(selectors.DefaultSelector):
    def __init__(self, loop: SimulatedLoop):
        super().__init__()
        self._loop = loop

    def select(self, timeout=None):
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            raise RuntimeError("the simulated loop has nothing left to wait for: the coroutine waits forever")
        self._loop.advance(timeout)
        return events


def run(coro):
    """coro's result, run on a fresh SimulatedLoop that starts at time 0."""
    with asyncio.Runner(loop_factory=SimulatedLoop) as runner:
        return runner.run(coro)
