"""Documentation fragment: the sglang_bench module's `workload` option, written from the table of the workload
settings (plugins/module_utils/bench/workload.py WORKLOAD), the one place each setting is described. A literal (as
ansible-test requires): tests/test_sglang_bench.py fails when it differs from the table; rewrite it with
`python tools/collection.py fragment`."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  workload:
    description: The workload, by bench_serving's names; a setting left out takes its default.
    type: dict
    default: {}
    suboptions:
      concurrency:
        type: list
        default:
        - 1
        - 8
        - 32
        elements: int
        description: 'closed-loop levels, run in this order: at most this many requests in flight, a new one as
          one ends; not used with request_rate or sla_search'
      request_rate:
        type: list
        default: null
        elements: float
        description: 'request rates per second, one level each, instead of the concurrency levels: Poisson arrivals
          (bench_serving''s for the same seed), inf sends all at once'
      max_concurrency:
        type: int
        default: null
        description: at most this many requests in flight at a rate or in the SLA search; alone, the one closed-loop
          level of that concurrency
      requests:
        type: int
        default: null
        description: 'requests per level; none: max(8, 2 x concurrency) closed-loop, 10 s of arrivals at a rate
          (16 to 1000), 64 all at once'
      dataset_name:
        type: str
        default: random
        choices:
        - random
        - sharegpt
        - custom
        - generated-shared-prefix
        - trace
        description: 'the prompts, by bench_serving''s names: random (common-word prompts of input_len), sharegpt
          (the ShareGPT JSON list at dataset_path), custom (JSONL at dataset_path, one {"messages": [...], "max_tokens":
          N} a line, max_tokens optional), generated-shared-prefix (groups sharing a long system prompt: gsp), trace
          (bench_serving''s Mooncake trace JSONL at dataset_path replayed at its timestamps: trace_time_scale, trace_loops;
          requests cuts it)'
      dataset_path:
        type: path
        default: null
        description: the sharegpt, custom or trace file, its sha256 recorded (the role copies it from the controller
          to each host)
      input_len:
        type: int
        default: 256
        description: prompt length in the server's tokens, about (counted with its /v1/tokenize, one a word where
          it has none; the chat template adds a few)
      output_len:
        type: int
        default: 256
        description: output tokens of each request, forced as bench_serving does (ignore_eos and max_tokens) and
          verified against the server's usage; custom lines without max_tokens take it
      random_range_ratio:
        type: float
        default: 1.0
        description: 'lengths drawn uniformly from [length x ratio, length], bench_serving''s convention (1: fixed;
          bench_serving''s default is 0)'
      seed:
        type: int
        default: 42
        description: seed of the prompts, their order and the arrivals (bench_serving's arrival times for the same
          seed)
      sharegpt_output_len:
        type: int
        default: null
        description: 'sharegpt: this output length instead of each answer''s'
      gsp:
        type: dict
        default: null
        description: 'generated-shared-prefix: num_groups groups of prompts_per_group prompts, each a system prompt
          of system_prompt_len tokens shared in its group and a question of question_len; the output length is output_len'
        suboptions:
          num_groups:
            type: int
            default: 64
            description: gsp's num_groups
          prompts_per_group:
            type: int
            default: 16
            description: gsp's prompts_per_group
          system_prompt_len:
            type: int
            default: 2048
            description: gsp's system_prompt_len
          question_len:
            type: int
            default: 128
            description: gsp's question_len
      trace_time_scale:
        type: float
        default: 1.0
        description: 'trace: its arrival times x this (bench_serving''s --mooncake-slowdown-factor: 2 replays twice
          as slow)'
      trace_loops:
        type: int
        default: 1
        description: 'trace: replayed this many times in a row, each loop after the last one''s span and one mean
          gap'
      slo:
        type: dict
        default: null
        description: 'limits in ms by metric (ttft, tpot, itl, e2e x mean, p50, p90, p95, p99), e.g. ttft_p99_ms
          2000 and tpot_p99_ms 50: each level gets its verdict, goodput counts the requests meeting all'
      sla_search:
        type: list
        default: null
        elements: float
        description: 'two request rates LOW and HIGH: the levels are then a search for the highest rate between
          them whose level meets every slo (bisection)'
      sla_search_steps:
        type: int
        default: 5
        description: bisections of the SLA search after its two bounds
      min_tokens:
        type: bool
        default: false
        description: 'also send min_tokens = the output length, for a server that stops early despite ignore_eos
          (SGLang then runs its min-new-tokens penalizer on every decode step: slower decoding, not comparable with
          bench_serving)'
      warmup:
        type: int
        default: 2
        description: uncounted warm-up requests, once before the first level
      timeout:
        type: float
        default: 600.0
        description: seconds a request or a probe may wait for the server; the first request past it stops its level
          and the sweep (a hung server is noticed within about this time)
"""
