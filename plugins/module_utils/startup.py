"""Where an SGLang start went, from SGLang's own log lines (stdlib only).

The milestones are SGLang's log lines (formats of 0.5.16 as recorded on an H200, and of 0.5.23 from its source):
`server_args=` (ServerArgs(...) in 0.5.16, a dict in 0.5.23: the main process has imported SGLang),
`Init torch distributed begin.` (0.5.16) or `Init parallel begin.` (0.5.23), the first line of the model side once
the scheduler process has spawned and imported, `Load weight begin.` / `Load weight end. elapsed=...`,
`KV Cache is allocated.` (also `Mamba Cache`), `Capture <role> <phase> CUDA graph begin.` / `... end. ...
elapsed=...`, uvicorn's `Application startup complete.` and `The server is fired up and ready to roll!` after the
warm-up request. Lines of ranks other than 0 (the ` TP1`, ` DP1` ... prefix) are left out. FlashInfer's JIT builds
are not logged (SGLang sets FlashInfer's logger to ERROR): on a cold cache they are part of the CUDA graph capture;
DeepGEMM's compile lines and Triton's late compiles are counted as JIT builds.

On a host, read_journal() reads the unit's journal of its current process (systemd's invocation id), with times
relative to the process start (systemd's ExecMainStartTimestampMonotonic against the journal's monotonic stamps);
without them the times of SGLang's own line prefix (whole seconds) are used, relative to its first line.
"""

# Also run outside a module (the launcher, the CLI): no AnsibleModule for run_command.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import json
import posixpath
import re
import subprocess
import threading
from datetime import datetime

EMULATOR_BANNER = "EMULATED SGLang server"
# SGLang's line prefix: [2026-12-01 13:42:46] or, with SGLANG_LOG_MS, [2026-12-01 13:42:46.123], and a rank label
# such as " TP1" or " DP0 TP0 EP0" for the scheduler processes.
_PREFIX = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?((?: [A-Za-z_]+\d+)*)\] ")
_OTHER_RANK = re.compile(r"[A-Za-z_]+[1-9]\d*")
_ELAPSED = re.compile(r"elapsed=(\d{1,9}(?:\.\d{1,9})?) ?s")  # no more digits: 400 of them make float() inf
READY_LINE = "The server is fired up and ready to roll!"
FREEZE_LINE = "Freezing GC in Tokenizer Manager process"  # sglang/srt/utils/common.py freeze_gc()
_WEIGHTS_END = re.compile(r"^Load weight end\.")
_GRAPH_END = re.compile(r"^Capture .+ graph end\.", re.I)
# (milestone, pattern), in the order of a start: the first line that matches, but for LAST the last one before the
# ready line (a speculative draft model loads and captures its graphs after the target model).
MILESTONES = (
    ("server_args", re.compile(r"^server_args=")),
    ("first_model_line", re.compile(r"^(?:Init torch distributed begin\.|Init parallel begin\.|Load weight begin\.)")),
    ("weights_begin", re.compile(r"^Load weight begin\.")),
    ("weights_loaded", _WEIGHTS_END),
    ("kv_cache_allocated", re.compile(r"^(?:[\w-]+ )*Cache is allocated\.")),
    ("cuda_graphs_begin", re.compile(r"^Capture .+ graph begin\.", re.I)),
    ("cuda_graphs_captured", _GRAPH_END),
    ("http_up", re.compile(r"^(?:INFO: +)?Application startup complete\.")),
    ("ready", re.compile("^" + re.escape(READY_LINE))),
)
LAST = ("weights_loaded", "cuda_graphs_captured")
_JIT = re.compile(
    r"^(?:Try DeepGEMM JIT Compiling for |Entering DeepGEMM JIT Pre-Compile session|Triton kernel '.*' took )"
)
JIT_LINES = 20  # JIT lines kept in the report
# SGLang's own warnings that the output may be wrong (e.g. "DeepGemm is enabled but the scale_fmt of checkpoint is
# not ue8m0. This might cause accuracy degradation on Blackwell."), any rank: the quality gate shows them.
ACCURACY = re.compile(r"accuracy|precision loss|incorrect (?:results|output)|wrong (?:results|output)", re.I)
ACCURACY_LINES = 10
LINE_CHARS = 200


def log_entries(text: str) -> list:
    """(None, line) pairs of a log's text: times then come from SGLang's own line prefix."""
    return [(None, line) for line in text.splitlines()]


def _prefix_time(m: re.Match, before: float | None) -> float | None:
    """The time of a record's prefix; `before` (the record before it, None for none) when it is no date."""
    try:
        return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + float(m.group(2) or 0)
    except (ValueError, OverflowError):  # 2026-13-45, or year 1 in a zone east of UTC
        return before


def _records(entries):
    """(time, rank-0, message) of every SGLang log record in (time or None, journal line) pairs. A line may hold
    several records (tqdm's carriage returns run a progress bar into the next record). A prefix that is no date
    takes the time of the record before it; without one, the record is left out."""
    when = None
    for stamp, line in entries:
        for part in line.split("\r"):
            found = list(_PREFIX.finditer(part))
            for i, m in enumerate(found):
                end = found[i + 1].start() if i + 1 < len(found) else len(part)
                when = stamp if stamp is not None else _prefix_time(m, when)
                if when is None:
                    continue
                rank0 = not _OTHER_RANK.search(m.group(3))
                yield when, rank0, part[m.end() : end].strip()


def parse(entries, started: float | None = None, ready_at: float | None = None) -> dict:
    """The start of one SGLang process from its log: (time or None, line) pairs in order (log_entries(), or the
    journal's with times on one clock). ``started``: the process start on that clock (else times count from the first
    log record); ``ready_at``: when /health answered 200 on that clock, used when the log has no ready line.

    Returns {"milestones": {name: seconds}, "phases": {name: seconds}, "jit_builds": {"count", "lines"},
    "emulated": bool, "clock": "journal" or "log", "summary": one line}."""
    entries = list(entries)
    emulated = any(EMULATOR_BANNER in line for _unused, line in entries)
    origin, at, weights, graphs, jit = _scan(entries, started)
    warned = dict.fromkeys(
        _PREFIX.sub("", t)[:LINE_CHARS] for _w, t in entries if isinstance(t, str) and ACCURACY.search(t)
    )
    if "ready" not in at and ready_at is not None:
        at["ready"] = ready_at
    report: dict = {
        "clock": "journal" if started is not None else "log",
        "emulated": emulated,
        "milestones": {},
        "phases": {},
        "jit_builds": {
            "count": len(jit),
            "lines": [{"at_s": _since(origin, w), "line": t[:LINE_CHARS]} for w, t in jit[:JIT_LINES]],
        },
        "accuracy_warnings": list(warned)[:ACCURACY_LINES],
    }
    if origin is None:
        report["summary"] = "no SGLang log lines"
        return report
    if started is not None:
        report["milestones"]["process_start"] = 0.0
    for name, _unused in MILESTONES:
        if name in at:
            report["milestones"][name] = _since(origin, at[name])
    report["phases"] = _phases(report["milestones"], weights, graphs)
    report["summary"] = summary(report)
    return report


def _scan(entries: list, origin: float | None) -> tuple:
    """Rank 0's records up to the ready line: (origin: ``origin`` or the first record's time, milestone -> time,
    the weights' and the CUDA graphs' elapsed seconds as SGLang logs them, the JIT builds as (time, line))."""
    at: dict = {}
    weights, graphs, jit = [], [], []
    for when, rank0, text in _records(entries):
        if origin is None:
            origin = when
        if not rank0:
            continue
        for name, pattern in MILESTONES:
            if pattern.search(text) and (name not in at or name in LAST):
                at[name] = when
        elapsed = _ELAPSED.search(text)
        if elapsed and _WEIGHTS_END.search(text):
            weights.append(float(elapsed.group(1)))
        elif elapsed and _GRAPH_END.search(text):
            graphs.append(float(elapsed.group(1)))
        if _JIT.search(text):
            jit.append((when, text))
        if "ready" in at:
            break
    return origin, at, weights, graphs, jit


def _since(origin: float, when: float) -> float:
    return round(max(0.0, when - origin), 3)


def _span(m: dict, first: str, last: str) -> float | None:
    if first in m and last in m:
        return round(max(0.0, m[last] - m[first]), 3)
    return None


def _phases(m: dict, weights: list, graphs: list) -> dict:
    """Seconds per phase: SGLang's own elapsed figures where it logs them (summed over the target and a draft
    model), else the span between milestones; `other` is what the named phases leave of the total."""
    phases = {
        "imports": _span(m, "process_start", "first_model_line"),
        "weights": round(sum(weights), 3) if weights else _span(m, "weights_begin", "weights_loaded"),
        "kv_cache": _span(m, "weights_loaded", "kv_cache_allocated"),
        "cuda_graphs": round(sum(graphs), 3) if graphs else _span(m, "cuda_graphs_begin", "cuda_graphs_captured"),
        "warmup": _span(m, "http_up", "ready"),
        "total": m.get("ready"),
    }
    phases = {k: v for k, v in phases.items() if v is not None}
    if "total" in phases:
        named = sum(v for k, v in phases.items() if k != "total")
        phases["other"] = round(max(0.0, phases["total"] - named), 3)
    return phases


PHASE_WORDS = (
    ("imports", "imports"),
    ("weights", "weights"),
    ("kv_cache", "KV cache"),
    ("cuda_graphs", "CUDA graphs"),
    ("warmup", "warm-up"),
    ("other", "other"),
)


def summary(report: dict) -> str:
    """One line: the time to ready and its phases, marked when the server is the lab's emulator."""
    phases = report.get("phases") or {}
    since = "its start" if report.get("clock") == "journal" else "its first log line"
    head = f"ready {phases['total']:.1f} s after {since}" if "total" in phases else "not ready in the log"
    parts = [f"{words} {phases[key]:.1f} s" for key, words in PHASE_WORDS if key in phases]
    jit = (report.get("jit_builds") or {}).get("count")
    if jit:
        parts.append(f"{jit} JIT build lines")
    line = head + (": " + ", ".join(parts) if parts else "")
    return line + (" (EMULATED server: synthetic timing)" if report.get("emulated") else "")


# --------------------------------------------------------------------------------------------------
# The journal of a systemd unit (what the sglang_ready module reads)

UNIT_START = ("InvocationID", "ExecMainStartTimestampMonotonic")
# Journal entries read at most: a start is at its beginning, a server that has run for days has millions after it.
MAX_ENTRIES = 50000
JOURNAL_TIMEOUT_S = 15.0


def unit_report(unit: str, ready_at: float | None = None) -> dict:
    """read_journal(), or {"error": why} when systemd or the journal cannot say (the wait's verdict stands)."""
    try:
        return read_journal(unit, ready_at)
    except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as exc:
        # A report, never a verdict: a log line it cannot read must not fail a server that is ready.
        return {"error": f"where the start of {unit} went is unknown: {exc}"}


def read_journal(unit: str, ready_at: float | None = None) -> dict:
    """parse() of the start of the unit's current process, from its journal read up to SGLang's ready line. Times
    are CLOCK_MONOTONIC, which time.monotonic() reads on Linux (``ready_at``)."""
    invocation, started = run_unit_start(unit)
    return parse(run_journal(invocation), started=started, ready_at=ready_at)


def run_unit_start(unit: str, timeout: float = JOURNAL_TIMEOUT_S) -> tuple:
    """(invocation id, start of the main process in CLOCK_MONOTONIC seconds) from `systemctl show`."""
    show = subprocess.run(
        ["systemctl", "show", "-p", ",".join(UNIT_START), unit],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    props = dict(line.partition("=")[::2] for line in show.stdout.splitlines())
    invocation, start_us = props.get("InvocationID", ""), props.get("ExecMainStartTimestampMonotonic", "")
    if not re.fullmatch(r"[0-9a-f]{32}", invocation) or not start_us.isdigit() or int(start_us) == 0:
        raise RuntimeError(f"systemd shows no running process of {unit}: {show.stderr.strip() or props}")
    return invocation, int(start_us) / 1e6


def run_journal(invocation: str, timeout: float = JOURNAL_TIMEOUT_S) -> list:
    """journal_entries() of one invocation of a unit (`journalctl _SYSTEMD_INVOCATION_ID=... -o json`)."""
    argv = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "json", "--output-fields=MESSAGE", "--no-pager"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            entries = journal_entries(proc.stdout)
        finally:
            timer.cancel()
            proc.kill()
            error = proc.stderr.read().strip()
    if not entries and error:
        raise RuntimeError(f"journalctl failed: {error}")
    return entries


def froze_gc(unit: str, timeout: float = JOURNAL_TIMEOUT_S) -> bool:
    """Whether the unit's running process logged SGLang's GC freeze (readiness.freeze_gc once per process)."""
    invocation = run_unit_start(unit, timeout)[0]
    argv = ["journalctl", f"_SYSTEMD_INVOCATION_ID={invocation}", "-o", "cat", "--no-pager", "--grep", FREEZE_LINE]
    found = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return FREEZE_LINE in found.stdout


def journal_entries(lines) -> list:
    """(monotonic seconds, message) of `journalctl -o json` lines, up to SGLang's ready line (or MAX_ENTRIES); a
    MESSAGE journald kept as bytes (control characters such as tqdm's carriage returns) is decoded."""
    out = []
    for raw in lines:
        try:
            entry = json.loads(raw)
            stamp = int(entry["__MONOTONIC_TIMESTAMP"]) / 1e6
        except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: a stamp of 400 digits
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, list):
            message = bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        if not isinstance(message, str):
            continue
        out.append((stamp, message))
        if READY_LINE in message or len(out) >= MAX_ENTRIES:
            break
    return out


# --------------------------------------------------------------------------------------------------
# The server's environment for a fast start: JIT and compile caches that outlive a restart, and the tools they call

# Cache folders SGLang's stack fills on a cold start (variable -> folder under the stack's cache folder). Each name is
# read where the cache is chosen: sglang/srt/environ.py (SGLANG_CACHE_DIR, default ~/.cache/sglang, in 0.5.16 and
# 0.5.23; SGLANG_DG_CACHE_DIR, which srt/layers/deep_gemm_wrapper/compile_utils.py copies to DeepGEMM's
# DG_JIT_CACHE_DIR), sglang/kernels/jit/utils/compile/cache.py (SGLANG_JIT_CACHE_DIR, 0.5.23, default
# ~/.cache/sglang/jit), flashinfer/jit/env.py (FLASHINFER_WORKSPACE_BASE: FlashInfer appends .cache/flashinfer),
# triton/knobs.py (TRITON_CACHE_DIR, default ~/.triton/cache), torch/_inductor/runtime/cache_dir_utils.py
# (TORCHINDUCTOR_CACHE_DIR, default /tmp/torchinductor_<user>, which the unit's PrivateTmp empties at every start),
# tvm_ffi/cpp/extension.py (TVM_FFI_CACHE_DIR, default ~/.cache/tvm-ffi), the CUDA driver's PTX cache
# (CUDA_CACHE_PATH, default ~/.nv/ComputeCache), and XDG_CACHE_HOME for what else caches under ~/.cache (torch
# extensions).
CACHE_ENV = {
    "SGLANG_CACHE_DIR": "sglang",
    "SGLANG_JIT_CACHE_DIR": "sglang/jit",
    "SGLANG_DG_CACHE_DIR": "deep_gemm",
    "FLASHINFER_WORKSPACE_BASE": "",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TVM_FFI_CACHE_DIR": "tvm-ffi",
    "CUDA_CACHE_PATH": "nv",
    "XDG_CACHE_HOME": "xdg",
}
# systemd's own PATH for units, after the venv: nothing SGLang or its libraries run by name goes missing.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
NO_STACK = "no-stack"


def cache_dir(root: str, stack: dict | None) -> str:
    """The cache folder of the stack a host runs: ``root``/<the stack's venv folder name> (its local fact
    sglang_stack), ``root``/no-stack on a host without one (the lab). A stack switch gets a folder of its own."""
    venv = (stack or {}).get("venv") or ""
    name = posixpath.basename(str(venv).rstrip("/")) or NO_STACK
    if name in (".", "..") or not re.fullmatch(r"[A-Za-z0-9_.+-]+", name):
        raise ValueError(f"the stack's venv folder name {name!r} cannot name a cache folder: re-run the stack role")
    return posixpath.join(root, name)


def run_env(cache: str, home: str, venv_bin: str, cuda: dict | None = None) -> dict:
    """The variables the role gives every server: the caches under ``cache``, Hugging Face's folder kept in the
    account's ``home`` (XDG_CACHE_HOME would move downloads into the stack's folder), PATH with the stack venv's
    bin/ (FlashInfer's JIT runs `ninja` from there: without it a start dies at graph capture) after the CUDA
    toolkit's, and CUDA_HOME and LD_LIBRARY_PATH from the cuda role's local fact ``cuda`` where there is one."""
    env = {name: posixpath.join(cache, sub) if sub else cache for name, sub in CACHE_ENV.items()}
    env["HF_HOME"] = posixpath.join(home, ".cache", "huggingface")
    cuda = cuda or {}
    env["PATH"] = ":".join([*cuda.get("path", []), venv_bin, *SYSTEM_PATH])
    if cuda:
        env["CUDA_HOME"] = cuda["cuda_home"]
        env["LD_LIBRARY_PATH"] = ":".join(cuda.get("ld_library_path", []))
    return env
