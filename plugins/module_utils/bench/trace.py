"""Request traces in the format `sglang.bench_serving --dataset-name mooncake` replays (Mooncake's trace JSONL): one
JSON object a line, `timestamp` (ms since the trace's start), `input_length` and `output_length` (tokens) and
`hash_ids` (one integer per BLOCK_TOKENS-token block of the prompt, equal where two prompts share that block and all
blocks before it). Read with bounds, validated (ValueError naming the line and the fix), summarised, written; the
prefix block hashes a capture computes from token ids, so no text is kept."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import statistics
from typing import NamedTuple

from ..files import write_file

BLOCK_TOKENS = 512  # Mooncake's block: its traces' hash_ids count blocks of 512 tokens
MAX_TRACE_BYTES = 256 << 20
MAX_TRACE_RECORDS = 10**6
MAX_TRACE_TOKENS = 1 << 21  # a length: twice the longest context served (workload.MAX_LEN_TOKENS)
MAX_SPAN_MS = 7 * 86_400_000  # a trace's last arrival at most 7 days after its first: a replay waits that long
HASH_BYTES = 8  # a block's hash: the first 8 bytes of a sha256 (collisions need ~4e9 distinct blocks)
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class Record(NamedTuple):
    timestamp: float  # ms from the trace's start (bench_serving replays it relative to the first)
    input_length: int
    output_length: int
    hash_ids: tuple = ()


def _whole(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_TRACE_TOKENS


def parse_record(item, where: str) -> Record:
    """One trace line's object as a Record; ValueError naming where and the fix."""
    if not isinstance(item, dict):
        raise ValueError(f"{where}: give one JSON object per line with {', '.join(FIELDS)}")
    missing = [k for k in FIELDS[:3] if k not in item]
    if missing:
        raise ValueError(f"{where}: no {missing[0]!r}: each line needs {', '.join(FIELDS[:3])} (hash_ids optional)")
    ts = item["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < math.inf:
        raise ValueError(f"{where}: timestamp must be a finite number of milliseconds, at least 0, got {ts!r}")
    for name, low in (("input_length", 1), ("output_length", 1)):
        if not _whole(item[name], low):
            raise ValueError(f"{where}: {name} must be a whole number of tokens from {low} to {MAX_TRACE_TOKENS}")
    ids = item.get("hash_ids", [])
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids):
        raise ValueError(f"{where}: hash_ids must be a list of non-negative integers (one per prefix block)")
    blocks = -(-item["input_length"] // BLOCK_TOKENS)
    if len(ids) > blocks:
        raise ValueError(
            f"{where}: {len(ids)} hash_ids for {item['input_length']} input tokens, over its {blocks} blocks of "
            f"{BLOCK_TOKENS}: a trace's blocks are {BLOCK_TOKENS} tokens (Mooncake's); fix the trace's input_length"
        )
    return Record(float(ts), item["input_length"], item["output_length"], tuple(ids))


def parse(text: str, where: str, max_records: int = MAX_TRACE_RECORDS) -> list:
    """The records of a trace's text, sorted by timestamp as bench_serving replays them; ValueError naming the line."""
    records, lines = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(records) >= max_records:
            raise ValueError(f"{where} holds over {max_records} requests: cut it (e.g. head -n {max_records})")
        try:
            item = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ValueError(
                f"{where} line {n} is not JSON ({type(exc).__name__}): give one JSON object a line"
            ) from exc
        records.append(parse_record(item, f"{where} line {n}"))
        lines.append(n)
    if not records:
        raise ValueError(f"{where} holds no request: give JSON lines with {', '.join(FIELDS)}")
    first = min(r.timestamp for r in records)
    for n, r in zip(lines, records):
        if r.timestamp - first > MAX_SPAN_MS:
            raise ValueError(
                f"{where} line {n}: timestamp {r.timestamp:g} ms is over {MAX_SPAN_MS} ms (7 days) after the first "
                "request's, and a replay waits for it: give ms from the trace's start, or cut the trace"
            )
    return sorted(records, key=lambda r: r.timestamp)


def read(path: str, max_bytes: int = MAX_TRACE_BYTES) -> tuple:
    """(records, sha256 of the file) of a trace file at most max_bytes long; ValueError naming the fix."""
    where = f"trace {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO's open returns at once
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{where} is not a regular file: give the path of a trace JSONL file")
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc.strerror or exc}") from exc
    if len(raw) > max_bytes:
        raise ValueError(f"{where} is over {max_bytes >> 20} MiB: cut it to fewer requests")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} is not UTF-8 text (byte {exc.start})") from exc
    return parse(text, where), hashlib.sha256(raw).hexdigest()


def dumps(records) -> str:
    """The records as trace JSONL, timestamps relative to the first (whole ms where they are whole)."""
    start = records[0].timestamp if records else 0.0
    lines = []
    for r in records:
        ts = r.timestamp - start
        item = {"timestamp": int(ts) if ts == int(ts) else round(ts, 3), "input_length": r.input_length}
        item |= {"output_length": r.output_length, "hash_ids": list(r.hash_ids)}
        lines.append(json.dumps(item, separators=(", ", ": ")))
    return "".join(line + "\n" for line in lines)


def write(records, dest: str) -> str:
    """The trace written whole (mode 0600: a trace shows when and how much its users asked); its absolute path."""
    return write_file(dumps(records), dest, 0o600)


def block_digests(token_ids) -> list:
    """A prompt's prefix blocks as hashes: block i's is the first HASH_BYTES of sha256(block i-1's hash + its
    BLOCK_TOKENS ids), so equal hashes mean an equal prefix up to that block, as Mooncake's hash_ids do; the last
    block may be partial. The ids are not kept."""
    out, prev = [], b""
    for start in range(0, len(token_ids), BLOCK_TOKENS):
        block = token_ids[start : start + BLOCK_TOKENS]
        prev = hashlib.sha256(prev + b",".join(str(int(t)).encode() for t in block)).digest()[:HASH_BYTES]
        out.append(prev)
    return out


def common_window(windows) -> tuple:
    """The window every capture saw, (latest start, earliest end) of [start, end] pairs in seconds since the epoch:
    what a fleet's merged trace keeps and what the router's count reads (one rule for both). ValueError where there
    is no window or the windows do not overlap."""
    windows = [(float(a), float(b)) for a, b in windows]
    if not windows:
        raise ValueError("no capture window")
    lo, hi = max(a for a, _b in windows), min(b for _a, b in windows)
    if lo > hi:
        raise ValueError("the replicas' capture windows do not overlap")
    return lo, hi


def numbered(digest_lists) -> list:
    """Block digests as Mooncake's small integer hash_ids, numbered in the order first seen."""
    ids: dict = {}
    return [tuple(ids.setdefault(d, len(ids)) for d in digests) for digests in digest_lists]


def _percentiles(values: list) -> dict:
    ordered = sorted(values)

    def at(p: float) -> float:
        k = (len(ordered) - 1) * p / 100
        lo = math.floor(k)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)

    return {"mean": statistics.fmean(ordered), **{f"p{p}": at(p) for p in (50, 90, 99)}, "max": ordered[-1]}


def brief(records) -> dict:
    """The figures of summary() a benchmark result keeps of its trace: rate, burstiness, length p50 and mean, prefix
    reuse (to 3 decimals)."""
    s = summary(records)
    figures = {"rate_req_s": s["rate_req_s"], "burstiness_cv": s["burstiness_cv"]}
    for name in ("input_length", "output_length"):
        figures |= {f"{name}_p50": s[name]["p50"], f"{name}_mean": s[name]["mean"]}
    figures["prefix_reuse_share"] = s["prefix_reuse_share"]
    return {k: None if v is None else round(v, 3) for k, v in figures.items()}


def summary(records) -> dict:
    """What a trace asks of a server: its requests, span, arrival rate, burstiness (the coefficient of variation of
    the gaps between arrivals: 1 for Poisson arrivals, 0 for even ones, above 1 for bursts), length percentiles
    (tokens) and prefix reuse (the share of prompt blocks already sent by an earlier request: what a prefix
    cache could serve)."""
    times = [r.timestamp / 1000 for r in records]
    span = times[-1] - times[0]
    gaps = [b - a for a, b in zip(times, times[1:])]
    mean_gap = statistics.fmean(gaps) if gaps else 0.0
    seen, reused, blocks = set(), 0, 0
    for r in records:
        blocks += len(r.hash_ids)
        reused += sum(1 for h in r.hash_ids if h in seen)
        seen.update(r.hash_ids)
    return {
        "requests": len(records),
        "duration_s": span,
        "rate_req_s": (len(records) - 1) / span if span > 0 else None,
        "burstiness_cv": statistics.pstdev(gaps) / mean_gap if mean_gap > 0 else None,
        "input_length": _percentiles([r.input_length for r in records]),
        "output_length": _percentiles([r.output_length for r in records]),
        "prefix_blocks": blocks,
        "prefix_reuse_share": reused / blocks if blocks else None,
        "block_tokens": BLOCK_TOKENS,
    }
