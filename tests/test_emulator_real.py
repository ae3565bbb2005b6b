"""The emulator held to recordings of real SGLang 0.5.16 on an H200 (tests/fixtures/sglang-0.5.16-h200, made by
tests/gpu): same endpoints and status codes, same field names in JSON bodies and stream chunks, metric names
SGLang really exports, the same readiness stage order, the same error shapes and startup milestones."""

from __future__ import annotations

import http.client
import json
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from emulator_proc import Emulator, free_port

from ansible_collections.sglang.deploy.plugins.module_utils import readiness, server_http
from ansible_collections.sglang.deploy.plugins.module_utils.bench import metrics
from sglang_deploy.emulator.group import DEATH_DELAY_S, MEMBER_EXIT_DELAY_S, MEMBER_EXIT_STATUS

REAL = Path(__file__).parent / "fixtures" / "sglang-0.5.16-h200"
KEY = "emu-key"


def real(name: str):
    text = (REAL / name).read_text()
    return json.loads(text) if name.endswith(".json") else text


def shape(value):
    """The structure of a JSON value: dicts as {key: shape}, lists as [shape of the first item], leaves as None."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value and isinstance(value[0], (dict, list)) else []
    return None


def sse(raw: bytes) -> list:
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def chunk_kinds(chunks: list) -> dict:
    """First role chunk, a token chunk, the finish chunk and the usage chunk of a streamed chat completion."""
    return {
        "role": chunks[0],
        "token": chunks[1],
        "finish": next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]),
        "usage": chunks[-1],
    }


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    server = Emulator(tmp_path_factory.mktemp("emu-real"), "--enable-metrics", "--api-key", KEY).wait_ready()
    yield server
    server.stop()


def request(emu, method, path, body=None, key=KEY):
    resp = server_http.request(server_http.Endpoint.parse(emu.url), method, path, body, key, 30)
    return resp.status, resp.headers, resp.body


def test_endpoint_statuses_and_auth_as_recorded(emu):
    recorded = real("http_api.json")
    for label, rec in recorded.items():
        method, _, path = label.partition(" ") if label.startswith("POST") else ("GET", "", label)
        if method == "POST":
            continue
        path, _, variant = path.partition(" ")
        key = {"(no key)": None, "(wrong key)": "wrong"}.get(variant, KEY)
        status, headers, body = request(emu, "GET", path, key=key)
        assert status == rec["status"], label
        if rec["status"] in (401, 404):
            assert json.loads(body) == json.loads(rec["body"]), label
        if (rec.get("content_type") or "").startswith("application/json"):
            assert headers.get("content-type", "").startswith("application/json"), label


def test_models_list_fields(emu):
    rec = json.loads(real("http_api.json")["/v1/models"]["body"])
    got = json.loads(request(emu, "GET", "/v1/models")[2])
    assert shape(got) == shape(rec)
    assert got["data"][0]["root"] == got["data"][0]["id"]  # real SGLang: root is the served name


def test_model_info_fields(emu):
    rec = json.loads(real("http_api.json")["/model_info"]["body"])
    got = json.loads(request(emu, "GET", "/model_info")[2])
    assert set(got) - {"emulated"} == set(rec)


def test_chat_completion_fields_and_model_echo(emu):
    rec = json.loads(real("http_api.json")["POST /v1/chat/completions (unknown model)"]["body"])
    body = {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    got = json.loads(request(emu, "POST", "/v1/chat/completions", body)[2])
    assert shape(got) == shape(rec)
    assert got["model"] == rec["model"] == "no-such-model"


def test_stream_chunk_fields(emu):
    meta = real("chat_stream_meta.json")
    rec = chunk_kinds(sse(real("chat_stream.txt").encode()))
    status, _, raw = request(emu, "POST", "/v1/chat/completions", meta["request"])
    assert status == meta["status"] == 200
    got = chunk_kinds(sse(raw))
    for kind in rec:
        assert shape(got[kind]) == shape(rec[kind]), kind
    assert got["usage"]["usage"]["completion_tokens"] == rec["usage"]["usage"]["completion_tokens"]


def test_generate_fields(emu):
    rec = real("http_api.json")["POST /generate"]
    got = json.loads(request(emu, "POST", "/generate", rec["request"])[2])
    real_body = json.loads(rec["body"])
    assert set(got) == set(real_body)
    assert set(got["meta_info"]) - {"emulated"} == set(real_body["meta_info"])


def test_bad_request_error_shape(emu):
    rec = real("http_api.json")["POST /v1/chat/completions (bad body)"]
    status, _, body = request(
        emu, "POST", "/v1/chat/completions", {"model": "qwen", "messages": "not a list", "max_tokens": 4}
    )
    assert status == rec["status"] == 400
    got, want = json.loads(body), json.loads(rec["body"])
    assert set(got) == set(want) and got["type"] == want["type"] and got["code"] == want["code"]


def metric_names(text: str) -> set:
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and line[0] != "#"}


def test_metric_names_are_real_ones(emu):
    real_names = metric_names(real("metrics_after.txt")) | metric_names(real("nextn_metrics.txt"))
    emulated = metric_names(request(emu, "GET", "/metrics")[2].decode())
    assert emulated and emulated <= real_names, sorted(emulated - real_names)
    assert {metrics.SPEC_TOKENS_COUNTER, metrics.SPEC_VERIFY_COUNTER} <= metric_names(real("nextn_metrics.txt"))


def test_server_info_fields(emu):
    rec = json.loads(real("http_api.json")["/server_info"]["body"])
    got = json.loads(request(emu, "GET", "/server_info")[2])
    # the emulator's own additions: its label and settings, and the (redacted) command line of the lab
    assert set(got) - {"emulated", "emulator", "launch_command", "startup_time"} <= set(rec), sorted(
        set(got) - set(rec)
    )
    assert {"version", "internal_states", "served_model_name"} <= set(got)
    nextn = real("nextn_server_info.json")
    assert metrics.server_info_accept_length(nextn) == 1.0  # dummy weights: the draft is never accepted


def test_readiness_stage_order(tmp_path):
    recorded = [c["status"] for c in real("health_sequence.json")["health_changes"]]
    assert recorded == ["closed", 503, 200]
    # Emulator's keywords are the settings' own names (load_s: SGLANG_EMU_LOAD_S). 3 s of warm-up: the 503 between
    # the port's opening and ready must outlast a loaded machine holding the poller up (the default 0.2 s did not).
    server = Emulator(tmp_path, load_s=0.8, warmup_s=3.0)
    try:
        ready = readiness.wait_ready(server.url, timeout=60, sleep=0.05)  # 60 s: a hang guard
    finally:
        server.stop()
    assert list(ready["first_seen"]) == ["closed", "warming", "ready"]


def test_startup_milestones_are_real_log_lines(emu):
    real_log = real("startup_log.txt")
    for milestone in (
        "server_args=ServerArgs(",
        "Load weight begin",
        "Load weight end",
        "Application startup complete",
        "Uvicorn running on http://",
        "The server is fired up and ready to roll!",
    ):
        assert milestone in real_log, milestone
        assert milestone in "\n".join(emu.log_lines()), milestone
    assert "api_key='***'" in real_log  # the launcher's filter masked real SGLang's server_args line


def test_crash_logs_end_with_the_error():
    """What the readiness code reports for a startup refusal: the journal's last lines hold the exception."""
    for name in ("served-name-with-colon", "hybrid-nextn-no-buffer", "trtllm-mha-on-sm90"):
        lines = real(f"crash-{name}.log").splitlines()
        assert "Traceback (most recent call last):" in lines, name
        assert any(re.match(r"(AssertionError|ValueError): ", line) for line in lines), name


def two_nodes(tmp_path, *flags: str, **env) -> list:
    """Rank 0 and rank 1 of a tp 2 group on two "nodes", as tests/gpu/test_multi_gpu.py launched them."""
    dist = f"127.0.0.1:{free_port()}"
    group = ("--tp-size", "2", "--nnodes", "2", "--dist-init-addr", dist, "--enable-metrics", "--api-key", KEY)
    return [Emulator(tmp_path, *group, *flags, "--node-rank", str(rank), **env) for rank in (0, 1)]


def wait_ranks(ranks: list, **kw) -> dict:
    """readiness.wait_ready on every rank at once (a group forms only with all of them up), 60 s each: rank index ->
    its result; a rank that never got ready is missing."""
    ready: dict = {}
    waits = [
        threading.Thread(target=lambda i=i, r=r: ready.update({i: readiness.wait_ready(r.url, timeout=60, **kw)}))
        for i, r in enumerate(ranks)
    ]
    for t in waits:
        t.start()
    for t in waits:
        t.join(90)  # hang guards
    return ready


def test_two_node_group_as_recorded(tmp_path):
    """two_nodes.json: both ports closed until the group formed and loaded; rank 1 answers only /health,
    /health_generate (and /metrics) with a stand-in server; rank 0 serves the API. group_stop.json, rank 1 stopped
    first: it exits at once (SIGTERM's default), rank 0's /health stops answering and rank 0 dies some seconds
    later, killed by SIGKILL."""
    rec = real("two_nodes.json")
    stop = real("group_stop.json")["rank1_first"]
    ranks = two_nodes(tmp_path, warmup_s=3.0)  # rank 0's warming stage, long enough to be seen on a loaded machine
    try:
        ready = wait_ranks(ranks, sleep=0.05)
        for r in (0, 1):
            assert list(ready[r]["first_seen"]) == list(rec["ready"][f"rank{r}"]["first_seen"]), r
            for path, seen in rec[f"rank{r}"].items():
                status, _, body = request(ranks[r], "GET", path)
                assert status == seen["status"], (r, path)
                if status == 404:
                    assert json.loads(body) == json.loads(seen["body"]), path
        generate = {"text": "Hello", "sampling_params": {"max_new_tokens": 8}}
        assert request(ranks[0], "POST", "/generate", generate)[0] == 200
        conn = http.client.HTTPConnection("127.0.0.1", ranks[0].port, timeout=10)
        body = {"text": "in flight", "stream": True, "sampling_params": {"max_new_tokens": 3000, "ignore_eos": True}}
        conn.request("POST", "/generate", json.dumps(body), {"Authorization": f"Bearer {KEY}"})
        resp = conn.getresponse()
        # 3000 tokens take 17 s at the emulator's 172 tok/s: still in flight when rank 1 stops, however long a loaded
        # machine holds this test up before it stops rank 1 (300, 1.7 s, could end first)
        resp.readline()
        start = time.monotonic()
        assert ranks[1].stop() == stop["exits"]["1"]["status"] == -signal.SIGTERM
        assert {p["rank0"] for p in stop["rank0_probes"][:-1]} == {"error"}
        assert readiness.probe(ranks[0].url, KEY, timeout=1.0)[0] == "error"  # /health hangs
        ranks[0].proc.wait(stop["exits"]["0"]["t_s"] + 30)  # + 30 s: a hang guard; the delay's own test is below
        assert time.monotonic() - start >= DEATH_DELAY_S
        assert ranks[0].proc.returncode == stop["exits"]["0"]["status"] == -signal.SIGKILL
        assert "Connection reset by peer" in "\n".join(ranks[0].log_lines())
        with pytest.raises(http.client.IncompleteRead):
            resp.read()  # the stream stopped with the group and broke when rank 0 died
    finally:
        for server in ranks:
            server.stop()


def test_sigterm_drain_as_recorded(tmp_path):
    """drain.json (KillMode=mixed: SIGTERM to the main process) and group_stop.json (rank 0 stopped first): /health
    503 at once, a new request during the drain still served, the stream in flight finished, then rank 0 killed
    itself (-9) and rank 1 followed on its own (exit 3)."""
    drain, stop = real("drain.json")["mixed"], real("group_stop.json")["rank0_first"]
    ranks = two_nodes(tmp_path, decode_tok_s=100)  # the setting's own name (SGLANG_EMU_DECODE_TOK_S)
    try:
        ranks[0].wait_ready(), ranks[1].wait_ready()
        conn = http.client.HTTPConnection("127.0.0.1", ranks[0].port, timeout=10)
        # 300 tokens, 3 s at 100 tok/s: still in flight when SIGTERM comes, however long a loaded machine holds this
        # test up after the first line (60 tokens, 0.6 s, could end first and leave no request to drain)
        body = {"text": "drain me", "stream": True, "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}}
        conn.request("POST", "/generate", json.dumps(body), {"Authorization": f"Bearer {KEY}"})
        resp = conn.getresponse()
        first = resp.readline()
        ranks[0].proc.send_signal(signal.SIGTERM)
        assert drain["health_during_stop"][0]["answer"][0] == 503
        assert request(ranks[0], "GET", "/health")[0] == 503
        assert drain["new_request_during_stop"]["status"] == 200
        assert (
            request(ranks[0], "POST", "/generate", {"text": "new", "sampling_params": {"max_new_tokens": 4}})[0] == 200
        )
        events = [line for line in (first + resp.read()).decode().splitlines() if line.startswith("data: ")]
        assert drain["stream"]["done"] and events[-1] == "data: [DONE]"
        assert json.loads(events[-2][6:])["meta_info"]["completion_tokens"] == 300
        # 30 s: hang guards
        assert ranks[0].proc.wait(30) == drain["exit_status"] == stop["exits"]["0"]["status"] == -signal.SIGKILL
        assert "Gracefully exiting... Remaining number of requests 1." in "\n".join(ranks[0].log_lines())
        assert ranks[1].proc.wait(30) == stop["exits"]["1"]["status"] == MEMBER_EXIT_STATUS
        # The delays between the ranks' exits: the simulated-clock test below (this process's view of the real clock
        # can neither confirm nor refute them on a loaded machine).
    finally:
        for server in ranks:
            server.stop()


def test_the_groups_deaths_keep_their_delays_on_the_simulated_clock(monkeypatch):
    """What the two tests above cannot bound on a loaded machine, which sees the processes' exits late: rank 0 kills
    itself DEATH_DELAY_S after it lost a member, and a rank >= 1 exits MEMBER_EXIT_DELAY_S after rank 0 is gone
    (group_stop.json), on the simulated clock (tests/sim_clock.py)."""
    import asyncio
    import types

    import sim_clock

    from sglang_deploy.emulator import group
    from sglang_deploy.emulator.config import Config

    killed = []
    monkeypatch.setattr(group, "kill_process_tree", lambda: killed.append(asyncio.get_running_loop().time()))

    async def scenario():
        loop = asyncio.get_running_loop()
        await group.die("lost a member")
        died = loop.time()
        cfg = Config(["--model-path", "m", "--host", "127.0.0.1", "--port", str(free_port())], {})
        member = types.SimpleNamespace(ended=loop.create_future())
        loop.call_later(1.0, member.ended.set_result, None)  # rank 0 gone 1 s later
        return died, await group.serve_stand_in(cfg, member), loop.time() - died

    died, status, exited = sim_clock.run(scenario())
    assert killed == [died] == [DEATH_DELAY_S]
    assert status == MEMBER_EXIT_STATUS and exited == pytest.approx(1.0 + MEMBER_EXIT_DELAY_S)
