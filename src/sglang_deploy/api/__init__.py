"""Python API over ansible-runner: deploy, compare, status, rollback, lab, tune.

- runner: run_playbook, one ansible-runner run of a playbook of the project in a private data dir
- redaction: secret extra variables kept out of the run's argv, files and events
- results: RunResult, StatusResult and their parts, read from the run's events (pure)
- operations: deploy, status, rollback, lab, lab_monitor (one playbook each)
- rollout: the engine of compare and tune: read what each host serves, deploy, restore it
- traffic_capture: capture(), a server's or a fleet's traffic as a trace (playbooks/traffic.yml)
- comparison: compare(); search: tune(), the flag-matrix search; canary: canary(), a stack upgrade tried on one host

Progress: `on_event(event)` gets every ansible-runner event plus PHASE_EVENT events from compare() and tune();
when it also has a `tick()` method, that is called about once a second while ansible runs (the heartbeat of a long
task). The command line's `sglang_deploy.cli.progress.Progress` is such a handler.

Nothing here prints: the command line (sglang_deploy.cli) formats what these functions return.
"""

from .traffic_capture import CaptureResult, capture
from .canary import CanaryError, CanaryResult, canary
from .canary import default_target as canary_target
from .comparison import DEFAULT_REPEATS, MAX_REPEATS, compare
from .operations import LAB_MONITORING, PHASES, deploy, lab, lab_monitor, rollback, status, unknown_profile
from .results import (
    Alert,
    Alerts,
    Failure,
    HostOutcome,
    HostStatus,
    RunResult,
    StatusResult,
    failure_message,
    parse_alerts,
    parse_fleet,
    parse_status,
    prometheus_urls,
)
from .rollout import PHASE_EVENT, HostReportError
from .runner import inventory_path
from .search import TuneResult, tune

__all__ = [
    "Alert",
    "Alerts",
    "CanaryError",
    "CanaryResult",
    "CaptureResult",
    "DEFAULT_REPEATS",
    "LAB_MONITORING",
    "MAX_REPEATS",
    "PHASES",
    "PHASE_EVENT",
    "Failure",
    "HostOutcome",
    "HostReportError",
    "HostStatus",
    "RunResult",
    "StatusResult",
    "TuneResult",
    "canary",
    "canary_target",
    "capture",
    "compare",
    "deploy",
    "failure_message",
    "inventory_path",
    "lab",
    "lab_monitor",
    "parse_alerts",
    "parse_fleet",
    "parse_status",
    "prometheus_urls",
    "rollback",
    "status",
    "tune",
    "unknown_profile",
]
