"""The benchmark and the readiness probes against a scripted hostile server (issue 20 items 6 and 8): answers
that drip, never end, carry oversized or too many headers, malformed SSE, usage of the wrong type or another
model's name. Each is bounded in time and size and reported as what it is; what was measured is kept."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from sglang_deploy import cli
from ansible_collections.sglang.deploy.plugins.module_utils import readiness, server_http
from ansible_collections.sglang.deploy.plugins.module_utils.server_http import Endpoint, HttpError

MODEL = "tiny"


def sse(events: list) -> bytes:
    return b"".join(b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n" for e in events)


def good_stream(n: int = 16, model: str = MODEL, usage=None) -> bytes:
    chunk = {"object": "chat.completion.chunk", "model": model}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    events += [{**chunk, "choices": [{"index": 0, "delta": {"content": f" word{i}"}}]} for i in range(n)]
    events.append({**chunk, "choices": [], "usage": usage or {"prompt_tokens": 9, "completion_tokens": n}})
    return sse(events) + b"data: [DONE]\n\n"


class Scripted:
    """An HTTP/1.1 server on 127.0.0.1: `routes[path]` is bytes (a 200 body), or a callable(sock, n) that writes
    the whole answer itself (n = how many times the path was asked for). Every answer closes the connection."""

    def __init__(self, routes: dict):
        self.routes = {
            "/health": b"",
            "/server_info": json.dumps({"served_model_name": MODEL}).encode(),
            "/metrics": b"# no metrics\n",
            **routes,
        }
        self.asked: dict = {}
        self.bodies: dict = {}  # path -> the request bodies it got, in order
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        return
                    head += data
                path = head.split(b" ", 2)[1].decode()
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                body = head.split(b"\r\n\r\n", 1)[1]
                while len(body) < length:
                    body += conn.recv(65536)
                n = self.asked[path] = self.asked.get(path, 0) + 1
                self.bodies.setdefault(path, []).append(body)
                route = self.routes.get(path)
                if callable(route):
                    route(conn, n)
                elif route is None:
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                else:
                    kind = b"text/event-stream" if path.startswith("/v1/chat") else b"application/json"
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                        % (kind, len(route))
                        + route
                    )
            except OSError:
                pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


@pytest.fixture
def scripted():
    servers = []

    def start(**routes):
        servers.append(Scripted(routes))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def drip(conn: socket.socket, n: int) -> None:
    """A status line, then one header byte every 0.1 s for ever (each read gets something)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while True:  # until the client hangs up (OSError, caught by Scripted.answer)
        conn.sendall(b"X")
        time.sleep(0.1)


def drip_body(conn: socket.socket, n: int) -> None:
    """A whole head without a length (http.client then lets go of the connection's socket), then a body byte every
    0.1 s for ever."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
    while True:  # until the client hangs up
        conn.sendall(b"X")
        time.sleep(0.1)


def endless(conn: socket.socket, n: int) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
    line = b"sglang:num_requests_total 1\n" * 2048
    while True:  # until the client hangs up
        conn.sendall(line)


def run_bench(url: str, tmp_path, *extra) -> tuple:
    dest = tmp_path / "r.json"
    argv = ["bench", "--url", url, "--concurrency", "1,2", "--requests", "2", "--output-len", "16", "--warmup", "0"]
    rc = cli.main([*argv, "--json", str(dest), *extra])
    return rc, (json.loads(dest.read_text()) if dest.exists() else None)


def test_a_dripping_answer_is_bounded_by_the_total_timeout(scripted):
    server = scripted(**{"/health": drip})
    with pytest.raises(TimeoutError, match="no complete answer within 1 s"):
        server_http.request(Endpoint.parse(server.url), "GET", "/health", timeout=1.0)
    assert readiness.probe(server.url, timeout=1.0) == ("error", None)


def test_a_body_dripped_without_a_length_is_bounded_by_the_total_timeout(scripted):
    server = scripted(**{"/metrics": drip_body})
    with pytest.raises(server_http.SlowAnswer, match="no complete answer within 1 s"):
        server_http.request(Endpoint.parse(server.url), "GET", "/metrics", timeout=1.0)


def test_a_dripping_health_stops_the_bench_within_its_timeout(scripted, tmp_path, capsys):
    server = scripted(**{"/health": drip})
    rc, _ = run_bench(server.url, tmp_path, "--timeout", "1")
    assert rc == 1
    err = capsys.readouterr().err
    assert "GET /health" in err and "no complete answer within 1 s" in err and "Traceback" not in err


def test_an_endless_body_is_cut_at_the_cap(scripted):
    server = scripted(**{"/metrics": endless})
    with pytest.raises(HttpError, match="body is over 1048576 bytes"):
        server_http.request(Endpoint.parse(server.url), "GET", "/metrics", timeout=10, max_bytes=1 << 20)


def test_an_endless_metrics_after_a_level_keeps_the_level(scripted, tmp_path, capsys):
    def metrics(conn, n):  # the first scrape answers, the one after the level never ends
        if n == 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n# ")
        else:
            endless(conn, n)

    server = scripted(**{"/metrics": metrics, "/v1/chat/completions": good_stream()})
    rc, result = run_bench(server.url, tmp_path, "--timeout", "20")
    assert rc == 1
    first, second = result["levels"]
    assert first["completed"] == 2 and first["output_tokens"] == 32
    assert f"over {server_http.MAX_BODY_BYTES} bytes" in first["stopped"] and second["stopped"]
    assert "STOPPED early" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (good_stream(usage={"prompt_tokens": 9, "completion_tokens": "16"}), "malformed usage: completion_tokens"),
        (good_stream(usage={"prompt_tokens": [1], "completion_tokens": 16}), "malformed usage: prompt_tokens"),
        (good_stream(usage={"prompt_tokens": 9, "completion_tokens": True}), "malformed usage: completion_tokens"),
        (sse([{"choices": [], "usage": "16"}]) + b"data: [DONE]\n\n", "malformed usage: a JSON str"),
        (sse([{"choices": "abc"}]) + good_stream(), "malformed SSE event: choices is not a list"),
        (sse([{"choices": [{"delta": {"content": 7}}]}]) + good_stream(), "malformed SSE event: choices[].delta"),
        (sse([[1, 2]]) + good_stream(), "malformed SSE event: a JSON list"),
        (b"data: {not json\n\n" + good_stream(), "unparseable SSE data"),
        (b"data: " + b"[" * 200000 + b"\n\n" + good_stream(), "unparseable SSE data"),
        (b"data: " + b"x" * (2 << 20), "malformed SSE: a line of over"),
        (good_stream(model="other-model"), "the answer names model 'other-model', not the requested 'tiny'"),
    ],
)
def test_a_malformed_stream_fails_its_requests_as_what_it_is(stream, error, scripted, tmp_path, capsys):
    server = scripted(**{"/v1/chat/completions": stream})
    rc, result = run_bench(server.url, tmp_path, "--output-len", "512")  # its answer's bound is past a 2 MiB line
    assert rc == 1 and result["stopped"] is None  # every level ran; the table and the JSON are there
    for level in result["levels"]:
        assert level["failed"] == level["requests"]
        assert any(error in e for e in level["errors"]), level["errors"]
        assert not any("cut short" in e for e in level["errors"])
    out = capsys.readouterr().out
    assert "0/2" in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("head", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n", "response head is over 1048576 bytes"),
        (b"HTTP/1.1 200 OK\r\n" + b"X-H: 1\r\n" * 150 + b"\r\n", "more than 100 header lines"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad response body"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-6\r\nxxxxxx", "bad response body"),
    ],
)
def test_a_bad_response_head_or_framing_is_named(head, error, scripted, tmp_path):
    server = scripted(**{"/v1/chat/completions": lambda conn, n: conn.sendall(head)})
    rc, result = run_bench(server.url, tmp_path)
    assert rc == 1
    errors = result["levels"][0]["errors"]
    assert any(error in e for e in errors) and not any("cut short" in e for e in errors), errors


def test_prompts_are_counted_in_the_servers_tokens_where_it_can_tokenize(scripted, tmp_path):
    """SGLang's /v1/tokenize of a sample sets the words per token of generated prompts; a server without it
    (the emulator) keeps one token per word."""
    tokenize = json.dumps({"tokens": [], "count": 1300, "max_model_len": 4096}).encode()
    server = scripted(**{"/v1/tokenize": tokenize, "/v1/chat/completions": good_stream()})
    rc, result = run_bench(server.url, tmp_path)
    assert rc == 0 and result["workload"]["tokens_per_word"] == 1.3
    assert server.asked["/v1/tokenize"] == 1
    plain = scripted(**{"/v1/chat/completions": good_stream()})
    rc, result = run_bench(plain.url, tmp_path)
    assert rc == 0 and result["workload"]["tokens_per_word"] is None
    huge = json.dumps({"count": 10**12}).encode()  # no tokenizer gives it: one token per word stays
    wrong = scripted(**{"/v1/tokenize": huge, "/v1/chat/completions": good_stream()})
    rc, result = run_bench(wrong.url, tmp_path)
    assert rc == 0 and result["workload"]["tokens_per_word"] is None
    # 10 tokens for 1000 words would make each prompt 100 times its length in words: not believed either
    tiny = scripted(**{"/v1/tokenize": json.dumps({"count": 10}).encode(), "/v1/chat/completions": good_stream()})
    rc, result = run_bench(tiny.url, tmp_path)
    assert rc == 0 and result["workload"]["tokens_per_word"] is None


def test_sanity_prompts_refuse_an_answer_naming_another_model(scripted):
    answer = {"model": "other-model", "choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}]}
    server = scripted(**{"/v1/chat/completions": json.dumps(answer).encode()})
    with pytest.raises(readiness.SanityError) as exc:
        readiness.sanity_check(server.url, MODEL)
    assert exc.value.check == "model" and "'other-model'" in str(exc.value)
    readiness.sanity_check(server.url, "other-model")  # the model it names: accepted


@pytest.mark.parametrize("message", [{"content": 7}, {"content": None, "reasoning_content": ["x"]}, "text"])
def test_sanity_prompts_refuse_a_message_that_is_not_text(message, scripted):
    answer = {"choices": [{"message": message, "finish_reason": "stop"}]}
    server = scripted(**{"/v1/chat/completions": json.dumps(answer).encode()})
    with pytest.raises(readiness.SanityError) as exc:
        readiness.sanity_check(server.url, MODEL)
    assert exc.value.check == "response_format"


def test_sanity_prompts_name_an_answer_nested_past_the_recursion_limit(scripted):
    """JSON nested deeper than Python's recursion limit is a malformed answer, not a RecursionError out of the
    module (the role would print a traceback instead of the verdict)."""
    server = scripted(**{"/v1/chat/completions": b"[" * 200_000})
    with pytest.raises(readiness.SanityError) as exc:
        readiness.sanity_check(server.url, MODEL)
    assert exc.value.check == "response_format"


def json_answer(doc) -> callable:
    body = json.dumps(doc).encode()
    return lambda conn: conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )


def sharegpt_file(tmp_path, rows: int, answer: str = "w " * 20) -> str:
    share = [{"conversations": [{"value": f"question {i} here"}, {"value": answer}]} for i in range(rows)]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(share))
    return str(path)


def count_answers(url: str, path: str, timeout: float = 10.0):
    """The sharegpt dataset at `path`, calibrated to 1.5 tokens per word, its answers counted by the server."""
    import asyncio

    from ansible_collections.sglang.deploy.plugins.module_utils.bench import sweep
    from ansible_collections.sglang.deploy.plugins.module_utils.bench.client import Target

    _, _, data = sweep.check_workload(dataset_name="sharegpt", dataset_path=path)
    data.calibrate(1.5)
    asyncio.run(sweep._Probe(Target(Endpoint.parse(url)), timeout).count_answers(MODEL, data))
    return data


@pytest.mark.parametrize("bad", [10**12, 41 + 17, 0])
def test_an_implausible_answer_count_keeps_the_ratio_for_its_batch(bad, scripted, tmp_path):
    """70 answers of 20 words (40 bytes) are counted in batches of 64 and 6: a count no tokenizer gives (over one
    per byte plus 16, or none) drops its batch, whose rows keep words x tokens_per_word (30); the other batch's
    counts stand."""

    def tokenize(conn, n):
        json_answer({"count": [25] * 64 if n == 1 else [25] * 5 + [bad]})(conn)

    server = scripted(**{"/v1/tokenize": tokenize})
    data = count_answers(server.url, sharegpt_file(tmp_path, 70))
    assert [data.row(i).output_len for i in (0, 63, 64, 69)] == [25, 25, 30, 30]
    lengths = data.info["answer_lengths"]
    assert lengths.startswith("server tokens (/v1/tokenize) for 64 of 70 rows; the rest words x tokens_per_word")
    assert f"requests 65-70: /v1/tokenize counted {bad} tokens for the 40-byte answer of request 70" in lengths
    data.check_context(100)  # 3 prompt + 30 output tokens at most


def test_answers_counted_under_two_tokens_are_pruned_as_bench_serving_does(scripted, tmp_path):
    """A row counted 1 token is pruned (bench_serving prunes output_len < 2); an answer without spaces (Chinese,
    code) is one word of many tokens, and kept: the plausible band is in bytes, not in words."""
    server = scripted(**{"/v1/tokenize": lambda conn, n: json_answer({"count": [1, 7, 1, 9]})(conn)})
    data = count_answers(server.url, sharegpt_file(tmp_path, 4))
    assert data.info["rows"] == 2 and data.info["answers_pruned"] == 2
    assert sorted(data.row(i).output_len for i in range(2)) == [7, 9] and data.row(2) == data.row(0)
    assert data.info["answer_lengths"] == (
        "server tokens (/v1/tokenize); 2 rows pruned: the server counts their answers under 2 tokens"
    )
    unspaced = scripted(**{"/v1/tokenize": lambda conn, n: json_answer({"count": [1, 150]})(conn)})
    data = count_answers(unspaced.url, sharegpt_file(tmp_path, 2, answer="\u4f60\u597d" * 60 + " ok"))
    assert data.row(0).output_len == 150 and data.info["answers_pruned"] == 1
    every = scripted(**{"/v1/tokenize": lambda conn, n: json_answer({"count": [1, 1]})(conn)})
    with pytest.raises(ValueError, match="counts every answer under 2 tokens .* none is left: give longer answers"):
        count_answers(every.url, sharegpt_file(tmp_path, 2))


def test_a_slow_tokenize_keeps_the_ratio_and_the_run_goes_on(scripted, tmp_path):
    """The sample is counted (1.3 tokens per word), the answers' count never ends: they keep 20 words x 1.3."""

    def tokenize(conn, n):
        if n == 1:
            json_answer({"count": 1300})(conn)
        else:
            drip(conn, n)

    server = scripted(**{"/v1/tokenize": tokenize, "/v1/chat/completions": good_stream(26)})
    path = sharegpt_file(tmp_path, 3)
    rc, result = run_bench(server.url, tmp_path, "--dataset-name", "sharegpt", "--dataset-path", path, "--timeout", "1")
    assert rc == 0 and result["stopped"] is None and result["levels"][0]["output_len_mismatch"]["expected"] == 26
    assert result["workload"]["answer_lengths"] == (
        "words x tokens_per_word; from request 1 on: /v1/tokenize gave no answer within 1 s"
    )


def test_answers_are_counted_with_special_tokens_as_bench_serving_counts_them(scripted, tmp_path):
    """bench_serving's output length is len(tokenizer.encode(answer)), special tokens added (a BOS on Llama-3 and
    DeepSeek tokenizers): the answers' /v1/tokenize asks for the same; the sample of prompt words does not."""
    server = scripted(**{"/v1/tokenize": lambda conn, n: json_answer({"count": [26, 26]})(conn)})
    count_answers(server.url, sharegpt_file(tmp_path, 2))
    body = json.loads(server.bodies["/v1/tokenize"][0])
    assert body["add_special_tokens"] is True and body["prompt"] == ["w " * 20] * 2 and body["model"] == MODEL


def endless_answer(event: bytes) -> callable:
    """A valid SSE answer that never ends: a head without a length, then `event` over and over."""

    def answer(conn: socket.socket, n: int) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        while True:  # until the client hangs up
            conn.sendall(event * 16)

    return answer


def token_event(text: str) -> bytes:
    return sse(
        [{"object": "chat.completion.chunk", "model": MODEL, "choices": [{"index": 0, "delta": {"content": text}}]}]
    )


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (token_event(" word"), "the answer holds over 96 SSE events, more than 16 tokens (max_tokens) take"),
        (token_event("w" * 50_000), "the answer is over 393216 bytes, more than 16 tokens (max_tokens) take"),
        (b": keep-alive" + b" " * 50_000 + b"\n", "the answer is over 393216 bytes"),
    ],
)
def test_an_endless_answer_fails_its_request_at_a_bound_of_its_max_tokens(event, error, scripted, tmp_path):
    """An answer that never ends once kept every byte until the timeout (958 MB in 45 s): a request stops reading at
    2 x max_tokens + 64 events or 4 KiB a such event, and fails as what it is; the sweep goes on."""
    server = scripted(**{"/v1/chat/completions": endless_answer(event)})
    # 30 s guards a hang, not speed: the bound must stop the request, not the timeout (the level would be stopped)
    rc, result = run_bench(server.url, tmp_path, "--timeout", "30")
    assert rc == 1 and result["stopped"] is None
    for level in result["levels"]:
        assert level["failed"] == level["requests"] and all(error in e for e in level["errors"])


@pytest.mark.parametrize("size", [b"-6", b"ffffffffff"])
def test_a_chunk_size_out_of_range_is_refused_at_once(size):
    """A negative chunk size sent the decoder back to where it began, for ever (a loop that never awaits: no timeout
    stops it); a huge one kept every byte while it waited for the chunk's end."""
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import client

    raised = []

    def feed():
        try:
            client.ChunkedDecoder(lambda data: None).feed(size + b"\r\n" + b"x" * 100)
        except ValueError as exc:
            raised.append(str(exc))

    worker = threading.Thread(target=feed, daemon=True)
    worker.start()
    worker.join(5)
    assert raised == [f"a chunk size of {size.decode()!r} is not one of 0 to {client.MAX_PENDING} bytes"]


@pytest.mark.parametrize(("name", "text"), [("sharegpt", "[" * 100_000), ("custom", '{"messages": ' + "[" * 100_000)])
def test_a_dataset_nested_past_the_recursion_limit_is_refused_by_name(name, text, tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text(text)
    argv = ["bench", "--url", "http://127.0.0.1:9", "--dataset-name", name, "--dataset-path", str(path)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{name} dataset {path}" in err and "is JSON nested too deeply to read" in err and "Traceback" not in err


def test_endless_trailers_after_the_last_chunk_are_refused_past_the_line_cap():
    """After the last chunk (size 0) the decoder waited for the blank line that ends the trailers and kept every byte
    until then: a server sending trailer lines for ever grew the client's memory until --timeout (issue 41 review)."""
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import client

    decoder = client.ChunkedDecoder(lambda data: None)
    decoder.feed(b"0\r\n")
    line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    with pytest.raises(ValueError, match="trailers"):
        for _ in range(2 * client.MAX_PENDING // len(line)):
            decoder.feed(line * 16)
    assert len(decoder.buf) <= client.MAX_PENDING + 16 * len(line)
    done = client.ChunkedDecoder(lambda data: None)
    done.feed(b"0\r\nX-A: b\r\n\r\n")
    assert done.done


def test_the_client_keeps_only_the_prefix_of_an_answer_the_output_check_reads(scripted):
    """The client kept the whole text of every answer of a level though the output check reads 4,096 characters
    (1.12 GB at output length 2,048 with 64 requests of answers near the cap; issue 48 R3): it keeps that prefix,
    reasoning and content in order, and counts the rest."""
    import asyncio

    from ansible_collections.sglang.deploy.plugins.module_utils.bench import client, metrics

    chunk = {"object": "chat.completion.chunk", "model": MODEL}
    pieces = [f"{i:03d} " + "w" * 96 for i in range(100)]
    events = [{**chunk, "choices": [{"index": 0, "delta": {"reasoning_content": "think "}}]}]
    events += [{**chunk, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    events.append({**chunk, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 101}})
    server = scripted(**{"/v1/chat/completions": sse(events) + b"data: [DONE]\n\n"})
    tl = metrics.Timeline()
    conn = client.Connection(client.Target(Endpoint.parse(server.url)))
    asyncio.run(client.stream_chat(conn, tl, b"{}", 101, 5.0))
    assert tl.ok and tl.content_chars == 10_000 and len(tl.token_times) == 101
    assert tl.text == ("think " + "".join(pieces))[: metrics.OUTPUT_CHECK_CHARS]
