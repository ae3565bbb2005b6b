"""The sweep: /health first, warm-up (not counted), then one level per closed-loop concurrency or per request
rate (Poisson arrivals), or the levels of an SLA search, each with a fixed number of requests from the dataset
and forced output lengths, speculative accept length per level from /metrics counter deltas. A timeout stops
the level at once and the sweep with it; a server that stops answering ends the sweep; either way the levels
measured so far are kept and the rest are marked failed (`stopped`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import resource
import socket
import sys
import time
from datetime import UTC, datetime

from .. import server_http
from ..files import write_file
from . import dataset
from .dataset import Dataset
from ..readiness import check_output, dummy_weights
from .client import BENCH_VERSION, Connection, Target, stream_chat
from .metrics import (
    DEFINITIONS,
    Timeline,
    level_metrics,
    parse_prometheus,
    request_details,
    server_info_accept_length,
    spec_accept_from_counters,
)
from .table import format_level_line
from .workload import Level, arrival_gaps, arrivals, chat_body, check_settings, words

EXAMPLES = 3
TOKENIZE_SAMPLE_WORDS = 1000  # common words tokenized once to count generated prompts in the server's tokens
MIN_TOKENS_PER_WORD = 0.25  # fewer for the sample is no tokenizer's count (prompts would grow words / tokens_per_word)
ANSWERS_PER_TOKENIZE = 64  # recorded answers counted per POST /v1/tokenize (its token ids stay under the body cap)
RATE_PREOPEN = 32  # connections opened before a rate level without a concurrency cap (more open on demand)
TRACE_ARRIVALS = "trace: its timestamps x trace_time_scale from the level's start"


class ServerUnusable(Exception):
    """The server cannot be benchmarked now: not listening, not ready, hung, or not speaking HTTP."""


class _Probe:
    """The plain requests around the measured streams (server_http, in a thread), bounded by the timeout."""

    def __init__(self, target: Target, timeout: float):
        self.target = target
        self.timeout = timeout

    async def get(self, path: str) -> server_http.Response:
        """The response; ServerUnusable when there is none within the timeout."""
        ep = self.target.endpoint
        try:
            return await asyncio.to_thread(
                server_http.request, ep, "GET", path, api_key=self.target.api_key, timeout=self.timeout
            )
        except ConnectionRefusedError as exc:
            raise ServerUnusable(f"nothing listens at {ep.url} (connection refused)") from exc
        except TimeoutError as exc:
            detail = str(exc) if str(exc) not in ("", "timed out") else f"no answer within {self.timeout:g} s"
            raise ServerUnusable(f"GET {path} at {ep.url}: {detail} (is the server hung?)") from exc
        except OSError as exc:
            raise ServerUnusable(f"GET {path} at {ep.url}: {type(exc).__name__}: {exc}") from exc

    async def json(self, path: str):
        return (await self.get(path)).json()

    async def tokenize(self, model: str | None, prompt, add_special_tokens: bool):
        """POST /v1/tokenize (SGLang) of a text or a list of texts; the server_http response, its errors raised."""
        body = {"prompt": prompt, "add_special_tokens": add_special_tokens}
        if model:
            body["model"] = model
        return await asyncio.to_thread(
            server_http.request, self.target.endpoint, "POST", "/v1/tokenize", body, self.target.api_key, self.timeout
        )

    async def tokens_per_word(self, model: str | None) -> float | None:
        """Tokens per common word in the server's tokenizer: POST /v1/tokenize (SGLang) of TOKENIZE_SAMPLE_WORDS
        words; None when the server has no such endpoint or answers something else, a count no tokenizer gives
        (dataset.implausible_count, or under MIN_TOKENS_PER_WORD a word) included."""
        sample = words(random.Random(0), TOKENIZE_SAMPLE_WORDS)
        try:
            resp = await self.tokenize(model, sample, add_special_tokens=False)
        except OSError as exc:
            url = self.target.endpoint.url
            raise ServerUnusable(f"POST /v1/tokenize at {url}: {type(exc).__name__}: {exc}") from exc
        answer = resp.json()
        count = answer.get("count") if isinstance(answer, dict) else None
        if (
            isinstance(count, int)
            and not isinstance(count, bool)
            and count >= MIN_TOKENS_PER_WORD * TOKENIZE_SAMPLE_WORDS
            and not dataset.implausible_count(sample, count)
        ):
            return count / TOKENIZE_SAMPLE_WORDS
        return None

    async def count_answers(self, model: str | None, data: Dataset) -> None:
        """The recorded answers' lengths in the server's tokens (sharegpt, custom conversations): POST /v1/tokenize
        of ANSWERS_PER_TOKENIZE answers at a time (SGLang counts a list of texts). Answers left uncounted keep
        words x tokens_per_word: all of them on a server that answers anything else, the rest after an answer that
        is not HTTP or comes too late, and a batch holding a count no tokenizer gives (dataset.implausible_count).
        Data.count_answers records which, and prunes the rows counted under 2 tokens as bench_serving does."""
        answers, counts, notes = data.answers(), {}, []
        if not answers:
            return
        for start in range(0, len(answers), ANSWERS_PER_TOKENIZE):
            part = answers[start : start + ANSWERS_PER_TOKENIZE]
            try:
                # bench_serving's output length: len(tokenizer.encode(answer)), special tokens added (a BOS on Llama-3)
                resp = await self.tokenize(model, [text for _unused, text in part], add_special_tokens=True)
            except server_http.HttpError as exc:  # an answer over the body cap, or not HTTP
                notes.append(f"from request {part[0][0] + 1} on: /v1/tokenize answered no HTTP ({exc})")
                break
            except TimeoutError:  # SlowAnswer too: counting is worth no more than the timeout
                notes.append(f"from request {part[0][0] + 1} on: /v1/tokenize gave no answer within {self.timeout:g} s")
                break
            except OSError as exc:
                url = self.target.endpoint.url
                raise ServerUnusable(f"POST /v1/tokenize at {url}: {type(exc).__name__}: {exc}") from exc
            answer = resp.json()
            got = answer.get("count") if isinstance(answer, dict) else None
            if not (
                isinstance(got, list)
                and len(got) == len(part)
                and all(isinstance(c, int) and not isinstance(c, bool) for c in got)
            ):
                if start:
                    notes.append(f"from request {part[0][0] + 1} on: /v1/tokenize answered no list of counts")
                break
            bad = next(((i, text, c) for (i, text), c in zip(part, got) if dataset.implausible_count(text, c)), None)
            if bad:
                i, text, c = bad
                notes.append(
                    f"requests {part[0][0] + 1}-{part[-1][0] + 1}: /v1/tokenize counted {c} tokens for the "
                    f"{len(text.encode())}-byte answer of request {i + 1}, which no tokenizer gives"
                )
                continue
            counts.update({i: c for (i, _unused), c in zip(part, got)})
        if len(notes) > EXAMPLES:
            notes[EXAMPLES:] = [f"{len(notes) - EXAMPLES} more lists not used"]
        data.count_answers(counts, notes)

    async def metrics(self) -> dict | None:
        """Counters of /metrics, None when the server does not export them (--enable-metrics off)."""
        resp = await self.get("/metrics")
        return parse_prometheus(resp.body.decode("utf-8", "replace")) if resp.status == 200 else None

    async def check_health(self) -> None:
        """ServerUnusable unless GET /health answers 200 (SGLang: 503 while starting or unhealthy)."""
        resp = await self.get("/health")
        if resp.status != 200:
            text = resp.body.decode("utf-8", "replace").strip().replace("\n", " ")[:120]
            raise ServerUnusable(
                f"{self.target.endpoint.url} is not ready: GET /health answered {resp.status}"
                f"{': ' + text if text else ''}; wait until it answers 200 or read the server's log"
            )


class _Run:
    """The measured requests: bodies from the dataset, levels of workers on kept-alive connections."""

    def __init__(self, target: Target, model: str | None, data: Dataset, timeout: float, min_tokens: bool, dummy: bool):
        self.target = target
        self.model = model
        self.data = data
        self.timeout = timeout
        self.min_tokens = min_tokens
        self.dummy = dummy  # the server loads random weights: its text is judged by check_output's dummy rule
        self.emulated_header = False
        self.next_index = 0
        self.connections_opened = 0

    def bodies(self, n: int) -> tuple:
        """(request bodies, their output lengths): the dataset's next n requests."""
        bodies, lens = [], []
        for _unused in range(n):
            row = self.data.row(self.next_index)
            body = chat_body(self.model, row.messages, row.output_len, min_tokens=self.min_tokens)
            bodies.append(json.dumps(body).encode())
            lens.append(row.output_len)
            self.next_index += 1
        return bodies, lens

    async def level(self, level: Level, bodies: list, lens: list, seed: int) -> tuple:
        """Send the bodies (their max_tokens: `lens`) as `level` says (_Level). (timelines, stop reason or None):
        the first request without an answer within the timeout stops the level; requests cut short or never sent
        then count as failed."""
        sending = _Level(self, level, bodies, lens)
        reason = await sending.open()
        if reason:
            return [Timeline(sent=False, error=reason) for _unused in bodies], reason
        await sending.send(seed)
        return sending.finished(), sending.stop


class _Level:
    """One level's requests: arrivals at its rate (Poisson: bench_serving's gaps for the seed, see arrival_gaps;
    inf: all at once), at most its concurrency in flight, each on a kept-alive connection (as many opened before the
    clock as the cap allows, more on demand)."""

    def __init__(self, run: _Run, level: Level, bodies: list, lens: list):
        self.run, self.level, self.bodies, self.lens = run, level, bodies, lens
        n = len(bodies)
        self.timelines: list = [None] * n  # each request's Timeline from its dispatch on; None: never sent
        preopen = level.concurrency or (n if math.isinf(level.rate) and not level.trace else RATE_PREOPEN)
        self.idle = [Connection(run.target) for _unused in range(min(n, preopen))]
        self.used = set(self.idle)
        self.slots = asyncio.Semaphore(level.concurrency) if level.concurrency else None
        self.stop: str | None = None
        self.tasks: list = []

    async def open(self) -> str | None:
        """Open the first connections; why the level cannot run when none opens."""
        timeout = min(self.run.timeout, server_http.CONNECT_TIMEOUT_S)
        opened = await asyncio.gather(*(asyncio.wait_for(c.open(), timeout) for c in self.idle), return_exceptions=True)
        failed = [r for r in opened if isinstance(r, BaseException)]
        if failed and len(failed) == len(self.idle):
            return f"cannot connect to {self.run.target.endpoint.url}: {type(failed[0]).__name__} {failed[0]}"
        return None

    async def one(self, i: int) -> None:
        run = self.run
        async with self.slots or contextlib.nullcontext():
            conn = self.idle.pop() if self.idle else Connection(run.target)
            self.used.add(conn)
            tl = self.timelines[i] = Timeline()
            try:
                emulated = await stream_chat(conn, tl, self.bodies[i], self.lens[i], run.timeout, run.model)
            except Exception as exc:  # noqa: BLE001 - a request's failure, never a silently ended task
                tl.t_end, tl.error = time.perf_counter(), f"client error: {type(exc).__name__}: {exc}"[:200]
                emulated = False
                conn.abort()
            self.idle.append(conn)
            run.emulated_header |= emulated
            if tl.timed_out and not self.stop:
                self.stop = f"a request got no answer within the timeout ({run.timeout:g} s) at {self.level.label}"
                for task in self.tasks:
                    if task is not asyncio.current_task():
                        task.cancel()

    async def dispatch(self, seed: int) -> None:
        gaps = None if math.isinf(self.level.rate) else arrival_gaps(seed, self.level.rate)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(len(self.bodies)):
            if self.level.trace:  # the trace's times from the level's start, not gaps: a late send does not drift on
                await asyncio.sleep(start + self.run.data.arrival(i) - loop.time())
            elif i and gaps:
                await asyncio.sleep(next(gaps))
            self.tasks.append(asyncio.create_task(self.one(i)))

    async def send(self, seed: int) -> None:
        """Every request dispatched and ended (or cancelled by a stop); the connections closed after."""
        self.tasks.append(asyncio.create_task(self.dispatch(seed)))
        try:
            while not all(t.done() for t in self.tasks):
                await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            for c in self.used:
                self.run.connections_opened += c.opened
                if self.stop:  # a hung server never acknowledges a polite close
                    c.abort()
                else:
                    await c.close()

    def finished(self) -> list:
        """The timelines, those never sent or in flight when the level stopped failed as cut short."""
        now = time.perf_counter()
        for i, tl in enumerate(self.timelines):
            if tl is None or not tl.t_end:  # never sent, or in flight (its send time kept) when the level stopped
                tl = self.timelines[i] = tl or Timeline(t_send=now, sent=False)
                tl.t_end, tl.error = now, "cut short: the level stopped at a timeout"
        return self.timelines


_SERVER_INFO_KEYS = (
    "version",
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "attention_backend",
    "moe_runner_backend",
    "max_running_requests",
    "load_format",
    "emulated",
)


def output_check(timelines: list, dummy: bool = False) -> dict:
    """Completed responses whose text the server's weights do not explain (readiness.check_output), as a count
    and the first examples. With dummy weights, `tolerated` counts the answers only real weights would fail."""
    bad, tolerated = [], 0
    for i, t in enumerate(timelines):
        if t.ok:
            problem = check_output(t.text, dummy)
            if problem:
                bad.append({"request": i, "check": problem[0], "detail": problem[1], "output": t.text[:80]})
            elif dummy and check_output(t.text):
                tolerated += 1
    return {"count": len(bad), "examples": bad[:EXAMPLES], "dummy_weights": dummy, "tolerated": tolerated}


def _expected(lens: list):
    """The requested output length: one number when every request asks for the same, else the list."""
    return lens[0] if lens and len(set(lens)) == 1 else lens


def _level_fields(level: Level) -> dict:
    return {"request_rate": None if math.isinf(level.rate) else level.rate, "label": level.label}


def _not_run(level: Level, lens: list, reason: str, slo: dict | None) -> dict:
    m = level_metrics(
        [Timeline(error=f"not run: {reason}") for _unused in lens], level.concurrency, _expected(lens), slo=slo
    )
    m.update(_level_fields(level), output_check=output_check([]), spec_accept_length=None, stopped=reason)
    return m


async def _measure(
    run: _Run, probe: _Probe, level: Level, bodies: list, lens: list, seed: int, slo, details: bool
) -> dict:
    """One level; its `stopped` says why the sweep cannot go on after it (None: it can). `details`: each request's
    own figures too (requests_detail)."""
    before = await probe.metrics()
    cum_before = None if before else server_info_accept_length(await probe.json("/server_info"))
    timelines, stopped = await run.level(level, bodies, lens, seed)
    m = level_metrics(timelines, level.concurrency, _expected(lens), slo=slo)
    if details:
        m["requests_detail"] = request_details(timelines)
    m.update(_level_fields(level))
    m["output_check"] = output_check(timelines, run.dummy)
    m["spec_accept_length"] = None
    m["stopped"] = stopped
    if stopped:
        return m
    try:
        after = await probe.metrics()
        spec = spec_accept_from_counters(before, after)
        if spec is not None:
            m["spec_accept_length"] = {"value": spec, "source": "metrics_delta"}
        else:
            cum = server_info_accept_length(await probe.json("/server_info"))
            if cum is not None:
                m["spec_accept_length"] = {"value": cum, "before": cum_before, "source": "server_info_cumulative"}
        if m["failed"]:
            await probe.check_health()
    except ServerUnusable as exc:
        m["stopped"] = str(exc)
    return m


class _Sweep:
    """The levels in order, each measured unless an earlier one stopped the sweep (then `not run`)."""

    def __init__(self, run: _Run, probe: _Probe, requests: int | None, seed: int, slo, progress, details: bool):
        self.run, self.probe, self.requests, self.seed, self.slo, self.progress = (
            run,
            probe,
            requests,
            seed,
            slo,
            progress,
        )
        self.details = details
        self.levels: list = []
        self.stopped: str | None = None

    async def measure(self, level: Level) -> dict:
        if level.trace:  # each replay of a trace from its first request
            self.run.next_index = 0
        bodies, lens = self.run.bodies(self.requests or level.default_requests())
        if self.stopped:
            m = _not_run(level, lens, self.stopped, self.slo)
        else:
            try:
                m = await _measure(self.run, self.probe, level, bodies, lens, self.seed, self.slo, self.details)
            except ServerUnusable as exc:
                m = _not_run(level, lens, str(exc), self.slo)
            self.stopped = m["stopped"]
            if self.progress:
                self.progress(format_level_line(m))
        self.levels.append(m)
        return m

    async def sla_search(self, low: float, high: float, steps: int, cap: int | None) -> dict:
        """The highest request rate whose level meets every SLO: LOW first (none if it fails), HIGH next (the
        answer if it holds), then `steps` bisections (geometric means) between the highest rate that held and
        the lowest that did not. Every probe is a level of the result."""
        probes = []

        async def holds(rate: float) -> bool:
            m = await self.measure(Level(cap, rate))
            probes.append({"rate": rate, "sla_met": m["slo"]["met"], "goodput_req_s": m["goodput_req_s"]})
            return m["slo"]["met"] and not self.stopped

        best = None
        if await holds(low):
            best = low
            if await holds(high):
                best = high
            else:
                hi = high
                for _unused in range(steps):
                    if self.stopped:
                        break
                    mid = math.sqrt(best * hi)  # rates span orders of magnitude: bisect their logarithm
                    if await holds(mid):
                        best = mid
                    else:
                        hi = mid
        return {"bounds": [low, high], "steps": steps, "max_concurrency": cap, "best_rate": best, "probes": probes}


def check_workload(**settings) -> tuple:
    """(the settings (workload.check_settings': the table's defaults filled in), the fixed levels, the Dataset) of
    run_benchmark's workload settings; ValueError naming the fix for anything unusable (an unknown setting, a value,
    a dataset file that is missing, empty or of the wrong format)."""
    w, levels = check_settings(**settings)
    data = dataset.load(
        w["dataset_name"],
        path=w["dataset_path"],
        input_len=w["input_len"],
        output_len=w["output_len"],
        range_ratio=w["random_range_ratio"],
        seed=w["seed"],
        sharegpt_output_len=w["sharegpt_output_len"],
        gsp=w["gsp"],
        requests=w["requests"],
        trace_time_scale=w["trace_time_scale"],
        trace_loops=w["trace_loops"],
    )
    if w["dataset_name"] == "trace":
        levels = [Level(w["max_concurrency"], trace=data.info["rows"])]
    return w, levels, data


async def run_benchmark_async(
    url: str,
    *,
    api_key: str | None = None,
    model: str | None = None,
    context: dict | None = None,
    progress=None,
    output_details: bool = False,
    **settings,
) -> dict:
    """The sweep; the result dict (see DEFINITIONS). `settings`: the workload, named, defaulted and bounded in
    workload.WORKLOAD. Levels: closed-loop `concurrency` levels, or one level per `request_rate` (Poisson arrivals,
    at most max_concurrency in flight), or the SLA search between the two rates of `sla_search`. `requests` None
    -> Level.default_requests() per level. The prompts come from the dataset (dataset.load). min_tokens also sends
    min_tokens = output length (for servers that stop early despite ignore_eos; it slows SGLang's decoding, so
    figures are then not comparable with bench_serving's). `slo` {name: limit ms} adds each level's verdict;
    goodput_req_s is in every level. progress(str) gets a line per level. output_details adds each level's
    requests_detail (bench_serving's --output-details). ValueError for unusable settings or datasets (no
    generation request is sent), ServerUnusable when the server cannot be benchmarked (nothing was measured)."""
    w, fixed_levels, data = check_workload(**settings)
    server_http.check_api_key(api_key)
    target = Target(server_http.Endpoint.parse(url), api_key or None)
    probe = _Probe(target, w["timeout"])
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    started = datetime.now(UTC)
    info, model = await _server(probe, model, data)
    run = _Run(target, model, data, w["timeout"], w["min_tokens"], dummy_weights(info))
    warm_failed = await _warm_up(run, w, fixed_levels)
    sweep = _Sweep(run, probe, w["requests"], w["seed"], w["slo"], progress, output_details)
    for level in fixed_levels:
        await sweep.measure(level)
    search = None
    if w["sla_search"]:
        search = await sweep.sla_search(*w["sla_search"], w["sla_search_steps"], w["max_concurrency"])
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "tool": "sglang_deploy.bench",
        "version": BENCH_VERSION,
        "host": socket.gethostname(),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "url": url,
        "model": model,
        "server_emulated": bool(info.get("emulated")) or run.emulated_header,
        "server_info": {k: info[k] for k in _SERVER_INFO_KEYS if k in info},
        "workload": _workload_record(w, data, fixed_levels, warm_failed, sweep.levels),
        "client": {
            "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
            "connections_opened": run.connections_opened,
            "python": sys.version.split()[0],
        },
        "levels": sweep.levels,
        "sla_search": search,
        "stopped": sweep.stopped,
        "definitions": DEFINITIONS,
        "context": context or {},
    }


async def _server(probe: _Probe, model: str | None, data: Dataset) -> tuple:
    """(the server's /server_info (a dict, empty when it has none), the model to name) once /health answers 200;
    the dataset counted in the server's tokens where it can (/v1/tokenize) and checked against its context."""
    await probe.check_health()
    info = await probe.json("/server_info") or await probe.json("/get_server_info")
    info = info if isinstance(info, dict) else {}
    models = None
    if not model or not info.get("context_length"):
        models = await probe.json("/v1/models")
    model = model or info.get("served_model_name") or server_http.first_model(models)
    ratio = await probe.tokens_per_word(model)
    if ratio:
        data.calibrate(ratio)
        await probe.count_answers(model, data)
    data.check_context(info.get("context_length") or server_http.first_model_len(models))
    return info, model


async def _warm_up(run: _Run, w: dict, levels: list) -> list:
    """The warm-up (w["warmup"] requests, as many in flight as the levels will have, at most): the errors of its
    failed requests; ServerUnusable when it stopped or every request failed."""
    n = w["warmup"]
    if n <= 0:
        return []
    bodies, lens = run.bodies(n)
    cap = min(n, w["max_concurrency"] or n, max((lv.concurrency or n for lv in levels), default=n))
    timelines, stopped = await run.level(Level(cap), bodies, lens, w["seed"])
    failed = [t.error for t in timelines if not t.ok]
    if stopped or len(failed) == len(timelines):
        raise ServerUnusable(f"the warm-up failed: {stopped or failed[0]}")
    return failed


def _workload_record(w: dict, data: Dataset, fixed_levels: list, warm_failed: list, levels: list) -> dict:
    """The result's `workload`: what the sweep sent and how (the dataset's info, the settings, the levels' requests)."""
    rated, trace = w["request_rate"] is not None, w["dataset_name"] == "trace"
    return {
        "endpoint": "/v1/chat/completions (stream, stream_options.include_usage)",
        **data.info,
        **{k: w[k] for k in ("input_len", "output_len", "random_range_ratio", "max_concurrency", "slo")},
        "forced_length": {
            "ignore_eos": True,
            "max_tokens": "the request's output length",
            "min_tokens": "the request's output length" if w["min_tokens"] else None,
        },
        "temperature": 0.0,
        "mode": "sla_search" if w["sla_search"] else "request_rate" if rated else "trace" if trace else "concurrency",
        "request_rates": [lv.rate if math.isfinite(lv.rate) else "inf" for lv in fixed_levels] if rated else None,
        # Results made before ARRIVALS drew other gaps for the same seed (none recorded).
        "arrivals": TRACE_ARRIVALS if trace else arrivals([lv.rate for lv in fixed_levels], w["sla_search"]),
        "warmup_requests": w["warmup"],
        "warmup_failed": len(warm_failed),
        "requests_per_level": {m["label"]: m["requests"] for m in levels},
        "timeout_s": w["timeout"],
    }


def run_benchmark(url: str, **kwargs) -> dict:
    """Synchronous wrapper of run_benchmark_async (same keyword arguments)."""
    return asyncio.run(run_benchmark_async(url, **kwargs))


def write_result(result: dict, dest: str) -> str:
    """Write the result as JSON (parent directories created); returns the absolute path."""
    return write_file(json.dumps(result, indent=2, default=str) + "\n", dest)
