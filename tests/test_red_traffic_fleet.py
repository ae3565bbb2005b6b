"""Red-team proofs against the fleet capture (issue 51)."""

from __future__ import annotations

from pathlib import Path

from emulator_proc import run_module  # noqa: F401  first: puts the repo's module_utils on the path

from sglang_deploy.traffic import merge
from ansible_collections.sglang.deploy.plugins.module_utils.bench import router_log, trace

FIXTURE = Path(__file__).parent / "fixtures" / "smg-1.13.0-request-log.txt"
R = trace.Record


def _line(path: str, status: int, request_id: str = "x") -> str:
    return (
        f"2026-12-06 18:09:02  INFO http_request{{method=POST path={path} version=HTTP/1.1 module=\"smg\" "
        f'request_id="{request_id}" status_code={status} latency=7841}}: smg::response: finished processing request'
    )


def test_a_client_path_cannot_turn_a_404_into_a_counted_generation_request():
    """smg logs the request's path as the client sent it (checked on smg 1.13.0 from PyPI: POST /generate"status_code=200
    got 404 and the line `path=/generate"status_code=200 ... status_code=404`, counted here as a 2xx); a client that
    sends POST /generate"status_code=200 gets 404 from smg, and the router's count must not take it for a 2xx."""
    assert router_log.parse_line(_line("/v1/chat/completions", 200)) == ("POST", "/v1/chat/completions", 200)
    got = router_log.collect([_line('/generate"status_code=200', 404)] * 5)
    assert got["status"].get("2xx", 0) == 0, got


def test_a_healthy_fleet_with_staggered_starts_gets_no_router_note(monkeypatch):
    """Every client request went through the router and was answered 200 by one replica; replica b's async start came
    3 s after a's (forks, SSH). The merge keeps [latest start, earliest end]; the router must count the same window,
    or every fleet capture under steady traffic carries a router_note that blames a direct request or the log level."""
    arrivals = [100.5 + i for i in range(60)]  # one request a second, round robin over a and b
    windows = {"a": (100.0, 160.0), "b": (103.0, 163.0)}
    parts = []
    for k, host in enumerate("ab"):
        mine = [t for i, t in enumerate(arrivals) if i % 2 == k and windows[host][0] <= t <= windows[host][1]]
        records = [R(round((t - mine[0]) * 1000, 3), 10, 5) for t in mine]
        parts.append(merge.Part(host, mine[0], records, windows[host]))
    merged = merge.merge(parts, 60, 10_000)

    def journal(service, since, until, limits):  # smg's line at each answer (latency of ms)
        return iter(_line("/generate", 200) for t in arrivals if since <= t <= until)

    monkeypatch.setattr(router_log.unit_capture, "journal_lines", journal)
    view = router_log.run("smg", [list(w) for w in windows.values()])
    where = merge.origin(merged.hosts, view)
    assert where["router_note"] is None, (view["window"], merged.outside, where["router_note"])


def test_a_fleet_with_a_multi_node_group_captures_only_servers_with_an_api(tmp_path):
    """inventory/group-lab.yml: sglang-group-tp-1 is rank 1 of a tp group; its HTTP server answers only /health,
    /health_generate and /metrics (tests/real/two_nodes.json, the emulator's StandIn). playbooks/traffic.yml captures
    `all:!sglang_router`, rank 1 included: found_logging's GET /server_info there is a 404, the module fails on that
    host, the run is not ok and the whole fleet's capture is lost. The play must keep to the API servers (the
    sglang_api_servers filter, as roles/sglang_fleet does) or skip ranks >= 1."""
    import threading

    import yaml
    from test_emulator_real import KEY, two_nodes

    from ansible_collections.sglang.deploy.plugins.module_utils.bench import unit_capture
    from ansible_collections.sglang.deploy.plugins.module_utils import readiness, server_http

    ranks = two_nodes(tmp_path)
    try:
        waits = [threading.Thread(target=readiness.wait_ready, args=(r.url,), kwargs={"timeout": 60}) for r in ranks]
        for t in waits:
            t.start()
        for t in waits:
            t.join(90)
        status = server_http.request(server_http.Endpoint.parse(ranks[1].url), "GET", "/server_info", None, KEY, 10).status
        assert status == 404 and readiness.probe(ranks[1].url, KEY, timeout=10)[0] == "ready", status
        try:
            unit_capture.found_logging(ranks[1].url, (KEY, KEY))
            rank1_fails = False
        except ValueError:
            rank1_fails = True
    finally:
        for r in ranks:
            r.stop()
    play = yaml.safe_load((Path(__file__).parents[1] / "playbooks" / "traffic.yml").read_text())[0]
    text = yaml.safe_dump(play)
    keeps_to_api_servers = "sglang_api_servers" in text or "rank" in text
    assert not rank1_fails or keeps_to_api_servers, "rank 1 cannot be captured and the play does not skip it"


def test_what_a_host_returns_cannot_confirm_a_guessed_prompt():
    """Before 356fa63 a host returned hash ids numbered on the host (0, 1, 2...). Now it returns the blocks' raw
    digests (first 8 bytes of an unsalted sha256 chain of the token ids) in the module result, which lands in the
    async job file, the runner's artifacts and events: anyone holding them can confirm a guessed prompt (a system
    prompt, a document, a short answer: one block) by hashing its token ids. A per-capture secret key (HMAC, no_log,
    dropped after the merge) keeps the cross-host equality without that."""
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import capture

    secret_prompt = [101, 2023, 2003, 1996, 3595, 102]  # a short prompt's token ids: one partial block
    got = [capture.Captured(1.0, len(secret_prompt), 3, tuple(trace.block_digests(secret_prompt)), None)]
    returned = capture.to_trace(got, numbered=False)[0].hash_ids
    guess = tuple(int.from_bytes(d, "big") for d in trace.block_digests(secret_prompt))
    assert returned != guess, "the host's result confirms the guessed prompt"
