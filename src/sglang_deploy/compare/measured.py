"""Which benchmark result the controller already keeps for a deploy: a re-run that changes nothing (the server did
not restart, its profile, launch, unit and stack are the ones measured) skips the benchmark (filter
sglang_benchmark_measured; issue 52). A result file came from a host: only its identity is read, bounded."""

from __future__ import annotations

import json
from pathlib import Path

from sglang_deploy.paths import read_bounded

NEWEST = 50  # result files of a host looked at, newest first
MAX_BYTES = 16 << 20


def measured(results_dir: str, host: str, profile: str, identity: str) -> str:
    """The newest result of ``profile`` under results_dir/host whose deployed identity is ``identity``; '' when
    none (or no identity: nothing is skipped on a guess)."""
    folder = Path(results_dir) / host
    if not identity or not folder.is_dir() or folder.is_symlink():
        return ""
    files = [
        p
        for p in folder.glob(f"*-{profile}.json")
        if p.name.split("-", 1)[1] == f"{profile}.json" and p.is_file() and not p.is_symlink()  # <stamp>-<profile>
    ]
    for path in sorted(files, key=lambda p: p.name, reverse=True)[:NEWEST]:
        if _identity(path) == identity:
            return str(path)
    return ""


def _identity(path: Path) -> str | None:
    try:
        result = json.loads(read_bounded(path, MAX_BYTES, "a benchmark result"))
    except (OSError, ValueError, RecursionError):
        return None
    context = result.get("context") if isinstance(result, dict) else None
    deployed = context.get("deployed") if isinstance(context, dict) else None
    found = deployed.get("identity") if isinstance(deployed, dict) else None
    return found if isinstance(found, str) else None
