"""Whether a running service process predates its configuration files (stdlib only; runs on hosts).

A restart notified by a changed unit or environment file is lost when the play fails before the handler runs
(or the handler itself fails): the next run finds the files unchanged and notifies nothing. Comparing the main
process's start time with the files' modification times finds such a server still running the old launch.
"""

from __future__ import annotations

import os
import time


def process_start(pid: int, proc: str = "/proc") -> float:
    """Start time of ``pid`` as a Unix timestamp, to the clock tick (proc(5): /proc/PID/stat field 22, starttime,
    in ticks since boot; /proc/uptime gives the boot time against the wall clock)."""
    with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces and ')'
    with open(f"{proc}/uptime", encoding="ascii") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def newer_files(started: float, paths: list[str]) -> list[str]:
    """The files among ``paths`` modified after ``started`` (absent files, or one gone while read, are ignored)."""
    newer = []
    for path in paths:
        try:
            if os.stat(path).st_mtime > started:
                newer.append(path)
        except OSError:
            continue
    return newer
