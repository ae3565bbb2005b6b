"""The results of playbook runs (RunResult, StatusResult and their parts), read from ansible-runner's events, never
from stdout: per-host outcome from `playbook_on_stats`, failures from `runner_on_failed` / `runner_on_unreachable`
(with the fields a module returns, e.g. sglang_profile's `unknown_profile`), data the playbooks publish with
`set_stats` from the stats event's `artifact_data` (`sglang_benchmark`, `sglang_benchmark_file`, `sglang_status`,
`sglang_alerts`).
Pure: nothing here runs anything.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from sglang_deploy.compare import gate, validate
from sglang_deploy.fleet import fleet
from ansible_collections.sglang.deploy.plugins.module_utils import host_record, prometheus_alerts
from ansible_collections.sglang.deploy.plugins.module_utils import text as host_text
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import parse_systemctl_show


@dataclass
class HostOutcome:
    """Task counts of one host from the play recap."""

    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0

    @property
    def state(self) -> str:
        """unreachable, failed, changed or ok."""
        if self.unreachable:
            return "unreachable"
        if self.failed:
            return "failed"
        return "changed" if self.changed else "ok"


@dataclass
class Failure:
    """A failed (or unreachable) task of one host."""

    host: str
    task: str
    message: str
    action: str | None = None
    unreachable: bool = False
    # The sglang_profile action plugin's fields when the profile name is not in sglang_profiles (a usage error,
    # not a broken host): the name asked for and the names there are.
    unknown_profile: str | None = None
    available_profiles: list | None = None
    quality: dict | None = None  # the quality gate's result when the gate failed it (compare.gate.summary)


@dataclass
class RunResult:
    """One ansible-runner run of a playbook."""

    playbook: str
    status: str  # ansible-runner's: successful, failed, canceled, timeout
    rc: int
    hosts: dict = field(default_factory=dict)  # host -> HostOutcome
    failures: list = field(default_factory=list)  # Failure that stopped a host
    rescued: list = field(default_factory=list)  # Failure handled by a rescue (the rollback) or a later retry
    data: dict = field(default_factory=dict)  # set_stats data
    artifacts: str = ""
    elapsed_s: float = 0.0
    profile: str | None = None
    error: str | None = None  # ansible-playbook's own error (no task ran): the end of its output

    @property
    def ok(self) -> bool:
        return self.status == "successful" and self.rc == 0 and not self.failures and self.hosts != {}

    @property
    def benchmarks(self) -> dict:
        """host -> benchmark result dict (bench.run_benchmark's), from set_stats `sglang_benchmark`: the sound ones
        (compare.validate; the others: dropped_benchmarks)."""
        return validate.sound(self.data.get("sglang_benchmark"))[0]

    @property
    def gate(self) -> dict:
        """host -> the quality gate's result (compare.gate.summary): a failed gate's, else the one in the deployed
        context of the host's benchmark, else the deploy's outcome row's; hosts without one left out."""
        out = {r["host"]: gate.summary(r.get("quality")) for r in self.outcomes if isinstance(r, dict) and "host" in r}
        out.update({h: gate.of_result(r) for h, r in self.benchmarks.items()})
        out.update({f.host: f.quality for f in (*self.rescued, *self.failures) if f.quality})
        return {h: g for h, g in out.items() if g}

    @property
    def dropped_benchmarks(self) -> dict:
        """host (a router: 'router <host>') -> why its benchmark result was dropped (compare.validate)."""
        hosts = validate.sound(self.data.get("sglang_benchmark"))[1]
        routers = validate.sound(self.data.get("sglang_fleet_benchmark"))[1]
        return {**hosts, **{f"router {h}": why for h, why in routers.items()}}

    @property
    def result_files(self) -> dict:
        """host -> controller path of the benchmark result JSON, from set_stats `sglang_benchmark_file`."""
        return self.data.get("sglang_benchmark_file") or {}

    @property
    def router_benchmarks(self) -> dict:
        """router host -> benchmark result through its endpoint (set_stats `sglang_fleet_benchmark`): the fleet's
        aggregate, after a roll with sglang_fleet_benchmark; the sound ones (compare.validate)."""
        return validate.sound(self.data.get("sglang_fleet_benchmark"))[0]

    @property
    def router_result_files(self) -> dict:
        """router host -> controller path of its benchmark result JSON (set_stats `sglang_fleet_benchmark_file`)."""
        return self.data.get("sglang_fleet_benchmark_file") or {}

    @property
    def outcomes(self) -> list:
        """What a deploy did on each host and what it serves (set_stats `sglang_fleet`, fleet.summary's rows:
        host, serves, outcome: deployed, unchanged, rolled back, failed or untouched, state in words)."""
        return self.data.get("sglang_fleet") or []

    @property
    def emulated(self) -> bool:
        results = list(self.benchmarks.values()) + list(self.router_benchmarks.values())
        return any(r.get("server_emulated") for r in results)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["ok"] = self.ok
        for name, outcome in self.hosts.items():
            out["hosts"][name]["state"] = outcome.state
        return out


@dataclass
class HostStatus:
    """What one host serves (playbooks/status.yml)."""

    host: str
    profile: str | None  # the profile of the installed unit (local fact sglang_server.profile)
    active_state: str | None
    sub_state: str | None
    last_good_profile: str | None
    manifest: dict | None
    emulated: bool = False
    asked: str | None = None  # the profile the last deploy asked for (its record)
    rolled_back: dict | None = None  # {"from", "to", "at"}: that profile failed here and the host rolled back
    last_good_stack: str | None = None  # the stack the last good profile ran on, as the gate's store names it
    error: str | None = None  # what the host reported breaks the schema (its record): nothing else is read from it

    @property
    def serving(self) -> bool:
        return self.active_state == "active" and self.profile is not None

    @property
    def stack(self) -> str | None:
        """The stack bundle and its id (bundle-id); None without a stack manifest (the lab)."""
        m = self.manifest or {}
        return f"{m.get('bundle', '?')}-{m.get('bundle_id', '?')}" if m else None


@dataclass
class Alert:
    """A firing alert as a Prometheus reports it (host.prometheus_alerts.FIELDS), each field escaped text."""

    name: str
    instance: str
    severity: str
    since: str  # when it became active: 2026-12-06T09:40:12Z (Prometheus's activeAt without the fraction)
    summary: str


@dataclass
class Alerts:
    """What the Prometheus of one host of the group monitoring fires (playbooks/status.yml): the firing alerts (at
    most prometheus_alerts.MAX_ALERTS), how many fire and wait for their `for:`; error: why there is nothing to read
    (Prometheus did not answer, or its report breaks the schema)."""

    alerts: list = field(default_factory=list)
    firing: int = 0
    pending: int = 0
    error: str | None = None


@dataclass
class StatusResult:
    """status(): host -> HostStatus, the run that read it (failures of unreachable hosts), per router host
    (inventory group sglang_router) the fleet behind it: fleet.fleet_view() (the router's unit, readiness and
    workers, what each replica serves, the mismatches), and per monitoring host (group monitoring) the Alerts its
    Prometheus fires."""

    hosts: dict
    run: RunResult
    fleet: dict = field(default_factory=dict)
    alerts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.run.ok

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "hosts": {h: {**asdict(s), "serving": s.serving, "stack": s.stack} for h, s in self.hosts.items()},
            "fleet": self.fleet,
            "alerts": {h: asdict(a) for h, a in self.alerts.items()},
            "failures": [asdict(f) for f in self.run.failures],
            "error": self.run.error,
            "artifacts": self.run.artifacts,
        }


def failure_message(res: dict) -> str:
    """The useful text of a failed module result (loop items, command stderr included)."""
    msg = res.get("msg")
    items = res.get("results")
    if isinstance(items, list):
        bad = [r for r in items if isinstance(r, dict) and r.get("failed")]
        if bad:
            item = failure_message(bad[0])
            msg = f"{msg}: {item}" if msg and msg != item else item
    for key in ("stderr", "module_stderr"):
        text = (res.get(key) or "").strip()
        if text and text not in (msg or ""):
            msg = f"{msg}\n{text}" if msg else text
    if not msg and "rc" in res:
        msg = f"exit status {res['rc']}"
    return str(msg or "failed without a message")


def parse_events(events: list) -> tuple[dict, list, list, dict]:
    """(hosts, failures, rescued, data) from ansible-runner events of one playbook run.

    The last failure of a host that the recap counts as failed (or unreachable) stopped it; its earlier failures
    were handled (a rescue) because the play went on. Failures with ignore_errors are not failures.
    """
    seen: dict = {}  # host -> [Failure, ...] in order
    hosts: dict = {}
    data: dict = {}
    for ev in events:
        kind = ev.get("event")
        d = ev.get("event_data") or {}
        if kind in ("runner_on_failed", "runner_on_unreachable"):
            if kind == "runner_on_failed" and d.get("ignore_errors"):
                continue
            res = d.get("res") or {}
            seen.setdefault(d.get("host", "?"), []).append(
                Failure(
                    host=d.get("host", "?"),
                    task=d.get("task") or "?",
                    message=failure_message(res),
                    action=d.get("resolved_action") or d.get("task_action"),
                    unreachable=kind == "runner_on_unreachable",
                    unknown_profile=res.get("unknown_profile"),
                    available_profiles=res.get("available_profiles"),
                    quality=gate.summary(res.get("quality")),
                )
            )
        elif kind == "playbook_on_stats":
            data = d.get("artifact_data") or {}
            names = set()
            for key in ("ok", "changed", "failures", "dark", "skipped", "rescued", "processed"):
                names.update((d.get(key) or {}).keys())
            for name in sorted(names):
                hosts[name] = HostOutcome(
                    ok=d.get("ok", {}).get(name, 0),
                    changed=d.get("changed", {}).get(name, 0),
                    failed=(d.get("failures") or {}).get(name, 0),
                    unreachable=(d.get("dark") or {}).get(name, 0),
                    skipped=(d.get("skipped") or {}).get(name, 0),
                    rescued=(d.get("rescued") or {}).get(name, 0),
                )
    failures, rescued = [], []
    for name, items in seen.items():
        stopped = name in hosts and hosts[name].state in ("failed", "unreachable")
        if stopped:
            failures.append(items[-1])
            rescued.extend(items[:-1])
        else:
            rescued.extend(items)
    return hosts, failures, rescued, data


def parse_status(data: dict) -> dict:
    """host -> HostStatus from the set_stats data of playbooks/status.yml."""
    out = {}
    for host, raw in sorted((data.get("sglang_status") or {}).items()):
        try:
            server, unit, local, manifest = _reported(raw)
        except host_record.RecordError as exc:
            out[host] = HostStatus(host, None, None, None, None, None, error=str(exc))
            continue
        out[host] = HostStatus(
            host=host,
            profile=server["profile"] if unit.get("LoadState") == "loaded" else None,
            active_state=unit.get("ActiveState"),
            sub_state=unit.get("SubState"),
            last_good_profile=server["last_good_profile"],
            manifest=manifest,
            emulated=isinstance(local.get("sglang_host"), dict) and local["sglang_host"].get("emulated") is True,
            asked=server["asked"],
            rolled_back=server["rolled_back"] or None,
            last_good_stack=server["stack"],
        )
    return out


def _reported(raw: object) -> tuple:
    """(host record, unit properties, local facts, stack manifest) of one host's status report, each checked for its
    type; RecordError naming what is wrong."""
    if not isinstance(raw, dict):
        raise host_record.RecordError("its status report is not a mapping")
    local, manifest, unit = raw.get("local") or {}, raw.get("manifest") or None, raw.get("unit") or ""
    if not isinstance(unit, str) or not isinstance(manifest, (dict, type(None))):
        raise host_record.RecordError("its unit properties or stack manifest are not what status.yml publishes")
    return host_record.read(local), parse_systemctl_show(unit), local, manifest


MAX_COUNT = 10**6  # of firing or pending alerts
MAX_ERROR = 1000  # characters of a report's error shown
_SINCE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)\Z")


def parse_alerts(data: dict) -> dict:
    """monitoring host -> Alerts from the set_stats data `sglang_alerts` of playbooks/status.yml. A report is data from
    a host: one that breaks the schema (types, prometheus_alerts' bounds) is refused as that host's error; text is
    kept with its control characters escaped (host.text)."""
    reports = data.get("sglang_alerts") or {}
    if not isinstance(reports, dict):
        return {}
    out = {}
    for host, raw in sorted(reports.items()):
        try:
            out[host] = _alerts(raw)
        except ValueError as exc:
            out[host] = Alerts(error=f"its alert report is refused: {exc}")
    return out


def _alerts(raw: object) -> Alerts:
    if not isinstance(raw, dict):
        raise ValueError("not a mapping")
    if raw.get("error") is not None:
        return Alerts(error=host_text.escaped(str(raw["error"])[:MAX_ERROR]))
    alerts, counts = raw.get("alerts"), [raw.get("firing"), raw.get("pending")]
    if not isinstance(alerts, list) or len(alerts) > prometheus_alerts.MAX_ALERTS:
        raise ValueError(f"alerts is not a list of at most {prometheus_alerts.MAX_ALERTS}")
    if any(type(n) is not int or not 0 <= n <= MAX_COUNT for n in counts) or counts[0] < len(alerts):
        raise ValueError(f"firing or pending is not a count from 0 to {MAX_COUNT} (firing: at least the alerts listed)")
    return Alerts(alerts=[_alert(a) for a in alerts], firing=counts[0], pending=counts[1])


def _alert(raw: object) -> Alert:
    if not isinstance(raw, dict):
        raise ValueError("an alert is not a mapping")
    values = [raw.get(name) for name in prometheus_alerts.FIELDS]
    bad = [
        n
        for n, v in zip(prometheus_alerts.FIELDS, values)
        if not isinstance(v, str) or len(v) > prometheus_alerts.MAX_TEXT
    ]
    if bad:
        raise ValueError(f"an alert's {bad[0]} is not text of at most {prometheus_alerts.MAX_TEXT} characters")
    shown = dict(zip(prometheus_alerts.FIELDS, map(host_text.escaped, values)))
    since = _SINCE.match(shown["since"])
    return Alert(**{**shown, "since": "".join(since.groups()) if since else shown["since"]})


_URL = re.compile(r"http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):[0-9]{1,5}\Z")


def prometheus_urls(data: dict) -> dict:
    """monitoring host -> where its Prometheus answers (set_stats `sglang_prometheus` of the role sglang_monitoring):
    http://ADDRESS:PORT; a value of another form is left out."""
    urls = data.get("sglang_prometheus") or {}
    if not isinstance(urls, dict):
        return {}
    return {h: u for h, u in sorted(urls.items()) if isinstance(u, str) and _URL.match(u)}


def parse_fleet(data: dict, hosts: dict) -> dict:
    """router host -> fleet.fleet_view() from the set_stats data of playbooks/status.yml and parse_status()'s hosts;
    a router host of the inventory (sglang_router_hosts) that reported nothing is shown as unreachable."""
    facts = {
        h: {
            "profile": s.profile,
            "serving": s.serving,
            "stack": s.stack,
            "asked": s.asked,
            "rolled_back": s.rolled_back,
        }
        for h, s in hosts.items()
    }
    reported = data.get("sglang_router_status") or {}
    silent = {
        router: {
            "deployed": True,
            "error": f"the router host {router} did not report (unreachable, or its status task failed: see above):"
            " bring it back, then run sglang-deploy status again",
        }
        for router in data.get("sglang_router_hosts") or []
        if router not in reported
    }
    return {
        router: fleet.fleet_view(router, {**raw, "unit": parse_systemctl_show(raw.get("unit") or "")}, facts)
        for router, raw in sorted({**silent, **reported}.items())
    }
