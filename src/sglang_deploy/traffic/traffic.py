"""A trace on the controller: imported (validated, timestamps from 0, written 0600) and summarised for
`sglang-deploy traffic`."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.module_utils.bench import trace


def import_trace(src: str, dest: str) -> dict:
    """Read the trace at src (bench_serving's Mooncake JSONL), check every line and write it to dest in order of
    arrival, timestamps from 0, mode 0600; {path, sha256 of the source, summary}. ValueError naming the fix."""
    records, sha = trace.read(src)
    return {"path": trace.write(records, dest), "source_sha256": sha, "summary": trace.summary(records)}


def summarize(path: str) -> tuple:
    """(the trace's records, its summary: trace.summary); ValueError naming the fix."""
    records, sha = trace.read(path)
    return records, {"path": path, "sha256": sha, **trace.summary(records)}


def summary_lines(s: dict) -> list:
    """The summary as text lines."""

    def num(v, unit: str = "") -> str:
        return "n/a" if v is None else f"{v:,.3g}{unit}" if isinstance(v, float) else f"{v:,}{unit}"

    lines = [
        f"trace {s['path']} ({s['requests']} requests over {num(s['duration_s'], ' s')})",
        f"arrival rate  {num(s['rate_req_s'], ' req/s')}, burstiness (CV of gaps) {num(s['burstiness_cv'])} "
        "(1: Poisson, above: bursts)",
        f"prefix reuse  {num(s['prefix_reuse_share'])} of {s['prefix_blocks']} blocks of {s['block_tokens']} tokens "
        "were sent before",
    ]
    for name in ("input_length", "output_length"):
        p = s[name]
        lines.append(
            f"{name:<13} mean {p['mean']:,.0f}  p50 {p['p50']:,.0f}  p90 {p['p90']:,.0f}  p99 {p['p99']:,.0f}  "
            f"max {p['max']:,} tokens"
        )
    return lines


def origin_lines(s: dict) -> list:
    """Where a captured trace was captured (merge.origin's keys of its summary) as text lines; none for another."""
    if "captured_at" not in s:
        return []
    hosts = ", ".join(f"{h} {n}" for h, n in s["hosts"].items())
    lines = [f"captured at   {s['captured_at']}: requests per server {hosts}"]
    router = s.get("router")
    if router:
        status = ", ".join(f"{n} {k}" for k, n in sorted(router["status"].items())) or "none"
        lines.append(f"router        {router['host']}: {router['requests']} generation requests answered ({status})")
    if s.get("outside_window"):
        lines.append(
            f"left out      {s['outside_window']} requests that arrived outside the window every server captured"
        )
    if s.get("router_note"):
        lines.append(f"note: {s['router_note']}")
    return lines
