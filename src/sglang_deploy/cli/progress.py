"""Live progress of playbook runs on stderr: an api `on_event` handler with a tick() heartbeat.

with Progress() as progress:
    result = api.deploy("baseline", on_event=progress)
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Callable

from sglang_deploy.api import PHASE_EVENT, failure_message
from sglang_deploy.cli.shown import shown


# Results that say a task ran on a host (an include that ran its file included); a task skipped on every host
# (its `when` false: "Roll back to the last good profile" of a deploy that passed) sends none of them.
RAN = ("runner_on_ok", "runner_on_async_ok", "playbook_on_include")


class Progress:
    """On a terminal one status line (phase, host, task, elapsed) is redrawn every second. Elsewhere one line per
    task that ran, printed when its first host is done with it (a task skipped on every host is not listed), and a
    heartbeat line every `heartbeat_s` while a task runs (the model load wait takes minutes). Failures and phases
    are always printed on lines of their own. Leaving the `with` block clears the line.
    """

    def __init__(
        self,
        stream=None,
        tty: bool | None = None,
        heartbeat_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = stream or sys.stderr
        # The line's own control sequences bypass main()'s Shown wrapper, which shows any other as an escape.
        self.terminal = getattr(self.stream, "terminal", self.stream)
        self.tty = self.stream.isatty() if tty is None else tty
        self.heartbeat_s = heartbeat_s
        self.clock = clock
        self.t0 = clock()
        self.task: str | None = None
        self.listed = False  # the task's line is printed
        self.task_t0 = self.t0
        self.host: str | None = None
        self.last_out = self.t0
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self._clear()

    def _elapsed(self, since: float | None = None) -> str:
        s = int(self.clock() - (self.t0 if since is None else since))
        return f"{s // 60}:{s % 60:02d}"

    def _print(self, text: str) -> None:
        self._clear()
        print(f"[{self._elapsed()}] {text}", file=self.stream, flush=True)
        self.last_out = self.clock()

    def _clear(self) -> None:
        if self._drawn:
            self.terminal.write("\r\x1b[K")
            self._drawn = False

    def _draw(self) -> None:
        if not self.task:
            return
        width = shutil.get_terminal_size((100, 20)).columns
        line = shown(f"[{self._elapsed()}] {self.host or '...'} | {self.task} ({self._elapsed(self.task_t0)})")
        self.terminal.write("\r\x1b[K" + line[: width - 1])
        self.terminal.flush()
        self._drawn = True
        self.last_out = self.clock()

    def __call__(self, ev: dict) -> bool:
        kind = ev.get("event")
        d = ev.get("event_data") or {}
        if kind == PHASE_EVENT:
            self._print(f"== {d.get('phase')}")
        elif kind == "playbook_on_play_start":
            self.task = None
        elif kind == "playbook_on_task_start":
            self.task, self.task_t0, self.host = d.get("task") or d.get("name"), self.clock(), None
            self.listed = False
        elif kind == "runner_on_start":
            self.host = d.get("host")
        elif kind in RAN and not self.tty and self.task and not self.listed:
            self.listed = True
            self._print(f"TASK {self.task}")
        elif kind == "runner_on_failed" and not d.get("ignore_errors"):
            msg = failure_message(d.get("res") or {}).splitlines()[0][:300]
            self._print(f"FAILED {d.get('host')}: {d.get('task')}: {msg}")
        elif kind == "runner_on_unreachable":
            self._print(f"UNREACHABLE {d.get('host')}: {failure_message(d.get('res') or {})[:300]}")
        elif kind == "playbook_on_stats":
            self.task = None
            self._clear()
        if self.tty:
            self._draw()
        return True

    def tick(self) -> None:
        now = self.clock()
        if self.tty:
            if now - self.last_out >= 1.0:
                self._draw()
        elif self.task and now - self.last_out >= self.heartbeat_s:
            self._print(f"... {self.host or 'hosts'}: still running '{self.task}' ({self._elapsed(self.task_t0)})")
