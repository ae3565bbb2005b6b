"""The rollout engine of compare and tune: read what each host serves, deploy profiles one after another, then put
back what served before.

Every deploy is site.yml's: on a fleet (inventory group sglang_router) it rolls the profile across the replicas
behind the router (playbooks/deploy.yml), so a compare or a search there rolls each profile, and the restore rolls
each host's former profile back, the same way.
"""

from __future__ import annotations

from . import operations
from .results import RunResult
from .runner import EventHandler

# The event a Rollout sends its handler before each step (event_data: {"phase": what comes next}).
PHASE_EVENT = "sglang_deploy_phase"
NO_BENCHMARK = {"sglang_benchmark_enabled": False}


class Rollout:
    """Deploys on the hosts of one inventory (and --limit), with the same extra variables and event handler."""

    def __init__(
        self,
        inventory=None,
        limit: str | None = None,
        extravars: dict | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        self.inventory = inventory
        self.limit = limit
        self.extravars = dict(extravars or {})
        self.on_event = on_event

    def phase(self, text: str) -> None:
        """Tell the event handler what comes next (a PHASE_EVENT)."""
        if self.on_event:
            self.on_event({"event": PHASE_EVENT, "event_data": {"phase": text}})

    def serving(self) -> dict:
        """The prior state: host -> the profile it serves (status(): its unit's when serving, else its last good
        one; None without either)."""
        self.phase("read what each host serves")
        found = operations.status(inventory=self.inventory, limit=self.limit, on_event=self.on_event)
        return {h: (s.profile if s.serving else s.last_good_profile) for h, s in found.hosts.items()}

    def deploy(
        self,
        profile: str,
        extravars: dict | None = None,
        *,
        body: dict | None = None,
        limit: str | None = None,
        on_event: EventHandler | None = None,
        tags: str | None = None,
    ) -> RunResult:
        """deploy() of ``profile`` with ``extravars`` over the rollout's. ``body``: the profile's definition, for a
        profile the hosts' sglang_profiles lack (a search candidate); ``limit`` and ``on_event`` stand in for the
        rollout's; ``tags``: only these phases (operations.PHASES)."""
        ev = {**self.extravars, **(extravars or {})}
        if body is not None:
            ev["sglang_profiles"] = {profile: body}
        return operations.deploy(
            profile,
            inventory=self.inventory,
            limit=limit or self.limit,
            extravars=ev,
            on_event=on_event or self.on_event,
            **({"tags": tags} if tags else {}),
        )

    def restore(self, before: dict | str, bodies: dict | None = None) -> list:
        """Deploy, without a benchmark, what served before: ``before`` maps host -> profile (one deploy per profile,
        limited to its hosts; a host mapped to None is left as it is), or names one profile for every host.
        ``bodies``: profile -> definition, for the profiles the hosts lack. Returns the RunResults."""
        if isinstance(before, str):
            self.phase(f"restore {before}")
            return [self.deploy(before, NO_BENCHMARK)]
        by_profile: dict = {}
        for host, name in sorted(before.items()):
            if name:
                by_profile.setdefault(name, []).append(host)
        runs = []
        for name, hosts in by_profile.items():
            self.phase(f"restore {name} on {', '.join(hosts)}")
            runs.append(self.deploy(name, NO_BENCHMARK, body=(bodies or {}).get(name), limit=",".join(hosts)))
        return runs
