"""The rollout engine of compare and tune: read what each host serves, deploy profiles one after another, then put
back what served before.

Every deploy is site.yml's: on a fleet (inventory group sglang_router) it rolls the profile across the replicas
behind the router (playbooks/deploy.yml), so a compare or a search there rolls each profile, and the restore rolls
each host's former profile back, the same way.

What a host reports it serves is data from a machine that may be hostile: it is checked against the profile-name
rule before it is planned with or deployed again (HostReportError names the host), and every extra variable reaches
Ansible as an unsafe value (runner.py), never as a template.
"""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.module_utils.host_record import NAME_RE

from . import operations
from .results import RunResult
from .runner import EventHandler

# The event a Rollout sends its handler before each step (event_data: {"phase": what comes next}).
PHASE_EVENT = "sglang_deploy_phase"
NO_BENCHMARK = {"sglang_benchmark_enabled": False}


class HostReportError(RuntimeError):
    """What a host reports (its record, or a search's stored copy of it) breaks the schema: nothing was deployed."""


def checked_serving(serving: object, source: str) -> dict:
    """``serving`` (host -> profile name or None) when every value is a profile name; else HostReportError naming the
    host, what it holds and ``source`` (where it was read)."""
    if not isinstance(serving, dict):
        raise HostReportError(f"{source}: what each host serves is not a mapping of host to profile")
    for host, name in serving.items():
        if name is not None and not (isinstance(name, str) and NAME_RE.match(name)):
            raise HostReportError(
                f"{source}: host {host!r} reports serving {ascii(name)[:80]}, not a profile name; nothing was"
                " deployed: fix or remove that host's record (/etc/ansible/facts.d/sglang_server.fact), or give"
                " --restore PROFILE"
            )
    return serving


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
        broken = [f"{h}: {s.error}" for h, s in found.hosts.items() if s.error]
        broken += [f"{f.host}: {f.message}" for f in found.run.failures]
        if broken:
            raise HostReportError("cannot read what each host serves, so nothing was deployed: " + "; ".join(broken))
        serving = {h: (s.profile if s.serving else s.last_good_profile) for h, s in found.hosts.items()}
        return checked_serving(serving, "the hosts' records")

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
        checked_serving({"every host": before} if isinstance(before, str) else before, "the restore")
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
