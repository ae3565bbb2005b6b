"""The compact text table of a result (CLI output, the module's `table`, the playbook summary)."""

from __future__ import annotations

import math
import os


def fmt(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def stat(level: dict, key: str, which: str = "p50"):
    s = level.get(key)
    return s.get(which) if s else None


def label(m: dict) -> str:
    """The level's name: c=8 (closed loop), 2 req/s (c<=8) (Poisson arrivals)."""
    return m.get("label") or f"c={m['concurrency']}"


def format_level_line(m: dict) -> str:
    return (
        f"{label(m)}: {m['completed']}/{m['requests']} ok, "
        f"{fmt(m['output_throughput_tok_s'])} tok/s aggregate, "
        f"{fmt(stat(m, 'decode_tok_s_per_request', 'mean'))} tok/s per request"
    )


def describe(w: dict) -> str:
    """The workload in a few words: the dataset and its lengths in tokens."""
    name = w.get("dataset_name") or "random"
    if name in ("sharegpt", "custom"):
        return f"{name} {os.path.basename(w.get('dataset_path') or '?')} ({w.get('rows')} requests)"
    if name == "trace":
        s = w.get("trace_summary") if isinstance(w.get("trace_summary"), dict) else {}

        def num(key: str, digits: int) -> str:  # a result read back on the controller: a number, else "-"
            value = s.get(key)
            return fmt(value if isinstance(value, (int, float)) and not isinstance(value, bool) else None, digits)

        # The trace's own rate; replayed at time x scale, its requests are scheduled at rate / scale.
        scale, rate = w.get("trace_time_scale"), s.get("rate_req_s")
        scheduled = ""
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (scale, rate)) and scale > 0:
            scheduled = f" in the trace, {fmt(rate / scale, 2)} scheduled" if scale != 1 else ""
        return (
            f"trace {os.path.basename(str(w.get('dataset_path') or '?'))} ({w.get('rows')} requests, time x"
            f"{scale}: {num('rate_req_s', 2)} req/s{scheduled}, in p50 {num('input_length_p50', 0)} out "
            f"p50 {num('output_length_p50', 0)} tokens, prefix reuse {num('prefix_reuse_share', 2)})"
        )
    if name == "generated-shared-prefix":
        return (
            f"shared prefix: {w.get('gsp_num_groups')} groups x {w.get('gsp_prompts_per_group')}, in="
            f"{w.get('gsp_system_prompt_len')}+{w.get('gsp_question_len')} out={w.get('output_len')} tokens"
        )
    ratio = w.get("random_range_ratio", 1.0)
    spread = f" (x{ratio:g}..1)" if ratio not in (None, 1.0) else ""
    return f"in={w.get('input_len')} out={w.get('output_len')} tokens{spread}"


TABLE_COLUMNS = (
    "level",
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
    "good/s",
)


def format_table(result: dict) -> str:
    """Compact text table of a result (CLI output, the module's `table`, the playbook summary)."""
    lines = []
    if result.get("server_emulated"):
        lines.append("EMULATED server: figures are synthetic")
    w = result.get("workload", {})
    lines.append(
        f"{result.get('model') or '?'} @ {result.get('url')}  {describe(w)}  (dec tok/s = per request decode, "
        "mean; times in ms)"
    )
    levels = result.get("levels", [])
    rows = [TABLE_COLUMNS] + [_row(m) for m in levels]
    widths = [max(len(r[i]) for r in rows) for i in range(len(TABLE_COLUMNS))]
    for r in rows:
        lines.append("  ".join(cell.rjust(widths[i]) for i, cell in enumerate(r)))
    for m in levels:
        lines += [f"{label(m)}: {note}" for note in _notes(m)]
    search = result.get("sla_search")
    if search:
        best = search["best_rate"]
        lines.append(
            f"highest request rate meeting the SLA: {best:g} req/s"
            if best is not None
            else f"no request rate meets the SLA (lowest tried: {search['bounds'][0]:g} req/s)"
        )
    sources = {m["spec_accept_length"]["source"] for m in levels if m.get("spec_accept_length")}
    if sources:
        lines.append("accept length source: " + ", ".join(sorted(sources)))
    if result.get("stopped"):
        lines.append(f"STOPPED early: {result['stopped']}")
    return "\n".join(lines)


def _row(m: dict) -> tuple:
    """A level's cells of TABLE_COLUMNS."""
    spec = m.get("spec_accept_length")
    return (
        label(m),
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
        fmt(m.get("goodput_req_s"), 2),
    )


def _notes(m: dict) -> list:
    """What the table's row of a level does not say: its failures, length mismatches, implausible text, SLA."""
    notes = []
    if m["failed"]:
        notes.append(f"{m['failed']} failed, e.g. {next(iter(m['errors']))}")
    mm = m["output_len_mismatch"]
    if mm["count"]:
        ex = mm["examples"][0]
        want = mm["expected"] if mm["expected"] is not None else "their requested"
        notes.append(
            f"{mm['count']} responses not {want} tokens, e.g. request {ex['request']} had {ex['completion_tokens']}"
        )
    oc = m.get("output_check") or {}
    if oc.get("count"):
        ex = oc["examples"][0]
        notes.append(
            f"{oc['count']} responses are not plausible text ({ex['check']}: {ex['detail']}), e.g. {ex['output'][:40]!r}"
        )
    if oc.get("tolerated"):
        notes.append(
            f"{oc['tolerated']} responses are not language, tolerated: the server loads dummy weights (load_format dummy)"
        )
    slo = m.get("slo")
    if slo:
        missed = [f"{k} {fmt(c['value'])} > {c['limit']:g}" for k, c in slo["checks"].items() if not c["met"]]
        notes.append(
            "SLA met" if slo["met"] else "SLA missed" + (f": {', '.join(missed)}" if missed else " (failures)")
        )
    return notes
