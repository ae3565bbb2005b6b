"""The runs of one playbook each: deploy (site.yml), status, rollback, lab and lab_monitor; and the usage error a
failed run may carry (an unknown profile name)."""

from __future__ import annotations

import re

from sglang_deploy import paths
from sglang_deploy.compare import estimate
from sglang_deploy.paths import REPO

from . import runner
from .results import RunResult, StatusResult, parse_alerts, parse_fleet, parse_status
from .runner import EventHandler

# The tags of site.yml's phases, for deploy(tags=...).
PHASES = ("install", "model", "configure", "restart", "benchmark")
# inventory/lab.yml with its host in the group monitoring and the servers' metrics on.
LAB_MONITORING = REPO / "inventory" / "lab-monitoring"


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
    always. A run that passed and restarted a server is kept in that host's results/<host>/deploys.json, for the
    time estimate of compare and tune (compare.estimate.record_deploys)."""
    ev = {**(extravars or {}), "profile": profile}
    result = runner.run_playbook(
        "site.yml",
        inventory=inventory,
        limit=limit,
        extravars=ev,
        on_event=on_event,
        kind=f"deploy-{_safe(profile)}",
        profile=profile,
        tags=tags,
    )
    estimate.record_deploys(paths.RESULTS, result)
    return result


def status(inventory=None, limit: str | None = None, on_event: EventHandler | None = None) -> StatusResult:
    """What each host serves, the fleet behind each router and the alerts each Prometheus fires, from
    playbooks/status.yml (read-only)."""
    run = runner.run_playbook(
        "playbooks/status.yml", inventory=inventory, limit=limit, on_event=on_event, kind="status"
    )
    hosts = parse_status(run.data)
    return StatusResult(hosts=hosts, run=run, fleet=parse_fleet(run.data, hosts), alerts=parse_alerts(run.data))


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


def lab_monitor(
    profile: str = "baseline", inventory=None, extravars: dict | None = None, on_event: EventHandler | None = None
) -> RunResult:
    """Prometheus beside the lab: site.yml with `profile` on the lab inventory whose host is also the group
    monitoring's (LAB_MONITORING: metrics on, Prometheus on the container's address), no benchmark. The deploy
    restarts the server once with --enable-metrics; playbooks/monitoring.yml, site.yml's last plays, installs
    Prometheus. Where it answers: results.prometheus_urls(result.data)."""
    return deploy(
        profile,
        inventory=inventory or LAB_MONITORING,
        extravars={"sglang_benchmark_enabled": False, **(extravars or {})},
        on_event=on_event,
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
