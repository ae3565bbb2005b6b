"""A fleet of SGLang replicas behind the Shepherd Model Gateway (smg), as the controller sees it: the router's
worker manifest and flags, the API-key agreement between router and replicas, what each host serves after a rolling
deploy, the fleet as `sglang-deploy status` shows it (fleet_view: the router, its replicas and what does not match)
and the order of a rolling deploy (plan). Used by the filter plugin and the API; the probes that run on hosts
(GET /workers, /metrics, the waits) are host/fleet_probes.py.

smg's file discovery (smg 1.13.0): `--discovery-provider file --discovery-file F` re-reads F when it changes; F is
{"version": 1, "workers": [{"id": ..., "url": ...}]}. A worker dropped from F goes `draining` at once (no new
requests) and leaves the registry after a fixed settle time, without waiting for in-flight requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlsplit

from ansible_collections.sglang.deploy.plugins.module_utils.fleet_probes import FleetError
from ansible_collections.sglang.deploy.plugins.module_utils.readiness import whole
from ..launch.nodes import local_only

MANIFEST_VERSION = 1


def manifest(workers: list[dict], out: list[str] | tuple = ()) -> dict:
    """smg's file-discovery manifest of ``workers`` ([{"id", "url"}]) without the ids in ``out``."""
    seen: dict[str, str] = {}
    for worker in workers:
        wid, url = str(worker.get("id", "")), str(worker.get("url", ""))
        parts = urlsplit(url)
        if not wid or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"router worker {worker!r}: needs an id and an http(s)://host:port url")
        if wid in seen or url in seen.values():
            raise ValueError(f"router worker {wid} ({url}) is listed twice")
        seen[wid] = url
    return {
        "version": MANIFEST_VERSION,
        "workers": [{"id": wid, "url": url} for wid, url in seen.items() if wid not in set(out)],
    }


def manifest_text(workers: list[dict], out: list[str] | tuple = ()) -> str:
    """The text of the manifest file (its one rendering: the writer's content and the router's comparison): as
    Ansible's to_nice_json writes it, with a final newline."""
    return json.dumps(manifest(workers, out), indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def local_workers(workers: list[dict], router_host: str) -> list[str]:
    """The ids of ``workers`` ([{"id", "url"}]) whose URL only their own host reaches (nodes.local_only), but for
    the router's own host."""
    out = []
    for worker in workers:
        try:
            host = urlsplit(str(worker["url"])).hostname or ""
        except ValueError:  # manifest() refuses the URL
            continue
        if worker["id"] != router_host and local_only(host):
            out.append(str(worker["id"]))
    return out


def key_mismatch(router_key: object, worker_keys: dict, open_ok: list | tuple = ()) -> list[str]:
    """Why the router and its workers (``worker_keys``: host -> its sglang_api_key) would not agree on the API key,
    each with the fix and never a key: the router presents sglang_router_api_key to every worker, so each worker's
    key must be that one. A worker without a key in ``open_ok`` (sglang_server_allow_open_bind: a private network)
    accepts the router's key and is not refused."""
    router = str(router_key or "")
    keyed = [h for h, key in worker_keys.items() if key not in (None, "")]
    if not router:
        return (
            [
                f"{', '.join(keyed)} require an API key (sglang_api_key) and the router has none (sglang_router_api_key"
                " is empty): the router would be open to anyone and pass every request on without a key, to get 401"
                " while /health says ready. Put sglang_api_key in group_vars/all (the router's key defaults to it),"
                " or set sglang_router_api_key to the replicas' key (vault it)"
            ]
            if keyed
            else []
        )
    problems = []
    other = [h for h in keyed if str(worker_keys[h]) != router]
    if other:
        problems.append(
            f"{', '.join(other)} have another sglang_api_key than the router's sglang_router_api_key: the router"
            " presents its key to them, and they would answer 401 to every request. Use one key: put sglang_api_key"
            " in group_vars/all (vault it) and leave sglang_router_api_key unset (it defaults to sglang_api_key)"
        )
    keyless = [h for h in worker_keys if h not in keyed and h not in open_ok]
    if keyless:
        problems.append(
            f"{', '.join(keyless)} have no sglang_api_key while the router has one: whoever reaches them goes around"
            " the router's key. Put sglang_api_key in group_vars/all (vault it) so the replicas and the router share it,"
            " or, on a private network, set sglang_server_allow_open_bind: true for them"
        )
    return problems


def router_argv(args: dict) -> list[str]:
    """smg launch flags from {name without dashes: value}: true is a bare switch, false or null leaves the flag out,
    a list gives several values."""
    argv: list[str] = []
    for name, value in args.items():
        if value is False or value is None:
            continue
        argv.append(f"--{name}")
        if value is not True:
            argv += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return argv


# smg 1.13.0's flags that forfeit its retries, and the value that does (None: the switch given at all).
_RETRIES_OFF = {"disable-retries": None, "retry-max-retries": 1, "max-buffered-request-bytes": 0}


def retry_problems(extra_args: object, watched: list[str]) -> list[str]:
    """Why smg flags of sglang_router_extra_args would lose requests at a stall watchdog's restart of one of the
    ``watched`` workers: the watchdog drains the stalled server and restarts it, and smg resends what it had sent
    there to another worker only while its retries are on (smg 1.13.0: --disable-retries, --retry-max-retries 1 or
    less, --max-buffered-request-bytes 0 forfeit them; docs/watchdog.md). A flag is also found by an abbreviation
    (argparse takes one) and a number also when quoted."""
    if not watched or not isinstance(extra_args, dict):
        return []  # not a mapping: router_flag_problems says so
    found = []
    for name, value in extra_args.items():
        given = str(name).lstrip("-").replace("_", "-")
        flag = next((f for f in _RETRIES_OFF if given and f.startswith(given)), None)
        if flag is None or value is False or value is None:
            continue
        try:
            number = None if isinstance(value, bool) else float(value)
        except (TypeError, ValueError):
            number = None
        most = _RETRIES_OFF[flag]
        if most is None or (number is not None and number <= most):
            found.append(f"{given}: {value!r}" + (f" (--{flag})" if given != flag else ""))
    if not found:
        return []
    return [
        f"sglang_router_extra_args {', '.join(found)} turns smg's retries off, and the stall watchdog runs on "
        f"{', '.join(sorted(watched))}: the requests a stalled server holds would fail at the watchdog's restart "
        "instead of going to another replica. Remove it, or set sglang_watch_enabled: false on those hosts"
    ]


def summary(hosts: list[str], previous: dict, results: dict, profile: str, routed: bool) -> list[dict]:
    """What each host serves after a (possibly stopped) run of ``profile`` and what the run did there: rows of
    {"host", "serves", "outcome" (deployed, unchanged, rolled back, failed, untouched), "state" (in words)}, and
    "startup" (where the start went: ansible_collections.sglang.deploy.plugins.module_utils.startup's report) for a host this run restarted, and
    "quality" (the quality gate's result) where the gate ran.
    ``previous``: host -> profile before the run (its host record, read from the host); ``results``: host ->
    {"restarted": bool, "startup": report or None} for a host that passed, {"failed": True, "rolled_back_to":
    profile or None, "serves": profile or None, "restarted": bool} for one that failed (after_failure: restarted
    False when its server was not restarted, so it serves what it served before); a host without one was not
    reached. ``routed``: behind a router (a failure stops the roll; an unchanged host stays in)."""
    rows = []
    for host in hosts:
        result = results.get(host)
        if result is None:
            rows.append({"host": host, "serves": previous.get(host), "outcome": "untouched", "state": "untouched"})
        elif not result.get("failed"):
            outcome = "deployed" if result.get("restarted") else "unchanged"
            state = "unchanged, not drained" if routed and outcome == "unchanged" else outcome
            rows.append({"host": host, "serves": profile, "outcome": outcome, "state": state})
            if outcome == "deployed" and result.get("startup"):
                rows[-1]["startup"] = result["startup"]
            if result.get("quality"):
                rows[-1]["quality"] = result["quality"]
        else:
            back, serves = result.get("rolled_back_to"), result.get("serves")
            state = f"{profile} failed here" + (f", rolled back to {back}" if back else "")
            if not back and not result.get("restarted", True):
                state += " before its server restarted" + (f", which still serves {serves}" if serves else "")
            state += (", roll stopped" if routed else "") + ("" if serves else "; not serving")
            outcome = "rolled back" if back else "failed"
            rows.append({"host": host, "serves": serves, "outcome": outcome, "state": state})
    return rows


def after_failure(
    record: dict, unit: dict, pid_before: int | None, rolled_back_to: str | None, routed: bool, back_ready: bool
) -> dict:
    """What a host whose run failed serves now and whether the run restarted its server, from what was read on it
    after the failure: ``record`` its host record (host_record.read), ``unit`` its server's unit (systemd's
    ActiveState and MainPID); ``pid_before`` the main process the run found before it changed anything
    (sglang_restart_due, 0 when none ran; None when the run failed before it looked: it touched nothing);
    ``rolled_back_to`` the profile the role rolled back to; behind a router (``routed``), ``back_ready``: the router
    reports the host ready again. Returns {"serves": profile or None, "restarted": bool}."""
    active = unit.get("ActiveState") == "active"
    pid_now = whole(unit.get("MainPID")) if active else 0
    restarted = bool(rolled_back_to) or (pid_before is not None and pid_now != whole(pid_before))
    if routed:
        serves = record.get("last_good_profile") if back_ready else None
    elif rolled_back_to:
        serves = rolled_back_to
    else:
        # Not restarted and running: the process that served before the run, the last profile that passed.
        serves = record.get("last_good_profile") if not restarted and pid_now else None
    return {"serves": serves, "restarted": restarted}


def quick_roll(routed: bool, run_tags: list, skip_tags: list, force_restart: bool, fleet_benchmark: bool) -> bool:
    """Whether a roll may leave out the servers with nothing due (nothing_due) instead of taking each through the
    server role one batch at a time: only a whole run (no --tags, no --skip-tags) behind a router that restarts only
    what changed and benchmarks nothing through the router (an unchanged server behind a router is not benchmarked;
    without one it is, and a benchmark through the router records what each replica's run rendered)."""
    return routed and list(run_tags) == ["all"] and not skip_tags and not force_restart and not fleet_benchmark


def nothing_due(record: dict, profile: str, argv: list, sglang_version: str, restarts: bool) -> bool:
    """Whether a server needs nothing from a roll of ``profile``: it does not restart (``restarts``, the role's
    comparison of its unit, environment, launcher and process) and its host record (host_record.read) already says
    it runs this profile as asked and passed, with this launch (``argv``, ``sglang_version``), and no rollback: the
    role would change nothing on it."""
    return (
        not restarts
        and record.get("profile") == record.get("asked") == record.get("last_good_profile") == profile
        and not record.get("rolled_back")
        and record.get("argv") == list(argv)
        and record.get("sglang_version") == sglang_version
    )


def _odd_ones(values: dict) -> tuple[object, list]:
    """(the value most hosts share, the hosts with another); (None, every host) when no single value leads."""
    counts: dict = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    if len(counts) < 2:
        return next(iter(counts), None), []
    ranked = sorted(counts.values(), reverse=True)
    if ranked[0] == ranked[1]:
        return None, sorted(values)
    common = max(counts, key=counts.get)
    return common, sorted(h for h, v in values.items() if v != common)


def _differ(kind: str, what: str, values: dict) -> list[dict]:
    """A mismatch per replica whose profile (or stack) is not the one the others share."""
    common, odd = _odd_ones(values)
    fix = "roll one profile across the fleet: sglang-deploy deploy PROFILE -i INVENTORY"
    if common is None:
        listing = ", ".join(f"{h}: {values[h]}" for h in odd)
        return [
            {"kind": kind, "subject": h, "message": f"the replicas serve different {what}s ({listing}): {fix}"}
            for h in odd
        ]
    return [
        {
            "kind": kind,
            "subject": h,
            "message": f"{h} serves {what} {values[h]}, the other replicas {common}: {fix}",
        }
        for h in odd
    ]


def _stopped_roll(serving: list[dict]) -> list[dict] | None:
    """The replicas a roll that stopped on a rollback left behind, from their records (sglang_server.fact: asked,
    rolled_back {from, to, at}): each one that rolled back, and each one that serves another profile than the one
    the roll asked for (it did not reach them). None when no replica records a rollback."""
    rolled = [r for r in serving if r.get("rolled_back")]
    if not rolled:
        return None
    asked = _odd_ones({r["host"]: r["rolled_back"].get("from") for r in rolled})[0] or rolled[0]["rolled_back"].get(
        "from"
    )
    out = []
    for r in serving:
        back = r.get("rolled_back")
        if back:
            message = (
                f"{r['host']} rolled back: {back.get('from')} failed there ({back.get('at') or 'time unknown'}) and it"
                f" serves {back.get('to')} again: read its server's journal, fix the profile, then roll it again"
            )
            out.append({"kind": "rolled_back", "subject": r["host"], "message": message})
        elif r["profile"] != asked:
            message = (
                f"{r['host']} serves {r['profile']} (last asked: {r.get('asked') or 'unrecorded'}): the roll of {asked}"
                " stopped before it; once the rollback's cause is fixed: sglang-deploy deploy PROFILE -i INVENTORY"
            )
            out.append({"kind": "roll_stopped_before", "subject": r["host"], "message": message})
    return out


@dataclass(frozen=True)
class _Seen:
    """What fleet_view's checks read: the router's state as given, its readiness, and each replica (member) with the
    worker the router lists for it (None: not listed) and its host's facts (None: not read)."""

    router_host: str
    router: dict
    ready: bool | None  # None: it did not answer
    body: dict  # its readiness answer
    listed: dict | None  # the router's workers, None when they could not be read
    replicas: list  # fleet_view's replica rows
    workers: dict  # host -> the router's worker for it, or None
    facts: dict  # host -> its facts, or None
    unknown: list  # the workers that are no replica of the inventory

    @property
    def service(self) -> str:
        return self.router.get("service") or "smg"

    @property
    def serving(self) -> list:
        return [r for r in self.replicas if r["serving"]]


def _mismatch(kind: str, subject: str, message: str) -> dict:
    return {"kind": kind, "subject": subject, "message": message}


def _router_missing(s: _Seen) -> list:
    if s.router.get("deployed"):
        return []
    fix = "run ansible-playbook playbooks/router.yml (site.yml does)"
    return [_mismatch("router_missing", s.router_host, f"no smg router is deployed on {s.router_host}: {fix}")]


def _router_unit(s: _Seen) -> list:
    unit = s.router.get("unit") or {}
    if not s.router.get("deployed") or not unit or unit.get("ActiveState") == "active":
        return []
    message = (
        f"the router's unit {s.service} on {s.router_host} is {unit.get('ActiveState')}/{unit.get('SubState')}:"
        f" read journalctl -u {s.service} there, then run ansible-playbook playbooks/router.yml"
    )
    return [_mismatch("router_unit", s.router_host, message)]


def _router_unreachable(s: _Seen) -> list:
    error = s.router.get("deployed") and s.router.get("error")
    return [_mismatch("router_unreachable", s.router_host, str(error))] if error else []


def _router_not_ready(s: _Seen) -> list:
    if not s.router.get("deployed") or s.ready is not False:
        return []
    reason = s.body.get("reason") or s.body.get("status") or "HTTP 503"
    message = (
        f"the router on {s.router_host} is not ready ({reason}): its clients get errors until a replica is healthy"
    )
    return [_mismatch("router_not_ready", s.router_host, message)]


def _not_in_router(s: _Seen) -> list:
    if s.listed is None:
        return []
    return [
        _mismatch(
            "not_in_router",
            host,
            f"{host} is a replica of the router on {s.router_host} in the inventory, but the router does not list"
            " it (it gets no requests): run ansible-playbook playbooks/router.yml to rewrite its worker list"
            " (a roll that was cut short leaves its batch out)",
        )
        for host, worker in s.workers.items()
        if worker is None
    ]


def _not_routed(s: _Seen) -> list:
    out = []
    for host, worker in s.workers.items():
        if not worker or (worker.get("status") == "ready" and worker.get("healthy")):
            continue
        state = f"{worker.get('status')}{'' if worker.get('healthy') else ', unhealthy'}"
        fix = (
            "a roll is taking it out, or one was cut short: ansible-playbook playbooks/router.yml puts it back"
            if worker.get("status") == "draining"
            else f"check the replica (sglang-deploy status -l {host}; its server's journal)"
        )
        message = f"the router on {s.router_host} lists {host} as {state} and sends it no requests: {fix}"
        out.append(_mismatch("not_routed", host, message))
    return out


def _not_serving(s: _Seen) -> list:
    fix = "sglang-deploy rollback -l {host}, or read its server's journal"
    return [
        _mismatch("not_serving", host, f"{host} serves nothing (its unit is not active): {fix.format(host=host)}")
        for host, facts in s.facts.items()
        if facts and not facts.get("serving")
    ]


def _unknown_worker(s: _Seen) -> list:
    out = []
    for worker in s.unknown:
        key = worker["id"]
        if key != worker.get("url"):
            fix = "its worker list file still names it: run ansible-playbook playbooks/router.yml"
        else:
            fix = (
                f"it was added through the router's API: remove it (DELETE /workers/{worker.get('worker_id')} with "
                "the admin key) or add its host to the inventory group sglang_replicas and run playbooks/router.yml"
            )
        message = f"the router on {s.router_host} routes to {worker.get('url')}, which is not a replica in the inventory: {fix}"
        out.append(_mismatch("unknown_worker", key, message))
    return out


def _profiles_differ(s: _Seen) -> list:
    """A roll stopped on a rollback (rolled_back, roll_stopped_before), else the replicas' profiles compared."""
    stopped = _stopped_roll(s.serving)
    return (
        stopped
        if stopped is not None
        else _differ("profile_differs", "profile", {r["host"]: r["profile"] for r in s.serving})
    )


def _stacks_differ(s: _Seen) -> list:
    return _differ("stack_differs", "stack", {r["host"]: r["stack"] for r in s.serving if r["stack"] is not None})


# What fleet_view checks, in the order its mismatches are listed: the router, each replica as the router sees it and
# as it serves, the workers the inventory does not have, and whether the replicas serve the same profile and stack.
FLEET_CHECKS = (
    _router_missing,
    _router_unit,
    _router_unreachable,
    _router_not_ready,
    _not_in_router,
    _not_routed,
    _not_serving,
    _unknown_worker,
    _profiles_differ,
    _stacks_differ,
)


def _seen(router_host: str, router: dict, hosts: dict) -> _Seen:
    """The router's readiness, each member matched to the worker the router lists for it (by id, else by URL), and
    the listed workers no member matched."""
    readiness = router.get("readiness") or {}
    body = readiness.get("body") if isinstance(readiness.get("body"), dict) else {}
    status = readiness.get("status")
    listed = router.get("workers")
    by_url = {w.get("url"): key for key, w in (listed or {}).items()}
    replicas, workers, facts, matched = [], {}, {}, set()
    for member in router.get("members") or []:
        host, url = member["id"], member["url"]
        key = host if listed and host in listed else by_url.get(url)
        worker = (listed or {}).get(key) if key else None
        facts[host] = hosts.get(host)
        workers[host] = worker
        matched.add(key)
        replicas.append(_replica(host, url, facts[host] or {}, worker, listed is not None))
    return _Seen(
        router_host=router_host,
        router=router,
        ready=status == 200 if isinstance(status, int) and status > 0 else None,
        body=body,
        listed=listed,
        replicas=replicas,
        workers=workers,
        facts=facts,
        unknown=[{"id": key, **w} for key, w in sorted((listed or {}).items()) if key not in matched],
    )


def _replica(host: str, url: str, facts: dict, worker: dict | None, listed: bool) -> dict:
    """A replica's row: what its host serves and how the router sees it."""
    return {
        "host": host,
        "url": url,
        **{k: facts.get(k) for k in ("profile", "stack", "serving", "asked", "rolled_back")},
        "router_status": (worker or {}).get("status") or ("not listed" if listed else None),
        "healthy": worker.get("healthy") if worker else None,
        "load": worker.get("load") if worker else None,
    }


def fleet_view(router_host: str, router: dict, hosts: dict) -> dict:
    """The fleet behind one router as its user needs to see it, and every mismatch (FLEET_CHECKS) with the fix.

    router: what playbooks/status.yml read on the router host: "deployed" (its record exists), "url", "version",
    "service", "policy", "unit" ({"ActiveState", "SubState"}), "readiness" ({"status": HTTP status or None,
    "body"}), "workers" (worker_states() of GET /workers, None when it could not be read), "error" (why not),
    "members" ([{"id", "url"}]: the workers the inventory gives it). hosts: host -> {"profile", "serving",
    "stack", "asked", "rolled_back"} from each host's own status and record; a member missing there was not read.
    Returns {"router", "replicas", "unknown_workers", "profiles" (profile -> serving replicas), "mismatches"
    ([{"kind", "subject", "message"}]), "ok"}."""
    seen = _seen(router_host, router, hosts)
    mismatches = [m for check in FLEET_CHECKS for m in check(seen)]
    unit = router.get("unit") or {}
    profiles: dict = {}
    for r in seen.serving:
        profiles.setdefault(r["profile"], []).append(r["host"])
    return {
        "router": {
            "host": router_host,
            "url": router.get("url"),
            "version": router.get("version"),
            "policy": router.get("policy"),
            "unit": f"{unit.get('ActiveState')}/{unit.get('SubState')}" if unit else None,
            "ready": seen.ready,
            "readiness": seen.body or None,
            "error": router.get("error"),
        },
        "replicas": seen.replicas,
        "unknown_workers": seen.unknown,
        "profiles": profiles,
        "mismatches": mismatches,
        "ok": not mismatches,
    }


def _serial_size(value, servers: int) -> int:
    """One entry of Ansible's `serial` as a count (executor/playbook_executor.py, _get_serialized_batches, with
    utils/helpers.py pct_to_int): a percentage of the servers rounded down, at least 1; 0 or less: all."""
    text = str(value).strip()
    if text.endswith("%"):
        return int(float(text[:-1]) / 100.0 * servers) or 1
    return int(text)


def plan(hosts: list[str], group_of: dict[str, list[str]], serial, idle: list | tuple = ()) -> dict:
    """The batches of a rolling deploy in which a multi-node group is one server. ``hosts``: the hosts of the run in
    order; ``group_of``: host -> the hosts of its multi-node group in rank order (absent for a server of its own);
    ``serial``: a number, a percentage or a list of them, as Ansible's `serial`, counting servers. Returns
    {"order": the hosts, each group together and rank 0 first, "batches": hosts per batch (a `serial` list)}.
    A group that the run holds only in part is refused (its missing ranks would never join). ``idle``: hosts with
    nothing due (nothing_due); a server all of whose hosts are idle is left out of the order and the batches (a
    percentage still counts every server of the run)."""
    servers: list[list[str]] = []
    placed: set[str] = set()
    for host in hosts:
        if host in placed:
            continue
        members = list(group_of.get(host) or [host])
        missing = [h for h in members if h not in hosts]
        if missing:
            raise FleetError(
                f"the run holds {', '.join(h for h in members if h in hosts)} but not {', '.join(missing)} of the same"
                " multi-node group: a group restarts as one server; deploy all of its hosts (widen --limit) or none"
            )
        servers.append(members)
        placed.update(members)
    entries = list(serial) if isinstance(serial, (list, tuple)) else [serial]
    entries = entries or [0]
    rolled = [s for s in servers if not set(s) <= set(idle)]
    batches, i, left = [], 0, list(rolled)
    while left:
        size = _serial_size(entries[min(i, len(entries) - 1)], len(servers))
        take, left = (left, []) if size <= 0 else (left[:size], left[size:])
        batches.append(sum(len(s) for s in take))
        i += 1
    return {"order": [h for s in rolled for h in s], "batches": batches}
