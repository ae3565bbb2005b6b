"""The compact text table of a result (CLI output, the module's `table`, the playbook summary)."""

from __future__ import annotations

import math


def fmt(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def stat(level: dict, key: str, which: str = "p50"):
    s = level.get(key)
    return s.get(which) if s else None


def format_level_line(m: dict) -> str:
    return (
        f"c={m['concurrency']}: {m['completed']}/{m['requests']} ok, "
        f"{fmt(m['output_throughput_tok_s'])} tok/s aggregate, "
        f"{fmt(stat(m, 'decode_tok_s_per_request', 'mean'))} tok/s per request"
    )


TABLE_COLUMNS = (
    "conc",
    "ok/req",
    "out tok/s",
    "dec tok/s",
    "dec p50",
    "ttft p50",
    "ttft p99",
    "tpot p50",
    "itl p50",
    "e2e p50",
    "tok/chk",
    "accept",
    "len!=",
)


def format_table(result: dict) -> str:
    """Compact text table of a result (CLI output, the module's `table`, the playbook summary)."""
    lines = []
    if result.get("server_emulated"):
        lines.append("EMULATED server: figures are synthetic")
    w = result.get("workload", {})
    lines.append(
        f"{result.get('model') or '?'} @ {result.get('url')}  in={w.get('input_len')} "
        f"out={w.get('output_len')} tokens  (dec tok/s = per request decode, mean; times in ms)"
    )
    rows = [TABLE_COLUMNS]
    sources = set()
    for m in result.get("levels", []):
        spec = m.get("spec_accept_length")
        if spec:
            sources.add(spec["source"])
        rows.append(
            (
                str(m["concurrency"]),
                f"{m['completed']}/{m['requests']}",
                fmt(m.get("output_throughput_tok_s")),
                fmt(stat(m, "decode_tok_s_per_request", "mean")),
                fmt(stat(m, "decode_tok_s_per_request", "p50")),
                fmt(stat(m, "ttft_ms")),
                fmt(stat(m, "ttft_ms", "p99")),
                fmt(stat(m, "tpot_ms"), 2),
                fmt(stat(m, "itl_ms"), 2),
                fmt(stat(m, "e2e_ms"), 0),
                fmt((m.get("tokens_per_chunk") or {}).get("aggregate"), 2),
                fmt(spec["value"], 2) if spec else "-",
                str(m["output_len_mismatch"]["count"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_COLUMNS))]
    for r in rows:
        lines.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(r)))
    for m in result.get("levels", []):
        if m["failed"]:
            first = next(iter(m["errors"]))
            lines.append(f"c={m['concurrency']}: {m['failed']} failed, e.g. {first}")
        mm = m["output_len_mismatch"]
        if mm["count"]:
            ex = mm["examples"][0]
            lines.append(
                f"c={m['concurrency']}: {mm['count']} responses not {mm['expected']} tokens, "
                f"e.g. request {ex['request']} had {ex['completion_tokens']}"
            )
        oc = m.get("output_check") or {}
        if oc.get("count"):
            ex = oc["examples"][0]
            lines.append(
                f"c={m['concurrency']}: {oc['count']} responses are not plausible text ({ex['check']}: "
                f"{ex['detail']}), e.g. {ex['output'][:40]!r}"
            )
        if oc.get("tolerated"):
            lines.append(
                f"c={m['concurrency']}: {oc['tolerated']} responses are not language, tolerated: the server loads "
                "dummy weights (load_format dummy)"
            )
    if sources:
        lines.append("accept length source: " + ", ".join(sorted(sources)))
    if result.get("stopped"):
        lines.append(f"STOPPED early: {result['stopped']}")
    return "\n".join(lines)
