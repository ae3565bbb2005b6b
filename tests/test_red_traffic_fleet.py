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
    """smg logs the request's path as the client sent it (the http crate accepts a raw '"' in a path); a client that
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
