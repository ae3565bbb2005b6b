"""The benchmark's workloads, named as sglang.bench_serving names them: `random` (deterministic common-word
prompts of the given lengths), `sharegpt` (the ShareGPT JSON format), `custom` (JSONL of OpenAI chat messages, a
user's own traffic) and `generated-shared-prefix` (groups of prompts sharing a long system prompt: the radix
cache's case), and `trace` (bench_serving's Mooncake trace: prompts of its lengths sharing its prefix blocks, sent at
its arrival times). A Dataset hands out request i as a Row; file datasets cycle when a sweep needs more requests
than they hold. Every problem with a file is a ValueError naming the file, the line and the fix."""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field, replace

from . import trace
from .workload import GSP_DEFAULTS, MAX_LEN_TOKENS, build_prompt, words

MIN_TOKENS_PER_SIDE = 2  # bench_serving prunes shorter prompts and answers
MAX_FILE_BYTES = 1 << 30
SPECIAL_TOKENS_SLACK = 16  # tokens a tokenizer may add to a text beyond one per byte (BOS, EOS, a prefix space)
MAX_GSP_PROMPTS = 10**6  # generated-shared-prefix groups x prompts per group (its shuffled order is held in memory)
MAX_COUNTED_ANSWERS = 4096  # recorded answers counted by the server's tokenizer; rows past them use the ratio


def implausible_count(text: str, count) -> bool:
    """Whether `count` cannot be a tokenizer's count of `text` (an answer holding a word): none gives no token for
    it, nor more than one per UTF-8 byte (byte-level BPE, SentencePiece's byte fallback) plus a few special tokens.
    A bound in bytes, not in words: code and unspaced scripts (Chinese, Japanese) hold many tokens per word."""
    return not 1 <= count <= len(text.encode("utf-8")) + SPECIAL_TOKENS_SLACK


def approx_tokens(text: str) -> int:
    """Words of a text: its tokens as the emulator counts them. A real server's tokenizer gives about 1.3 per
    common English word; Dataset.calibrate takes the server's own ratio (from /v1/tokenize) when it has one, for
    prompts and for output lengths taken from recorded answers alike. The result records the server's count
    (usage.prompt_tokens) beside it."""
    return len(text.split())


@dataclass(frozen=True)
class Row:
    messages: tuple  # OpenAI chat messages
    output_len: int
    prompt_len: int  # approx_tokens of the messages' text
    answer_words: int = 0  # > 0: output_len is the recorded answer's length, approx_tokens of its text
    answer: str = field(default="", compare=False, repr=False)  # that answer, to count in the server's tokens


def _row(messages, output_len: int, answer: str | None = None) -> Row:
    text = " ".join(m["content"] for m in messages)
    if answer is None:
        return Row(tuple(messages), output_len, approx_tokens(text))
    return Row(tuple(messages), output_len, approx_tokens(text), output_len, answer)


def _answer_row(messages, answer: str) -> Row:
    """A row whose output length is the recorded answer's (bench_serving: the answer's tokens), in words until the
    server counts it (count_answers) or the dataset is calibrated to the server's tokens."""
    return _row(messages, approx_tokens(answer), answer)


class Dataset:
    """Request i of a workload (row(i)); `info` is what the result records about it."""

    def __init__(self, info: dict, rows: list | None = None, make=None, longest: tuple = (0, 0), arrival=None):
        self.info = info
        self.rows = rows
        self.make = make
        self.arrival = arrival  # a trace's: request i's send time in seconds after the level's start
        self.longest = longest  # (prompt, output) tokens at most, of a generated dataset
        self.tokens_per_word = 1.0
        self.answer_tokens: dict = {}  # row index -> its recorded answer's length in the server's tokens
        info["tokens_per_word"] = None
        if rows is not None and any(r.answer_words for r in rows):
            info["answer_lengths"] = "words"  # how output lengths taken from recorded answers are counted

    def calibrate(self, tokens_per_word: float) -> None:
        """Count in the server's tokens from now on: generated prompts get length / tokens_per_word words, output
        lengths taken from a recorded answer (sharegpt, custom conversations) become its words x tokens_per_word,
        and the context check counts words x tokens_per_word (the server's /v1/tokenize of a sample text)."""
        self.tokens_per_word = tokens_per_word
        self.info["tokens_per_word"] = round(tokens_per_word, 4)
        if "answer_lengths" in self.info and not self.answer_tokens:
            self.info["answer_lengths"] = "words x tokens_per_word"

    def answers(self) -> list:
        """(row index, answer text) of the rows whose output length is a recorded answer's, the first
        MAX_COUNTED_ANSWERS rows at most (requests take the rows in order)."""
        rows = (self.rows or [])[:MAX_COUNTED_ANSWERS]
        return [(i, r.answer) for i, r in enumerate(rows) if r.answer_words]

    def count_answers(self, counts: dict, notes: list = ()) -> None:
        """Row index -> its answer's length in the server's tokens (its /v1/tokenize): those rows ask for exactly
        that many output tokens, as bench_serving does with its tokenizer, and a row counted under
        MIN_TOKENS_PER_SIDE is pruned, as bench_serving prunes it (`answers_pruned`). `notes`: why some answers
        were not counted (they keep words x tokens_per_word); `answer_lengths` records both. ValueError when no row
        is left."""
        short = {i for i, c in counts.items() if c < MIN_TOKENS_PER_SIDE}
        if short:
            kept = [i for i in range(len(self.rows)) if i not in short]
            if not kept:
                raise ValueError(
                    f"{self.info['dataset_name']} dataset {self.info['dataset_path']}: the server's tokenizer counts "
                    f"every answer under {MIN_TOKENS_PER_SIDE} tokens and bench_serving prunes such rows, so none "
                    "is left: give longer answers, or a fixed output length (--sharegpt-output-len, output_len)"
                )
            new_index = {old: new for new, old in enumerate(kept)}
            counts = {new_index[i]: c for i, c in counts.items() if i not in short}
            self.rows = [self.rows[i] for i in kept]
            self.info["rows"] = len(self.rows)
        self.info["answers_pruned"] = len(short)
        self.answer_tokens = dict(counts)
        answer_rows = sum(1 for r in self.rows if r.answer_words)
        if self.answer_tokens:
            text = "server tokens (/v1/tokenize)"
            if len(self.answer_tokens) < answer_rows:
                text += f" for {len(self.answer_tokens)} of {answer_rows} rows; the rest words x tokens_per_word"
        else:
            text = "words x tokens_per_word"
        if short:
            text += f"; {len(short)} rows pruned: the server counts their answers under {MIN_TOKENS_PER_SIDE} tokens"
        self.info["answer_lengths"] = "; ".join([text, *notes])

    def words(self, tokens: int) -> int:
        """Words of a generated prompt part of about `tokens` of the server's tokens."""
        return max(1, round(tokens / self.tokens_per_word))

    def row(self, i: int) -> Row:
        if self.rows is None:
            return self.make(i)
        return self._counted(i % len(self.rows))

    def _counted(self, index: int) -> Row:
        """Row `index` with an answer's output length in the server's tokens: its count by the server when known,
        else its words x tokens_per_word."""
        row = self.rows[index]
        if not row.answer_words:
            return row
        if index in self.answer_tokens:
            tokens = self.answer_tokens[index]
        elif self.tokens_per_word != 1.0:
            tokens = round(row.answer_words * self.tokens_per_word)
        else:
            return row
        return replace(row, output_len=max(MIN_TOKENS_PER_SIDE, tokens))

    def check_context(self, context_len: int | None) -> None:
        """ValueError naming the first request whose prompt and output do not fit the server's context."""
        if not context_len:
            return
        if self.rows is not None:
            sizes = [
                (round(r.prompt_len * self.tokens_per_word), self._counted(i).output_len)
                for i, r in enumerate(self.rows)
            ]
        else:
            sizes = [self.longest]
        for i, (n_in, n_out) in enumerate(sizes):
            if n_in + n_out >= context_len:
                where = (
                    f"request {i + 1} of {self.info['dataset_path']}"
                    if self.rows is not None
                    else "its longest request"
                )
                raise ValueError(
                    f"{self.info['dataset_name']} dataset, {where}: about {n_in} prompt + {n_out} output tokens do "
                    f"not fit the server's context of {context_len} tokens: shorten the prompts or the output length"
                )


def _read(path: str) -> tuple:
    """(text, sha256) of a dataset file; ValueError when it cannot be one."""
    if not path:
        raise ValueError("this dataset needs --dataset-path (the file to read)")
    try:
        size = os.path.getsize(path)
        if not os.path.isfile(path):
            raise ValueError(f"dataset {path} is not a regular file")
        if size > MAX_FILE_BYTES:
            raise ValueError(f"dataset {path} is over {MAX_FILE_BYTES >> 20} MiB: sample it down")
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ValueError(f"cannot read dataset {path}: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()
    except UnicodeDecodeError as exc:
        raise ValueError(f"dataset {path} is not UTF-8 text (byte {exc.start})") from exc


def _turn_text(turn, where: str) -> str:
    text = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
    if not isinstance(text, str):
        raise ValueError(f"{where}: a turn must be an object with a string `value` or `content`")
    return text


def _json(text: str, where: str, want: type, fix: str):
    """The JSON value of text, of type `want`; ValueError naming where, what it is and the fix."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where} is not JSON ({exc}): {fix}") from exc
    except RecursionError as exc:  # nested past Python's stack
        raise ValueError(f"{where} is JSON nested too deeply to read: {fix}") from exc
    if not isinstance(value, want):
        raise ValueError(f"{where} is a JSON {type(value).__name__}, not {fix.removeprefix('give ')}")
    return value


def _sharegpt(text: str, path: str, output_len: int | None, seed: int) -> tuple:
    data = _json(text, f"sharegpt dataset {path}", list, "give a list of conversations (the ShareGPT JSON)")
    pairs = []
    for i, item in enumerate(data):
        convs = item.get("conversations", item.get("conversation")) if isinstance(item, dict) else None
        if isinstance(convs, list) and len(convs) >= 2:
            where = f"sharegpt dataset {path} conversation {i + 1}"
            pairs.append((_turn_text(convs[0], where), _turn_text(convs[1], where)))
    random.Random(seed).shuffle(pairs)  # bench_serving samples in a seeded random order
    rows, pruned = [], 0
    for prompt, answer in pairs:
        messages = [{"role": "user", "content": prompt}]
        row = _row(messages, output_len) if output_len else _answer_row(messages, answer)
        if row.prompt_len < MIN_TOKENS_PER_SIDE or row.output_len < MIN_TOKENS_PER_SIDE:
            pruned += 1
            continue
        rows.append(row)
    return rows, pruned


def _messages(value, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: `messages` must be a non-empty list of chat messages")
    out = []
    for m in value:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise ValueError(f"{where}: each message needs a string `role` and a string `content`")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _custom(text: str, path: str, default_output_len: int) -> list:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"custom dataset {path} line {n}"
        item = _json(line, where, dict, "give one JSON object per line")
        convs = item.get("conversations", item.get("conversation"))
        answer = None
        if "messages" in item:
            messages = _messages(item["messages"], where)
            out = item.get("max_tokens", item.get("output_len", default_output_len))
        elif isinstance(convs, list) and len(convs) >= 2:  # bench_serving's custom format
            messages = [{"role": "user", "content": _turn_text(convs[0], where)}]
            out = item.get("output_len")
            if out is None:
                answer = _answer_row(messages, _turn_text(convs[1], where))
                out = answer.output_len
        else:
            raise ValueError(f"{where}: give `messages` (OpenAI chat messages) or `conversations` of two turns or more")
        if not isinstance(out, int) or isinstance(out, bool) or out < MIN_TOKENS_PER_SIDE:
            raise ValueError(f"{where}: the output length must be an integer of at least {MIN_TOKENS_PER_SIDE}")
        rows.append(answer or _row(messages, out))
    return rows


def _ranged(rng: random.Random, full: int, ratio: float, floor: int = 1) -> int:
    """bench_serving's random lengths: uniform in [max(floor, full x ratio), full]."""
    return rng.randint(max(floor, int(full * ratio)), max(floor, full))


def _gsp(gsp: dict | None) -> dict:
    """The generated-shared-prefix settings (a mapping of some of GSP_DEFAULTS: workload.check_settings), GSP_DEFAULTS
    filled in; ValueError naming the fix for unusable ones."""
    g = {**GSP_DEFAULTS, **(gsp or {})}
    bad = [k for k, v in g.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1]
    if bad:
        raise ValueError(f"--gsp-{bad[0].replace('_', '-')} must be a positive integer, got {g[bad[0]]!r}")
    if g["num_groups"] * g["prompts_per_group"] > MAX_GSP_PROMPTS:
        raise ValueError(
            f"--gsp-num-groups x --gsp-prompts-per-group is {g['num_groups']} x {g['prompts_per_group']}, over the "
            f"limit of {MAX_GSP_PROMPTS} prompts (MAX_GSP_PROMPTS): give fewer groups or prompts per group"
        )
    if g["system_prompt_len"] + g["question_len"] > MAX_LEN_TOKENS:
        raise ValueError(
            f"--gsp-system-prompt-len + --gsp-question-len must be at most {MAX_LEN_TOKENS} tokens (no server's "
            f"context holds more), got {g['system_prompt_len'] + g['question_len']}: give shorter ones"
        )
    return g


def load(
    name: str,
    *,
    path: str | None = None,
    input_len: int,
    output_len: int,
    range_ratio: float,
    seed: int,
    sharegpt_output_len: int | None = None,
    gsp: dict | None = None,
    requests: int | None = None,
    trace_time_scale: float = 1.0,
    trace_loops: int = 1,
) -> Dataset:
    """The dataset `name` (one of workload.DATASETS, the settings within their bounds: workload.check_settings);
    ValueError (before any request) for a file that is missing, unreadable, of the wrong format or empty, and for
    unusable generated-shared-prefix settings."""
    info = {"dataset_name": name, "dataset_path": None, "dataset_sha256": None, "seed": seed}
    if name in ("sharegpt", "custom"):
        return _from_file(info, path, output_len, sharegpt_output_len)
    if name == "trace":
        return _trace(info, path, trace_time_scale, trace_loops, requests)
    if path:
        raise ValueError(f"--dataset-path is for the sharegpt, custom and trace datasets, not {name}")
    if name == "random":
        return _random(info, input_len, output_len, range_ratio)
    return _shared_prefix(info, _gsp(gsp), output_len, range_ratio)


def _from_file(info: dict, path: str | None, output_len: int, sharegpt_output_len: int | None) -> Dataset:
    name = info["dataset_name"]
    text, sha = _read(path)
    info.update(dataset_path=os.path.abspath(path), dataset_sha256=sha)
    if name == "sharegpt":
        rows, pruned = _sharegpt(text, path, sharegpt_output_len, info["seed"])
        info["pruned"] = pruned
    else:
        rows = _custom(text, path, output_len)
    if not rows:
        raise ValueError(f"{name} dataset {path} holds no usable request (a prompt and an answer of 2+ words)")
    info["rows"] = len(rows)
    return Dataset(info, rows=rows)


def _random(info: dict, input_len: int, output_len: int, range_ratio: float) -> Dataset:
    info.update(input_len=input_len, output_len=output_len, range_ratio=range_ratio)
    seed = info["seed"]

    def make(i: int) -> Row:
        rng = random.Random(f"{seed}:{i}")
        n_in = _ranged(rng, input_len, range_ratio)
        prompt = build_prompt(i, data.words(n_in))
        return _row([{"role": "user", "content": prompt}], _ranged(rng, output_len, range_ratio, 2))

    data = Dataset(info, make=make, longest=(max(input_len, 10), output_len))
    return data


def _shared_prefix(info: dict, g: dict, output_len: int, range_ratio: float) -> Dataset:
    info.update(output_len=output_len, range_ratio=range_ratio, **{f"gsp_{k}": v for k, v in g.items()})
    seed = info["seed"]
    order = list(range(g["num_groups"] * g["prompts_per_group"]))
    random.Random(seed).shuffle(order)
    systems: dict = {}

    def make(i: int) -> Row:
        slot = order[i % len(order)]
        group = slot // g["prompts_per_group"]
        if group not in systems:
            rng = random.Random(f"{seed}:system:{group}")
            systems[group] = words(rng, data.words(_ranged(rng, g["system_prompt_len"], range_ratio)))
        rng = random.Random(f"{seed}:question:{slot}")
        question = words(rng, data.words(_ranged(rng, g["question_len"], range_ratio)))
        out = _ranged(rng, output_len, range_ratio, 2)
        return _row([{"role": "user", "content": f"{systems[group]}\n\n{question}"}], out)

    info["rows"] = len(order)
    data = Dataset(info, make=make, longest=(g["system_prompt_len"] + g["question_len"], output_len))
    return data


def _trace(info: dict, path: str | None, scale: float, loops: int, requests: int | None) -> Dataset:
    """The trace at path replayed: request i is record i (looped `loops` times, cut to `requests`), its prompt
    input_length tokens whose block j is the text of its hash id j (one text per id: shared ids, shared prefix),
    the rest its own words; its output length forced; sent at its timestamp x scale from the level's start (each
    loop after the last one's span and one mean gap)."""
    if not path:
        raise ValueError("the trace dataset needs --dataset-path (a Mooncake trace JSONL: sglang-deploy traffic)")
    records, sha = trace.read(path)
    start = records[0].timestamp / 1000
    span = records[-1].timestamp / 1000 - start
    period = span + (span / (len(records) - 1) if len(records) > 1 else 0.0)
    total = min(requests or len(records) * loops, len(records) * loops)
    info.update(dataset_path=os.path.abspath(path), dataset_sha256=sha, rows=total, trace_records=len(records))
    info.update(trace_time_scale=scale, trace_loops=loops, trace_summary=trace.brief(records))
    seed = info["seed"]

    def block_text(hash_id: int, tokens: int) -> str:
        block = words(random.Random(f"{seed}:block:{hash_id}"), data.words(trace.BLOCK_TOKENS)).split()
        return " ".join(block[: data.words(tokens)])

    def make(i: int) -> Row:
        r = records[i % len(records)]
        parts = [
            block_text(h, min(trace.BLOCK_TOKENS, r.input_length - j * trace.BLOCK_TOKENS))
            for j, h in enumerate(r.hash_ids)
        ]
        rest = r.input_length - len(r.hash_ids) * trace.BLOCK_TOKENS
        if rest > 0:
            parts.append(words(random.Random(f"{seed}:request:{i}"), data.words(rest)))
        return _row([{"role": "user", "content": " ".join(parts)}], r.output_length)

    def arrival(i: int) -> float:
        return (i // len(records) * period + records[i % len(records)].timestamp / 1000 - start) * scale

    biggest = max(records, key=lambda r: r.input_length + r.output_length)
    data = Dataset(info, make=make, longest=(biggest.input_length, biggest.output_length), arrival=arrival)
    return data
