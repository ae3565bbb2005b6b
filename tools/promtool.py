#!/usr/bin/env python3
"""Find promtool for the rule tests (tests/test_monitor_promtool.py), unpacked from the distribution's package, and
the Prometheus server of the same package for the alert test (tests/test_monitor_alerts.py).

``apt-get install prometheus`` would start a Prometheus service, so the package is only downloaded
(``apt-get download prometheus``: Debian 12 has 2.42) and unpacked with ``dpkg-deb -x`` into a cache folder
(/var/cache/sglang-deploy/promtool, or ~/.cache/sglang-deploy/promtool where that is not writable). Prints the
path of ``promtool``. ``SGLANG_DEPLOY_PROMTOOL`` names a promtool to use instead; ``SGLANG_DEPLOY_PROMETHEUS`` a
prometheus.

Stdlib only.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

CACHES = (Path("/var/cache/sglang-deploy/promtool"), Path.home() / ".cache" / "sglang-deploy" / "promtool")
BINARY = Path("usr/bin/promtool")
SERVER = Path("usr/bin/prometheus")


class Unavailable(RuntimeError):
    """No apt on this machine: promtool cannot be fetched from the distribution."""


def _cache() -> Path:
    for folder in CACHES:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    raise RuntimeError(f"none of {', '.join(map(str, CACHES))} is writable: set SGLANG_DEPLOY_PROMTOOL")


def promtool() -> Path:
    """The path of promtool, downloaded and unpacked on first use."""
    given = os.environ.get("SGLANG_DEPLOY_PROMTOOL")
    return Path(given) if given else _unpacked() / BINARY


def prometheus() -> Path:
    """The path of the Prometheus server, from the same package as promtool."""
    given = os.environ.get("SGLANG_DEPLOY_PROMETHEUS")
    return Path(given) if given else _unpacked() / SERVER


def _unpacked() -> Path:
    """The root the package is unpacked into, downloaded and unpacked on first use."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise Unavailable("apt-get and dpkg-deb are needed to fetch promtool (Debian's prometheus package)")
    cache = _cache()
    with open(cache / ".lock", "w") as lock:  # two test runs unpack once
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = cache / "root"
        if (root / BINARY).is_file():
            return root
        for old in cache.glob("prometheus_*.deb"):
            old.unlink()
        done = subprocess.run(["apt-get", "download", "prometheus"], cwd=cache, capture_output=True, text=True)
        debs = sorted(cache.glob("prometheus_*.deb"))
        if done.returncode or not debs:
            raise RuntimeError(
                f"apt-get download prometheus failed ({done.stderr.strip()[-300:]}): run apt-get update, or set "
                "SGLANG_DEPLOY_PROMTOOL to a promtool"
            )
        staging = cache / "root.partial"
        shutil.rmtree(staging, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(staging)], check=True)
        shutil.rmtree(cache / "root", ignore_errors=True)
        staging.rename(root)
        debs[-1].unlink()
        return root


if __name__ == "__main__":
    print(promtool())
    sys.exit(0)
