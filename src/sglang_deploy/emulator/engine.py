"""Generation timing: what a request produces (Plan) and when each token is due (Pacer, Engine)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
import random
import zlib

from .config import Config
from .faults import crash_mid_stream, rate_share, stalls
from .metrics import Stats

VOCAB = tuple(
    (
        "the model server token batch stream queue cache graph kernel tensor layer expert router draft "
        "verify accept prefill decode memory page radix prefix sample logit weight scale block warp thread "
        "launch profile latency rate window context prompt answer reason think check value index vector "
        "matrix buffer signal socket packet frame clock cycle field range order shard rank node link path "
        "input output state phase"
    ).split()
)  # 64 words; token j of a request is VOCAB[(seed + 7 * j) % 64]
VOCAB_ID_BASE = 1000
GARBAGE_TOKEN, GARBAGE_TOKEN_ID = "!", 0
EOS_TOKEN_ID = 151645
EOS_MIN, EOS_SPAN = 32, 225
REASONING_SHARE = 0.3
WAKE_TOLERANCE_S = 50e-6  # tokens due within this of a wake-up are sent in that wake-up


class Pacer:
    """One virtual clock shared by all running streams; it advances at the per-stream rate.

    The rate is min(decode, aggregate / running) times the noise factor and changes only when `running` or the
    factor changes; at each change the clock is re-anchored (v0 at t0), so every deadline stays absolute.
    """

    def __init__(self, decode_tok_s: float, aggregate_tok_s: float):
        self.loop = asyncio.get_running_loop()
        self.decode = decode_tok_s
        self.aggregate = aggregate_tok_s
        self.running = 0
        self.v0 = 0.0
        self.t0 = self.loop.time()
        self.rate = decode_tok_s
        self.factor = 1.0
        self._heap: list = []
        self._seq = 0
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = math.inf
        self.halted = False

    def v_at(self, t: float) -> float:
        return self.v0 + max(0.0, t - self.t0) * self.rate

    def deadline(self, v: float) -> float:
        return self.t0 + (v - self.v0) / self.rate

    def add_running(self, delta: int) -> None:
        self._retime(self.running + delta, self.factor)

    def set_factor(self, factor: float) -> None:
        """Every stream from now on at ``factor`` times the configured speed (the noise model)."""
        self._retime(self.running, factor)

    def _retime(self, running: int, factor: float) -> None:
        now = self.loop.time()
        self.v0, self.t0 = self.v_at(now), now
        self.running, self.factor = running, factor
        rate = self.decode
        if self.aggregate > 0 and self.running > 0:
            rate = min(rate, self.aggregate / self.running)
        self.rate = rate * factor
        self._arm(force=True)

    def halt(self) -> None:
        """The scheduler is gone (a node of the group died): no token is due any more, streams hang."""
        self.halted = True
        if self._handle is not None:
            self._handle.cancel()

    async def wait(self, v: float) -> None:
        if not self.halted and self.deadline(v) <= self.loop.time() + WAKE_TOLERANCE_S:
            return
        fut = self.loop.create_future()
        self._seq += 1
        heapq.heappush(self._heap, (v, self._seq, fut))
        self._arm(force=False)
        await fut

    def _arm(self, force: bool) -> None:
        if not self._heap or self.halted:
            return
        when = self.deadline(self._heap[0][0])
        if not force and when >= self._armed_at:
            return
        if self._handle is not None:
            self._handle.cancel()
        self._armed_at = when
        self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle, self._armed_at = None, math.inf
        limit = self.v_at(self.loop.time() + WAKE_TOLERANCE_S)
        heap = self._heap
        while heap and heap[0][0] <= limit:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)
        self._arm(force=True)


class Plan:
    """What one request will produce: length, finish reason, reasoning split, token text."""

    def __init__(
        self,
        prompt: str,
        prompt_tokens: int,
        max_new: int,
        min_new: int,
        ignore_eos: bool,
        reasoning: bool,
        garbage: bool,
        answer: tuple = (),
    ):
        self.seed = zlib.crc32(prompt.encode("utf-8", "replace"))
        self.prompt_tokens = prompt_tokens
        natural = EOS_MIN + self.seed % EOS_SPAN
        share = REASONING_SHARE if reasoning else 0.0
        # an answer (answers.py: its tokens) comes after the thinking the request would have had, then EOS
        thought = int(natural * share)
        stop_at = None if ignore_eos else max(thought + len(answer) if answer else natural, min_new)
        if stop_at is not None and stop_at < max_new:
            self.n, self.finish = stop_at, "stop"
        else:
            self.n, self.finish = max_new, "length"
        self.reasoning_tokens = min(thought, self.n) if answer else int(self.n * share)
        self.garbage = garbage
        self.answer = answer
        self.moved_from, self.moved_by = 0, 0  # the token faults (faults.move_tokens): from here on, move this far

    def word(self, j: int) -> int:
        """Token j's place in VOCAB."""
        return (self.seed + 7 * j + (self.moved_by if j >= self.moved_from else 0)) % len(VOCAB)

    def _piece(self, j: int) -> str:
        k = j - self.reasoning_tokens
        if 0 <= k < len(self.answer):
            return self.answer[k]
        return (" " if self.answer and k == len(self.answer) else "") + VOCAB[self.word(j)] + " "

    def text(self, start: int, end: int) -> str:
        if self.garbage:
            return GARBAGE_TOKEN * (end - start)
        return "".join(self._piece(j) for j in range(start, end))

    def ids(self, start: int, end: int) -> list[int]:
        """The token ids of /generate, which never answers (no answer tokens)."""
        if self.garbage:
            return [GARBAGE_TOKEN_ID] * (end - start)
        return [VOCAB_ID_BASE + self.word(j) for j in range(start, end)]

    def finish_json(self) -> tuple:
        """(finish_reason, matched_stop) in OpenAI form."""
        return (self.finish, EOS_TOKEN_ID) if self.finish == "stop" else (self.finish, None)


class Engine:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        self.share = rate_share(cfg.fault)
        self.pacer = Pacer(cfg.decode_tok_s * self.share, cfg.aggregate_tok_s * self.share)
        self.slots = asyncio.Semaphore(cfg.max_running) if cfg.max_running else None
        self.stats = Stats()
        if cfg.noise > 0:
            self.rng = random.Random(cfg.noise_seed)
            self._redraw()

    def _redraw(self) -> None:
        """The noise model: every noise_period_s the speed (decode, aggregate, first token) moves to a new factor,
        lognormal around 1 with sd ``noise``, as a real server's speed drifts from run to run."""
        self.pacer.set_factor(self.rng.lognormvariate(0.0, self.cfg.noise))
        self.loop.call_later(self.cfg.noise_period_s, self._redraw)

    async def run(self, plan: Plan, internal: bool = False):
        """Yield (start, end) token ranges, one per step: the prefill token, then decode steps."""
        cfg, st, loop = self.cfg, self.stats, self.loop
        arrival = loop.time()
        st.queued += 1
        try:
            if self.slots is not None:
                await self.slots.acquire()
        finally:
            st.queued -= 1
        self.pacer.add_running(+1)
        finished = False
        try:
            if stalls(cfg.fault, internal):
                await loop.create_future()  # never done: the scheduler is gone, the request stays running
            await asyncio.sleep(cfg.ttft_ms / 1000.0 / self.pacer.factor / self.share)
            # The decode steps count from the first token's real time, not its due time: after a late first token
            # (a busy host) they must not catch up, which would read faster than the configured rate.
            first_at = loop.time()
            st.ttft.observe(first_at - arrival)
            st.prefilled_tokens += plan.prompt_tokens
            v_first = self.pacer.v_at(first_at)
            if plan.n > 0:
                st.emitted_tokens += 1
                yield 0, 1
            crash_at = plan.n // 2 if cfg.fault == "crash_mid_stream" and not internal else None
            done, step, step_at = 1, 0, first_at
            while done < plan.n:
                if crash_at is not None and done >= crash_at:
                    crash_mid_stream()
                step += 1
                last = min(plan.n - 1, int(step * cfg.accept_length + 1e-9))
                await self.pacer.wait(v_first + last)
                if cfg.spec:
                    st.spec_verify_calls += 1
                    st.spec_accepted_tokens += last + 1 - done
                st.emitted_tokens += last + 1 - done
                st.itl.observe((loop.time() - step_at) / (last + 1 - done))
                step_at = loop.time()
                yield done, last + 1
                done = last + 1
            finished = True
            st.num_requests += 1
            st.prompt_tokens += plan.prompt_tokens
            st.generation_tokens += plan.n
            st.e2e.observe(loop.time() - arrival)
        finally:
            if not finished:
                st.aborted += 1
            self.pacer.add_running(-1)
            if self.slots is not None:
                self.slots.release()

    async def drain(self, plan: Plan, internal: bool = False) -> None:
        """Run a request to its end without looking at its steps (non-streaming responses, warm-up)."""
        async with contextlib.aclosing(self.run(plan, internal)) as steps:
            async for _unused in steps:
                pass
