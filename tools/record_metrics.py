#!/usr/bin/env python3
"""Record the Prometheus metrics each SGLang release exposes (src/sglang_deploy/data/metrics-<version>.json).

For every release with a recorded flag list (data/flags-<version>.json), or the ``--version`` given:

    python3 tools/record_metrics.py                      # every release with a flag list
    python3 tools/record_metrics.py --version 0.5.23     # one release

The release's wheel comes from PyPI (``pip download sglang==<v> --no-deps`` into ``--wheels``, /var/tmp by
default) and its ``sglang/srt/**/*.py`` is read with ``ast``, never imported: every prometheus_client
``Gauge``/``Counter``/``Histogram``/``Summary`` constructor (and SGLang's ``GaugeHistogram`` wrapper, a gauge with
``gt``/``le`` labels) with a literal ``name=`` is one metric family. The file records the family's type, its literal
labels, whether it also takes the collector's own labels (``labels.keys()``: model_name, tp_rank, ... set at run
time) and the sample names Prometheus scrapes, as prometheus_client's multiprocess registry writes them (a counter
``x`` or ``x_total`` as ``x_total``; a histogram as ``x_bucket``, ``x_sum``, ``x_count``; a summary as ``x_sum``,
``x_count``). Names that are not literals (an f-string) are listed under ``unresolved``.

``--router`` records the smg router (the release roles/sglang_router pins) as data/metrics-smg-<version>.json: smg
is Rust, so its families come from smg's metrics reference (SMG_METRICS below) and each name is checked against
the bytes of that release's ``smg_rs.abi3.so`` (a name missing there is an error).

Stdlib only (pip is run as ``python -m pip``).
"""

from __future__ import annotations

import argparse
import warnings
import ast
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "src" / "sglang_deploy" / "data"
CONSTRUCTORS = {"Gauge": "gauge", "Counter": "counter", "Histogram": "histogram", "Summary": "summary"}
# SGLang's own wrapper (sglang/srt/utils/gauge_histogram.py): one gauge with the bucket bounds as labels.
WRAPPERS = {"GaugeHistogram": ("gauge", ["gt", "le"])}
SUFFIXES = {
    "gauge": [""],
    "counter": ["_total"],
    "histogram": ["_bucket", "_sum", "_count"],
    "summary": ["_sum", "_count"],
}
SOURCE = "sglang/srt/**/*.py prometheus_client constructors (ast)"

# smg's families the rules and dashboard may use: name -> (type, labels), from smg's docs/reference/metrics.md.
SMG_METRICS = {
    "smg_worker_health": ("gauge", ["worker"]),
    "smg_worker_cb_state": ("gauge", ["worker"]),
    "smg_worker_requests_active": ("gauge", ["worker"]),
    "smg_worker_health_checks_total": ("counter", ["worker_type", "result"]),
    "smg_http_requests_total": ("counter", ["method", "path"]),
    "smg_http_responses_total": ("counter", ["status_code", "error_code"]),
    "smg_http_request_duration_seconds": ("histogram", ["method", "path"]),
}
SMG_SOURCE = "smg docs/reference/metrics.md (types, labels); each name found in smg_rs.abi3.so"


def family(name: str, kind: str) -> str:
    """The family name prometheus_client keeps: a counter's ``_total`` is its sample suffix, not its name."""
    return name[: -len("_total")] if kind == "counter" and name.endswith("_total") else name


def series(name: str, kind: str) -> list[str]:
    return [family(name, kind) + s for s in SUFFIXES[kind]]


def _labels(node: ast.AST | None) -> tuple[list[str], bool]:
    """(literal label names, whether the collector's run-time labels are added) of a ``labelnames`` expression."""
    if node is None:
        return [], False
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        literal = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return literal, len(literal) < len(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _labels(node.left), _labels(node.right)
        return left[0] + right[0], left[1] or right[1]
    return [], True  # labels.keys(), list(labels), a variable: the collector's labels


def _constructor(node: ast.Call) -> tuple[str, list[str]] | None:
    """(type, extra labels) when ``node`` builds a metric; collections.Counter(...) has no documentation."""
    func = node.func
    fname = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    kw = {k.arg for k in node.keywords}
    if "documentation" not in kw and len(node.args) < 2:
        return None
    if fname in CONSTRUCTORS:
        return CONSTRUCTORS[fname], []
    return WRAPPERS.get(fname)


def scan(path: str, source: str, metrics: dict, unresolved: list) -> None:
    """Add the metric families ``source`` (one module) constructs to ``metrics``."""
    with warnings.catch_warnings():  # the release's own invalid escapes are not ours to report
        warnings.simplefilter("ignore", SyntaxWarning)
        tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or (found := _constructor(node)) is None:
            continue
        kind, extra = found
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if {"namespace", "subsystem", "unit"} & set(kw):
            raise SystemExit(f"{path}:{node.lineno}: namespace/subsystem/unit are not handled: extend {__file__}")
        name = kw.get("name", node.args[0] if node.args else None)
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            unresolved.append(f"{path}:{node.lineno} {ast.unparse(name) if name else '?'}")
            continue
        labels, collector = _labels(kw.get("labelnames", node.args[2] if len(node.args) > 2 else None))
        fam = family(name.value, kind)
        entry = metrics.setdefault(
            fam, {"type": kind, "labels": [], "collector_labels": False, "series": series(name.value, kind)}
        )
        if entry["type"] != kind:
            raise SystemExit(f"{path}:{node.lineno}: {fam} is a {kind} here and a {entry['type']} elsewhere")
        entry["labels"] = sorted(set(entry["labels"]) | set(labels) | set(extra))
        entry["collector_labels"] = entry["collector_labels"] or collector


def prefix(metrics: dict) -> str:
    """The prefix most of a release's families carry: ``sglang:`` or ``sglang_``."""
    counts = {p: sum(n.startswith(p) for n in metrics) for p in ("sglang:", "sglang_")}
    return max(counts, key=counts.get)


def wheel(package: str, version: str, wheels: Path) -> Path:
    """The release's wheel in ``wheels``, downloaded from the package index when missing."""
    pattern = f"{package}-{version}-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "-d", str(wheels)]
        subprocess.run(cmd, check=True)
        found = sorted(wheels.glob(pattern))
    if not found:
        raise SystemExit(f"pip download left no {pattern} in {wheels}")
    return found[0]


def record_sglang(version: str, wheels: Path) -> dict:
    metrics: dict = {}
    unresolved: list = []
    with zipfile.ZipFile(wheel("sglang", version, wheels)) as zf:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.filename.startswith("sglang/srt/") and info.filename.endswith(".py"):
                scan(info.filename, zf.read(info).decode("utf-8-sig"), metrics, unresolved)
    return {
        "sglang_version": version,
        "source": SOURCE,
        "prefix": prefix(metrics),
        "metrics": dict(sorted(metrics.items())),
        "unresolved": unresolved,
    }


def record_smg(version: str, wheels: Path) -> dict:
    with zipfile.ZipFile(wheel("smg", version, wheels)) as zf:
        blob = b"".join(zf.read(n) for n in zf.namelist() if n.endswith(".so"))
    missing = [n for n in SMG_METRICS if family(n, SMG_METRICS[n][0]).encode() not in blob]
    if missing:
        raise SystemExit(f"smg {version} does not name {', '.join(missing)}: update SMG_METRICS from its docs")
    metrics = {
        family(n, kind): {"type": kind, "labels": labels, "collector_labels": False, "series": series(n, kind)}
        for n, (kind, labels) in SMG_METRICS.items()
    }
    return {"smg_version": version, "source": SMG_SOURCE, "prefix": "smg_", "metrics": dict(sorted(metrics.items()))}


def dump(doc: dict) -> str:
    """JSON with one family per line (readable diffs between releases)."""
    head = {k: v for k, v in doc.items() if k not in ("metrics", "unresolved")}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    items = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc["metrics"].items()]
    tail = f',\n "unresolved": {json.dumps(doc["unresolved"])}' if "unresolved" in doc else ""
    return "\n".join([*lines, ' "metrics": {', ",\n".join(items), " }" + tail, "}"]) + "\n"


def flag_releases() -> list[str]:
    return [p.name[len("flags-") : -len(".json")] for p in sorted(DATA.glob("flags-*.json"))]


def router_version() -> str:
    text = (REPO / "roles" / "sglang_router" / "defaults" / "main.yml").read_text()
    return re.search(r'^sglang_router_version:\s*"?([^"\s]+)', text, re.M).group(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="append", help="an SGLang release (default: every one with a flag list)")
    ap.add_argument("--router", action="store_true", help="record the smg release roles/sglang_router pins")
    ap.add_argument("--wheels", type=Path, default=Path("/var/tmp/sglang-deploy-wheels"), help="wheel cache")
    ap.add_argument("--out", type=Path, default=DATA, help="directory for metrics-<version>.json")
    args = ap.parse_args(argv)
    docs = [record_sglang(v, args.wheels) for v in (args.version or flag_releases())]
    if args.router:
        docs.append(record_smg(router_version(), args.wheels))
    for doc in docs:
        name = doc.get("sglang_version") or f"smg-{doc['smg_version']}"
        target = args.out / f"metrics-{name}.json"
        target.write_text(dump(doc))
        print(f"{target}: {len(doc['metrics'])} families, prefix {doc['prefix']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
