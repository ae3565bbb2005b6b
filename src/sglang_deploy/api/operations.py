"""The runs of one playbook each: deploy (site.yml), status, rollback and lab; and the usage error a failed run may
carry (an unknown profile name)."""

from __future__ import annotations

import re

from . import runner
from .results import RunResult, StatusResult, parse_fleet, parse_status
from .runner import EventHandler

# The tags of site.yml's phases, for deploy(tags=...).
PHASES = ("install", "model", "configure", "restart", "benchmark")


def deploy(
    profile: str,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    on_event: EventHandler | None = None,
    tags: str | None = None,
) -> RunResult:
    """Deploy a launch profile with site.yml and benchmark it (unless sglang_benchmark_enabled is false).

    tags: only these phases, comma-separated: install, model, configure, restart, benchmark (PHASES); validation runs
    always."""
    ev = {**(extravars or {}), "profile": profile}
    return runner.run_playbook(
        "site.yml",
        inventory=inventory,
        limit=limit,
        extravars=ev,
        on_event=on_event,
        kind=f"deploy-{_safe(profile)}",
        profile=profile,
        tags=tags,
    )


def status(inventory=None, limit: str | None = None, on_event: EventHandler | None = None) -> StatusResult:
    """What each host serves, from playbooks/status.yml (read-only)."""
    run = runner.run_playbook(
        "playbooks/status.yml", inventory=inventory, limit=limit, on_event=on_event, kind="status"
    )
    hosts = parse_status(run.data)
    return StatusResult(hosts=hosts, run=run, fleet=parse_fleet(run.data, hosts))


def rollback(
    inventory=None, limit: str | None = None, extravars: dict | None = None, on_event: EventHandler | None = None
) -> RunResult:
    """Re-deploy each host's last good profile (playbooks/rollback.yml, no benchmark)."""
    return runner.run_playbook(
        "playbooks/rollback.yml",
        inventory=inventory,
        limit=limit,
        extravars=extravars,
        on_event=on_event,
        kind="rollback",
    )


def lab(
    state: str = "present", inventory=None, extravars: dict | None = None, on_event: EventHandler | None = None
) -> RunResult:
    """Create (present) or remove (absent) the lab containers (playbooks/lab.yml)."""
    if state not in ("present", "absent"):
        raise ValueError(f"lab state must be present or absent, not {state!r}")
    return runner.run_playbook(
        "playbooks/lab.yml",
        inventory=inventory,
        extravars={**(extravars or {}), "lab_state": state},
        on_event=on_event,
        kind=f"lab-{state}",
    )


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "x"


def unknown_profile(results: list) -> tuple[str, list] | None:
    """(name, available profile names) when a run failed because a profile name is not in sglang_profiles."""
    for r in results:
        for f in r.failures:
            if f.unknown_profile is not None:
                return f.unknown_profile, list(f.available_profiles or [])
    return None
