#!/usr/bin/python
"""Ansible module: concurrency sweep against an SGLang OpenAI-compatible server."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Benchmark an SGLang server over a concurrency sweep with verified output lengths
description:
  - Checks C(GET /health) first (fails unless 200), runs O(workload.warmup) uncounted requests once, then for
    each level in O(workload.concurrency) sends O(workload.requests) streamed chat completions
    (C(/v1/chat/completions), C(stream_options.include_usage=true)) with that many workers, each on its own
    keep-alive HTTP/1.1 connection opened before the level's clock starts. O(workload) holds the settings of the
    sweep (the levels, the dataset, the lengths, SLOs), each described below.
  - The output length is forced as C(sglang.bench_serving) does (C(ignore_eos=true), C(max_tokens) =
    O(workload.output_len), temperature 0; C(min_tokens) only with O(workload.min_tokens)) and verified against
    the server's C(usage.completion_tokens); the figures use the real counts, and responses of another length are
    reported per level as a count and examples, not averaged away. A response without usage counts as a
    failed request.
  - Prompts are deterministic common-word text of about O(workload.input_len) tokens, unique per request at
    their start (no prefix-cache reuse between requests).
  - "Definitions (also written into the result's C(definitions)). t_send = when the request bytes are
    written (waiting for a worker is not counted). A token chunk is an SSE chunk whose delta has non-empty
    C(content) or C(reasoning_content). C(ttft_ms) = first token chunk - t_send. C(ttfo_ms) = first
    C(content) chunk - t_send. C(e2e_ms) = C(data: [DONE]) - t_send.
    C(tpot_ms) = (e2e - ttft) / (completion_tokens - 1). C(decode_tok_s_per_request) =
    (completion_tokens - 1) / (t_last_token_chunk - t_first_token_chunk) per request (the single-stream
    decode speed). C(itl_ms) = gaps between consecutive token chunks of a request, pooled (a chunk step
    latency; with speculative decoding one chunk carries several tokens). C(tokens_per_chunk) = mean of
    completion_tokens / token chunks and the aggregate ratio. C(output_throughput_tok_s) =
    sum(completion_tokens) / wall_s, wall_s = last stream end - first t_send of the level.
    C(input_throughput_tok_s) and C(total_throughput_tok_s) use C(usage.prompt_tokens).
    C(achieved_concurrency) = sum(e2e) / wall_s. Each latency is {mean, p50, p90, p95, p99, std} with linear
    interpolation between closest ranks and the population std (numpy's, as bench_serving)."
  - "Speculative accept length for each level alone: (delta C(sglang:generation_tokens_total)) /
    (delta C(sglang:spec_verify_calls_total)) between /metrics scrapes right before and after the level
    (source C(metrics_delta), needs C(--enable-metrics)); otherwise the cumulative since-start
    C(/server_info) C(internal_states[0].avg_spec_accept_length) read after the level (C(value)) and
    before it (C(before)) (source C(server_info_cumulative)); null when the server reports neither.
    The counter delta counts the prefill token, as SGLang's per-request completion_tokens / spec_verify_ct."
  - Reasoning models, C(reasoning_content) deltas count as output tokens (they are in completion_tokens)
    and their chunks and characters are reported apart from C(content) in C(reasoning).
  - The result records start/end times (UTC ISO 8601), the engine version, the host name, whether the
    server is emulated (C(/server_info) C(emulated) or the C(x-sglang-emulated) header), the client's CPU
    seconds, and O(context) as given.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
extends_documentation_fragment: [sglang.deploy.bench_workload]
options:
  url:
    description: Base URL of the server.
    type: str
    default: http://127.0.0.1:30000
  api_key:
    description: "Server API key, sent as C(Authorization: Bearer). Never written to the result."
    type: str
  model:
    description: Served model name; default C(served_model_name) of C(/server_info) or the first C(/v1/models) id.
    type: str
  dest:
    description: File on the host to write the result JSON to; parent directories are created.
    type: path
  context:
    description: Dict embedded as-is under C(context) (profile name, rendered flags, masked env, stack
      manifest, GPU facts, host). Must not contain secrets.
    type: dict
    default: {}
notes:
  - Check mode skips the benchmark.
  - Fails before sending a request when a setting is unusable, the API key cannot travel in an HTTP header,
    O(dest) is a folder, or the server is not ready (C(/health) not 200, no answer, wrong scheme).
  - Fails with the result when the sweep stopped early (a timeout, or the server stopped answering; the
    levels measured are kept, the rest are marked failed and C(stopped) says why), when a level completes no
    request, or when responses are not plausible text (C(output_check), the checks of sglang_ready's sanity
    prompts). Other failed requests and length mismatches are reported in the result and as warnings.
  - Stdlib only (Python 3.10+); the engine is plugins/module_utils/bench, the same code as the
    C(sglang-deploy bench) command.
"""

EXAMPLES = r"""
- name: Benchmark the running profile
  sglang_bench:
    url: "http://{{ sglang_host }}:{{ sglang_port }}"
    api_key: "{{ sglang_api_key }}"
    model: "{{ sglang_served_model_name }}"
    workload:
      concurrency: [1, 8, 32]
      output_len: 512
    dest: /var/lib/sglang-deploy/results/baseline.json
    context:
      profile: baseline
      gpu: "{{ sglang_gpu }}"
  register: sglang_bench_result
"""

RETURN = r"""
result:
  description: The full result (what is written to O(dest)).
  returned: success
  type: dict
  contains:
    tool: {description: Always C(sglang_deploy.bench)., type: str}
    version: {description: Engine version., type: str}
    host: {description: Host name the client ran on., type: str}
    started_at: {description: UTC ISO 8601 start., type: str}
    finished_at: {description: UTC ISO 8601 end., type: str}
    url: {description: Server URL., type: str}
    model: {description: Model name sent., type: str}
    server_emulated: {description: True when the server says it is emulated., type: bool}
    server_info: {description: "Selected C(/server_info) fields (version, speculative settings...).", type: dict}
    workload: {description: "input_len, output_len, forced_length, temperature, warm-up, requests per level.", type: dict}
    client: {description: "cpu_s (client CPU seconds), connections_opened, python.", type: dict}
    stopped:
      description: Why the sweep ended before its last level (null when it ran them all).
      type: str
    levels:
      description: >-
        Per concurrency level - concurrency, requests, completed, failed, errors (message -> count), wall_s,
        output_tokens, output_throughput_tok_s, request_throughput_req_s, achieved_concurrency,
        input_tokens, input_throughput_tok_s, total_throughput_tok_s, decode_tok_s_per_request, ttft_ms, ttfo_ms,
        tpot_ms, itl_ms, e2e_ms (each {mean, p50, p90, p95, p99, std} or null),
        tokens_per_chunk {mean, aggregate}, prompt_tokens_mean, output_len_mismatch {count, expected, examples},
        reasoning {reasoning_chunks, reasoning_chars, content_chunks, content_chars, reasoning_tokens},
        spec_accept_length ({value, source[, before]} or null), output_check {count, examples} (responses that
        are empty, one character repeated or not text), stopped (why the sweep ended at this level, or null),
        label (C(c=8) or C(2 req/s (c<=8))), request_rate (null closed-loop), goodput_req_s, slo (per SLO the
        statistic, its limit and met; met overall) or null.
      type: list
      elements: dict
    sla_search:
      description: With C(sla_search) - bounds, steps, max_concurrency, best_rate (null when even LOW misses the SLA)
        and probes (rate, sla_met, goodput_req_s per probe level); null otherwise.
      type: dict
    definitions: {description: The formula of every figure., type: dict}
    context: {description: O(context) as given., type: dict}
  sample:
    levels: [{"concurrency": 1, "completed": 8, "failed": 0, "output_throughput_tok_s": 165.2,
              "decode_tok_s_per_request": {"mean": 172.0, "p50": 172.0, "p90": 172.1, "p99": 172.1}}]
table:
  description: The compact text table of the result.
  returned: success
  type: str
dest:
  description: Absolute path of the written JSON.
  returned: when O(dest) is set
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.bench import (
    ServerUnusable,
    ansible_options,
    check_dest,
    format_table,
    run_benchmark,
    write_result,
)
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import LOCAL_URL


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": LOCAL_URL},
            "api_key": {"type": "str", "no_log": True},
            "model": {"type": "str"},
            "workload": {"type": "dict", "default": {}, "options": ansible_options()},
            "dest": {"type": "path"},
            "context": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: benchmark not run")
    try:
        if p["dest"]:
            check_dest(p["dest"])
        result = run_benchmark(p["url"], api_key=p["api_key"], model=p["model"], context=p["context"], **p["workload"])
    except (ValueError, ServerUnusable) as exc:
        module.fail_json(msg=f"benchmark could not run: {exc}")
    out = {"result": result, "table": format_table(result)}
    if p["dest"]:
        out["dest"] = write_result(result, p["dest"])
    for level in result["levels"]:
        for warning in _warnings(level):
            module.warn(f"{level['label']}: {warning}")
    failure = _failure(result)
    if failure:
        module.fail_json(msg=failure, **out)
    module.exit_json(changed=bool(p["dest"]), **out)


def _warnings(level: dict) -> list:
    """What went wrong at a level that does not fail the task: failed requests (unless they stopped the sweep),
    responses of another length than asked."""
    out = []
    if level["failed"] and not level["stopped"]:
        out.append(f"{level['failed']} of {level['requests']} requests failed: {level['errors']}")
    mm = level["output_len_mismatch"]
    if mm["count"]:
        want = mm["expected"] if mm["expected"] is not None else "their requested"
        out.append(f"{mm['count']} responses were not {want} tokens, e.g. {mm['examples'][0]}")
    return out


def _failure(result: dict) -> str | None:
    """Why the task fails with the result: the sweep stopped early, a level's output is not plausible text, or a
    level completed no request."""
    if result["stopped"]:
        return f"the benchmark stopped early: {result['stopped']}"
    garbage = [level for level in result["levels"] if level["output_check"]["count"]]
    if garbage:
        ex = garbage[0]["output_check"]["examples"][0]
        return (
            f"the server's output is not plausible text at {', '.join(level['label'] for level in garbage)}: "
            f"{ex['check']} ({ex['detail']}), e.g. {ex['output'][:40]!r}"
        )
    empty = [level["label"] for level in result["levels"] if not level["completed"]]
    return f"no request completed at {', '.join(empty)}" if empty else None


if __name__ == "__main__":
    main()
