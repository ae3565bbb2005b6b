"""The stall watchdog: a one-token generate with a deadline, run by a systemd timer; N failures in a row restart the
server's unit. A server may answer /health 200 while its scheduler is dead (sgl-project/sglang#6624), and a unit may
be inactive with status 0 after a crash (#32021): both count as failures here.

Each run: read the unit (systemctl show), send POST /generate for one token (the API key read from the server's 0600
environment file, never argv), then decide (decide: pure, tested on a simulated clock) and act:
- a host held by a deploy or a roll (HOLD_PATH, written by the deploy play, younger than hold_max_s) is left alone;
- within grace_s of the unit's start, or of the watchdog's own restart, a failure does not count (a model load);
- the failures-th failure in a row restarts the unit, unless max_restarts restarts happened within window_s: then
  it stops restarting and says so (in the journal and the host record) until the window has room again;
- before a restart, with a router configured, the host leaves the router (watch_router.leave); after the restart,
  each good probe puts it back (with the server's API key) until the router lists it (watch_router.rejoin);
- the reason and the unit's last journal lines (escaped) go into the host record's field ``watchdog``.

    python3 -m sglang_watch.watchdog --config /etc/sglang/watch.json

Stdlib only: it runs with the host's python3 from the folder the sglang_watch role copies the host modules to.
"""

# A program the roles run on hosts: print and exit are its interface.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from . import host_record, watch_router
from .readiness import run_systemctl_show
from .server_http import Endpoint, probe_rid, request

# The marker a deploy or a roll writes while it holds the host (playbooks/deploy.yml, the sglang_watch role's
# hold.yml) and removes after; one older than hold_max_s is a deploy that died, and no longer holds.
HOLD_PATH = "/run/sglang-deploy.hold"
UNIT_PROPERTIES = ("ActiveState", "SubState", "ExecMainStatus", "ExecMainStartTimestampMonotonic", "LoadState")
JOURNAL_LINES = 50
# SGLang's request log (--log-requests, or a traffic capture's level 3): a request's prompt and output. The journal
# keeps them from other users; the host record is 0644 and reaches the controller, so the excerpt leaves them out.
REQUEST_LOG = re.compile(r'"event": ?"request\.|\b(?:Receive|Finish): obj=')
MAX_RESTARTS_KEPT = 100  # restart times the state keeps (the window needs at most max_restarts of them)
SERVICE_RE = host_record.SERVICE_RE


class WatchError(ValueError):
    """A setting or a state file that cannot be used; the message names it and the fix."""


# setting -> (type, default, lowest allowed); a setting without a default is required.
SETTINGS = {
    "service": (str, None, None),
    "url": (str, "http://127.0.0.1:30000", None),
    "env_file": (str, "", None),
    "failures": (int, 3, 1),
    "deadline_s": (float, 30.0, 1.0),
    "max_restarts": (int, 3, 1),
    "window_s": (float, 3600.0, 60.0),
    "grace_s": (float, 1800.0, 0.0),
    "hold_path": (str, HOLD_PATH, None),
    "hold_max_s": (float, 7200.0, 60.0),
    "state_path": (str, "/var/lib/sglang-watch/state.json", None),
    "record_path": (str, host_record.PATH, None),
    "router_url": (str, "", None),
    "router_key": (str, "", None),
    "worker_id": (str, "", None),
    "worker_url": (str, "", None),
    "drain_timeout_s": (float, 60.0, 0.0),
    "stop_timeout_s": (float, 30.0, 1.0),
}


@dataclass(frozen=True)
class Settings:
    service: str
    url: str
    env_file: str
    failures: int
    deadline_s: float
    max_restarts: int
    window_s: float
    grace_s: float
    hold_path: str
    hold_max_s: float
    state_path: str
    record_path: str
    router_url: str
    router_key: str
    worker_id: str
    worker_url: str
    drain_timeout_s: float
    stop_timeout_s: float

    @classmethod
    def parse(cls, raw: object) -> "Settings":
        """The settings of a config mapping; WatchError naming the setting and the fix."""
        if not isinstance(raw, dict):
            raise WatchError("the config is not a JSON object: rewrite it with the sglang_watch role")
        unknown = sorted(set(raw) - set(SETTINGS))
        if unknown:
            raise WatchError(f"unknown setting {unknown[0]!r}: remove it (known: {', '.join(SETTINGS)})")
        values = {}
        for name, (kind, default, lowest) in SETTINGS.items():
            value = raw.get(name, default)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if value is None or not isinstance(value, kind) or isinstance(value, bool):
                raise WatchError(f"setting {name!r} is {value!r}, not a {kind.__name__}: set it in the config")
            if lowest is not None and value < lowest:
                raise WatchError(f"setting {name!r} is {value}, below {lowest}: raise it")
            values[name] = value
        if not SERVICE_RE.match(values["service"]):
            raise WatchError(f"setting 'service' is {values['service']!r}, not a systemd service name")
        Endpoint.parse(values["url"])  # ValueError naming the fix
        if values["router_url"] and not values["worker_id"]:
            raise WatchError("setting 'router_url' needs 'worker_id' (the host's id in the router's worker list)")
        return cls(**values)


# --------------------------------------------------------------------------------------------------
# The decision (pure: what the run saw, the state, the time -> the new state and what to do)


@dataclass(frozen=True)
class Seen:
    """What one run saw: whether the host is held, the unit's start (seconds ago, None when it runs no process, and
    systemd's stamp of it), whether the probe answered and why not."""

    held: bool
    started_ago: float | None
    ok: bool
    reason: str = ""
    start_id: str = ""


# Actions: none (healthy), held, starting (a failure within the grace), failing (counted, not yet N),
# restart, rate_limited (N reached, restarts spent); act makes a restart whose systemctl failed restart_failed.
def decide(state: dict, seen: Seen, settings: Settings, now: float) -> tuple[dict, str]:
    """The state after this run and its action. ``now`` is the wall clock in seconds (restart times outlive boots)."""
    restarts = [t for t in state.get("restarts", []) if now - t < settings.window_s]
    new = {**state, "restarts": restarts}
    if seen.held:
        return {**new, "failures": 0}, "held"
    if seen.ok:
        return {**new, "failures": 0, "rate_limited": None, "answered_at": now, "answered_start": seen.start_id}, "none"
    if _starting(state, seen, settings, now):
        return {**new, "failures": 0}, "starting"
    failures = state.get("failures", 0) + 1
    new = {**new, "failures": failures, "reason": seen.reason}
    if failures < settings.failures:
        return new, "failing"
    if len(restarts) >= settings.max_restarts:
        limited = (
            f"{len(restarts)} restarts within {settings.window_s:g} s (max_restarts {settings.max_restarts}): not "
            "restarting again; find the cause in the journal, then restart the unit yourself"
        )
        return {**new, "rate_limited": limited}, "rate_limited"
    return {**new, "failures": 0, "restarts": [*restarts, now][-MAX_RESTARTS_KEPT:], "rate_limited": None}, "restart"


def _starting(state: dict, seen: Seen, settings: Settings, now: float) -> bool:
    """Whether a failure falls in a start's grace: the unit started less than grace_s ago and has not answered since,
    or the watchdog restarted it less than grace_s ago and it has not answered since (the stop may still run)."""
    fresh = seen.started_ago is not None and seen.started_ago < settings.grace_s
    if fresh and state.get("answered_start") != seen.start_id:
        return True
    last_restart = max(state.get("restarts", []), default=None)
    return (
        last_restart is not None
        and now - last_restart < settings.grace_s
        and state.get("answered_at", 0) < last_restart
    )


# --------------------------------------------------------------------------------------------------
# What a run sees


def unit_problem(state: dict, service: str) -> str | None:
    """Why the unit runs no server, None when it does (active or activating). Inactive after an exit with status 0
    is a failure too: the unit should be running."""
    active = state.get("ActiveState", "")
    if state.get("LoadState") == "not-found":
        return f"unit {service} not found"
    if active in ("active", "activating", "reloading"):
        return None
    return f"unit {service} is {active or 'unknown'} ({state.get('SubState', '')}, exit status {state.get('ExecMainStatus')})"


def started_ago(state: dict, monotonic: float) -> float | None:
    """Seconds since the unit's main process started (systemd's CLOCK_MONOTONIC microseconds), None when none."""
    try:
        start = int(state.get("ExecMainStartTimestampMonotonic", "0"))
    except ValueError:
        return None
    return monotonic - start / 1e6 if start > 0 else None


def held(path: str, max_age_s: float, now: float) -> bool:
    """Whether a deploy or a roll holds the host: the marker exists and is younger than ``max_age_s``."""
    try:
        return now - os.stat(path).st_mtime < max_age_s
    except OSError:
        return False


ENV_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z")


def env_value(path: str, name: str) -> str:
    """``name``'s value in a systemd EnvironmentFile ('' when absent), unquoted as the sglang_server role writes it
    (NAME="value", with \\", \\\\, \\` and \\$ escaped)."""
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            match = ENV_LINE.match(line.rstrip("\n"))
            if match and match.group(1) == name:
                value = match.group(2).strip()
                if len(value) >= 2 and value[0] == value[-1] == '"':
                    return re.sub(r"\\(.)", r"\1", value[1:-1])
                return value
    return ""


def probe(url: str, api_key: str, deadline_s: float) -> str | None:
    """POST /generate for one token, greedy: None when it answered 200 within the deadline, else why not."""
    body = {"text": "ping", "sampling_params": {"max_new_tokens": 1, "temperature": 0}, "rid": probe_rid()}
    try:
        resp = request(Endpoint.parse(url), "POST", "/generate", body, api_key or None, deadline_s, 1 << 20)
    except TimeoutError:
        return f"no token from POST /generate within {deadline_s:g} s"
    except OSError as exc:
        return f"POST /generate failed: {type(exc).__name__}: {str(exc)[:200]}"
    if resp.status != 200 or resp.json() is None:
        return f"POST /generate answered HTTP {resp.status}"
    return None


def look(settings: Settings, api_key: str, now: float, monotonic: float) -> Seen:
    if held(settings.hold_path, settings.hold_max_s, now):
        return Seen(True, None, False, "held by a deploy")
    state = run_systemctl_show(settings.service, UNIT_PROPERTIES)
    problem = unit_problem(state, settings.service)
    ago = None if problem else started_ago(state, monotonic)
    problem = problem or probe(settings.url, api_key, settings.deadline_s)
    return Seen(False, ago, problem is None, problem or "", state.get("ExecMainStartTimestampMonotonic", ""))


# --------------------------------------------------------------------------------------------------
# What a run does


def journal(service: str, lines: int = JOURNAL_LINES) -> list[str]:
    """The unit's last ``lines`` journal lines (bounded in count; host_record escapes and cuts them), request log
    lines left out."""
    try:
        proc = subprocess.run(
            ["journalctl", "-u", service, "-n", str(lines), "--no-pager", "-o", "short-iso"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"(journalctl failed: {exc})"]
    found = [
        "(a request log line: left out)" if REQUEST_LOG.search(line) else line
        for line in proc.stdout.splitlines()[-lines:]
    ]
    return found or [f"(journalctl: {proc.stderr.strip()[:200]})"]


def systemctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=timeout, check=False)


def restart(service: str, stop_timeout_s: float) -> tuple[bool, str | None]:
    """Stop the unit (SIGTERM: the server drains), kill it where the stop takes longer than ``stop_timeout_s`` (a
    stalled server's drain never ends: its requests never finish, and the unit would wait TimeoutStopSec), clear its
    start limit and queue its start. (killed, the error or None); a unit that does not stop even when killed is not
    started (the error says so)."""
    killed = False
    try:
        systemctl("stop", service, timeout=stop_timeout_s)
    except subprocess.TimeoutExpired:
        killed = True
        try:
            systemctl("kill", "--signal=SIGKILL", service)
            systemctl("stop", service)  # returns once the stop job has ended
        except subprocess.TimeoutExpired as exc:
            return (
                killed,
                f"{service} did not stop after SIGKILL ({' '.join(exc.cmd)} took over {exc.timeout:g} s): not started",
            )
    systemctl("reset-failed", service)
    proc = systemctl("start", "--no-block", service)
    return killed, (proc.stderr.strip()[:300] if proc.returncode else None)


def load_state(path: str) -> dict:
    """The state file's mapping; {} where there is none. A state file that is not the watchdog's is an error."""
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise WatchError(f"{path}: not readable JSON ({exc}): remove it, the next run starts afresh") from exc
    ok = isinstance(state, dict) and isinstance(state.get("failures", 0), int)
    restarts = state.get("restarts", []) if ok else None
    if not ok or not isinstance(restarts, list) or not all(isinstance(t, (int, float)) for t in restarts):
        raise WatchError(f"{path}: not the watchdog's state: remove it, the next run starts afresh")
    return state


def save_state(state: dict, path: str) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".state.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def stamp(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def record(settings: Settings, state: dict, reason: str, excerpt: list[str], now: float) -> None:
    """The reason, the excerpt and the counts into the host record (its one schema: host_record.with_watchdog)."""
    entry = {
        "at": stamp(now),
        "reason": reason,
        "excerpt": excerpt,
        "restarts": len(state.get("restarts", [])),
        "failures": state.get("failures", 0),
        "rate_limited": state.get("rate_limited"),
    }
    current = host_record.load(settings.record_path)
    host_record.write(host_record.with_watchdog(current, entry), settings.record_path)


def act(
    settings: Settings, before: dict, state: dict, action: str, now: float, api_key: str = ""
) -> tuple[str, list[str]]:
    """Carry out ``action``; (the action, restart_failed where systemctl failed, and the lines to log)."""
    lines = []
    if action == "none" and state.get("left_router"):
        done, line = watch_router.rejoin(settings, api_key)
        lines.append(line)
        if done:
            state.pop("left_router", None)
    if action == "rate_limited" and before.get("rate_limited") != state["rate_limited"]:
        record(settings, state, state["reason"], journal(settings.service), now)
    if action != "restart":
        return action, lines
    excerpt = journal(settings.service)
    if settings.router_url:
        lines.append(watch_router.leave(settings))
        state["left_router"] = settings.worker_id
    killed, error = restart(settings.service, settings.stop_timeout_s)
    reason = f"{state['reason']}; restarted after {settings.failures} failures in a row"
    if killed:
        reason += f" (killed: its stop took longer than {settings.stop_timeout_s:g} s)"
    record(settings, state, reason if not error else f"{reason}, but systemctl failed: {error}", excerpt, now)
    if error:
        return "restart_failed", [*lines, f"restart failed: {error}"]
    return action, [*lines, f"restarted {settings.service}: {state['reason']}"]


def run_once(settings: Settings, now: float, monotonic: float) -> tuple[str, list[str]]:
    """One watchdog run: (action, lines to log)."""
    api_key = env_value(settings.env_file, "SGLANG_API_KEY")
    before = load_state(settings.state_path)
    seen = look(settings, api_key, now, monotonic)
    state, action = decide(before, seen, settings, now)
    action, lines = act(settings, before, state, action, now, api_key)
    save_state(state, settings.state_path)
    detail = {
        "held": "held by a deploy or a roll: not probing",
        "starting": f"{seen.reason} (within the start grace of {settings.grace_s:g} s: not counted)",
        "failing": f"{seen.reason} (failure {state.get('failures')} of {settings.failures} in a row)",
        "rate_limited": f"{seen.reason}: {state.get('rate_limited')}",
    }.get(action)
    return action, ([detail] if detail else []) + lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sglang-watch", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", required=True, help="the JSON settings (the sglang_watch role writes them)")
    args = parser.parse_args(argv)
    try:
        with open(args.config, encoding="utf-8") as f:
            settings = Settings.parse(json.load(f))
        action, lines = run_once(settings, time.time(), time.monotonic())
    except (OSError, ValueError, RuntimeError) as exc:  # WatchError, RecordError: ValueErrors; systemctl: Runtime
        print(f"sglang-watch: {host_record.printable(str(exc))}", file=sys.stderr)
        return 2
    for line in lines:
        print(host_record.printable(line))
    return 1 if action in ("rate_limited", "restart_failed") else 0


if __name__ == "__main__":
    sys.exit(main())
