"""EMULATED SGLang server: an SGLang-compatible HTTP server whose every number is synthetic.

It lets the deploy/benchmark flow run and be tested on machines without a GPU. Nothing here loads a
model: the "tokens" are words from a small fixed vocabulary, and all timings come from the settings
below. Every response carries the header ``x-sglang-emulated: true``; /server_info and /model_info
carry ``"emulated": true``; the first log line is "EMULATED SGLang server: numbers are synthetic".

Run it with sglang.launch_server's command line::

    python -m sglang_deploy.emulator --model-path Qwen/Qwen3.5 --port 30000 [any sglang flags]
    python3 /opt/sglang-deploy/launch.py -m emulator ...   # lab host: this package copied, stdlib only

Modules (relative imports only, so the package runs under any name):
    config      the command line and the SGLANG_EMU_* settings (Config)
    server      the process: load, listen, routing (ROUTES), warm-up, readiness, shutdown (Server)
    protocol    HTTP/1.1: request parsing, JSON and SSE responses, the access log
    endpoints   info endpoints (health, models, model/server info, metrics); generation: chat, completions,
                generate (streamed or not)
    engine      what a request produces (Plan) and when each token is due (Pacer, Engine)
    answers     the quality gate's questions (host/quality.py) answered as a good model would; logprobs: the
                synthetic logprobs of /generate
    metrics     counters and their Prometheus text; faults: the SGLANG_EMU_FAULT behaviours
    perf        the SYNTHETIC performance model (SGLANG_EMU_PERF_MODEL): flags that scale the rates or fault
    group       multi-node groups (--nnodes > 1): rank 0's store and its members over real TCP, the stand-in
                server of ranks >= 1, the group's death when a node goes

Launch flags honoured: --host, --port, --model-path/--model, --served-model-name, --api-key, --admin-api-key
(SGLang's ADMIN_OPTIONAL endpoints /flush_cache and /freeze_gc then take only it),
--speculative-algorithm, --speculative-num-steps, --speculative-eagle-topk,
--speculative-num-draft-tokens, --reasoning-parser, --enable-metrics, --context-length,
--max-running-requests (with a speculative algorithm and no value, 48 as SGLang does),
--stream-response-default-include-usage, --enable-cache-report, --incremental-streaming-output,
--skip-server-warmup, --tp-size, --pp-size, --nnodes, --node-rank, --dist-init-addr (alias --nccl-init-addr),
--dist-timeout. Every other ``--flag`` is accepted and ignored (shown in /server_info); a flag
followed by tokens not starting with ``--`` takes them as its value(s), otherwise it is a switch.
SGLang's EAGLE-family assert is reproduced: --speculative-eagle-topk or --speculative-num-draft-tokens
without --speculative-num-steps exits 1 with an AssertionError traceback.

Emulation settings (environment variable, or the ``--emu-*`` flag that overrides it):

    SGLANG_EMU_LOAD_S          --emu-load-s          3     seconds the port stays closed ("loading")
    SGLANG_EMU_WARMUP_S        --emu-warmup-s        1     seconds /health* answer 503 after the port opens
    SGLANG_EMU_TTFT_MS         --emu-ttft-ms         80    time to first token, from admission
    SGLANG_EMU_DECODE_TOK_S    --emu-decode-tok-s    172   per-stream decode rate (delivered tokens/s)
    SGLANG_EMU_AGGREGATE_TOK_S --emu-aggregate-tok-s 0     ceiling over all running streams (0 = none);
                                                           per-stream rate = min(decode, aggregate / running)
    SGLANG_EMU_ACCEPT_LENGTH   --emu-accept-length   2.5 with a speculative algorithm, else 1.0:
                                                           tokens per decode step (>= 1, at most
                                                           num_steps + 1); a fraction gives a deterministic
                                                           mix of step sizes whose mean is exact
    SGLANG_EMU_FAULT           --emu-fault           none: crash_on_load | crash_mid_stream | garbage |
                                                           never_ready | http_500 | wrong | nan_logprobs |
                                                           nondeterministic | spec_changes_tokens |
                                                           stall | slow
    SGLANG_EMU_FAULT_MESSAGE   --emu-fault-message   text of the crash_on_load / http_500 error
    SGLANG_EMU_WRONG_SHARE     --emu-wrong-share     0.5   the fault wrong: share of the questions answered
                                                           wrongly (0 to 1; by each prompt's crc32)
    SGLANG_EMU_PERF_MODEL      (environment only)    JSON rules: launch flags / environment that multiply
                                                           the decode, aggregate and TTFT settings, or set
                                                           a fault (perf.py; the lab's group_vars/lab.yml)
    SGLANG_EMU_STACK           (environment only)    the stack bundle the lab's server stands in for; read
                                                           only by perf-model rules (env:SGLANG_EMU_STACK)

Faults: crash_on_load prints a Python traceback to stderr halfway through the load time and exits 1;
crash_mid_stream exits the process (os._exit) halfway through a generation; garbage makes every token
"!"; never_ready keeps /health 503 forever; http_500 answers generation endpoints with 500; stall admits every
request (running, /health 200) and never sends it a token (the warm-up passes); slow runs every rate at a tenth and
the first token ten times as late (faults.SLOW_SHARE). The quality gate's
faults: wrong answers SGLANG_EMU_WRONG_SHARE of its questions fluently but wrongly (off by one, another city or
planet, lower case, a number missing from a list), the same ones every time; nan_logprobs makes every logprob of
/generate null (what SGLang's orjson writes for NaN); nondeterministic moves the tokens after the first 2 to 4
differently on each request (drawn from the request's number); spec_changes_tokens, only with a speculative
algorithm, moves every token after position 4 (a lossless mode that is not).

Answers: the OpenAI routes answer the quality gate's questions (ansible_collections.sglang.deploy.plugins.module_utils.quality.QUESTIONS: sums, word
problems, a few facts, two format prompts) right, as the first tokens, then EOS (after the thinking share with a
reasoning parser and thinking on); other prompts get vocabulary words. /generate never answers; with
return_logprob its meta_info has output_token_logprobs ([logprob, id, null] per token, from the prompt and the
position, in [-3, 0)) and with top_logprobs_num K output_top_logprobs (K per token, the chosen one first).

Timing: the first token comes TTFT after admission; then all running streams advance on one shared
virtual clock whose speed is the per-stream rate, and token j of a stream is due when that clock has
moved j tokens past the moment the stream's first token went out (a late first token is not caught up
on). Deadlines are absolute (monotonic clock), so a late decode step is not carried over to the next.
One chunk is sent per decode step; a stream's chunk is due at its last token's time, so
(e2e - ttft) / (completion_tokens - 1) is exactly 1 / rate while the rate stays constant.

Multi-node (--nnodes > 1): rank 0 listens on --dist-init-addr's port and stays loading (port closed) until the
other nnodes - 1 ranks have connected; after --dist-timeout (unset: 1800 s) it exits 1 with torch's DistStoreError.
Ranks >= 1 connect (retrying until the timeout) and then serve only a stand-in: /health, /health_generate, /ping
200, /metrics 200 with --enable-metrics, the rest 404. A rank >= 1 that goes (SIGTERM: its default action) kills
rank 0 5 s later (SIGKILL); rank 0 that goes, cleanly or not, ends every rank >= 1 (exit 3, 2 s later).

Shutdown: SIGTERM drains as SGLang does (/health* 503, requests finish, new ones are still served), then the process
kills itself (SIGKILL, status -9, like SGLang's kill_process_tree); SIGINT stops at once (exit 0).

Endpoints: GET /health /health_generate /ready /v1/models /v1/models/{id} /model_info /server_info
(and the deprecated /get_model_info /get_server_info) /metrics; POST /v1/chat/completions
/v1/completions /generate; GET or POST /flush_cache /freeze_gc. Output length: max_tokens (chat/completions) or
sampling_params.max_new_tokens (/generate); without ignore_eos a stream stops at a deterministic
"EOS" point (32..256 tokens, from the prompt) but never before min_tokens / min_new_tokens.
usage.prompt_tokens is the prompt's whitespace word count (at least 1).

Careless and hostile input: settings must be finite and --port 1..65535 (else exit 2 with the setting's
name); the API key is checked before a body is read; a wrong-typed JSON field is a 400; a connection idle
for 5 s is closed (SGLang's uvicorn timeout_keep_alive), a request's head must arrive within 5 s and its
body within 60 s (64 MiB at most); /server_info and its launch_command show API keys as ***; the access
log escapes the request line and /metrics escapes the model name; at the fd limit one warning a minute.
"""
