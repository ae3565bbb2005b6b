"""Python API over ansible-runner: deploy, compare, status, rollback, lab, tune.

Every run gets a fresh private data dir under REPO/.runner/ (gitignored) with project_dir=REPO (the project
folder, sglang_deploy.paths), so the project's ansible.cfg, roles, library and collections apply. Results are
read from events, never from stdout: per-host outcome from `playbook_on_stats`, failures from `runner_on_failed`
/ `runner_on_unreachable` (with the fields a module returns, e.g. sglang_profile's `unknown_profile`), data the
playbooks publish with `set_stats` from the stats event's `artifact_data` (`sglang_benchmark`,
`sglang_benchmark_file`, `sglang_status`).

Secrets: an extra variable whose name, or the name of any key nested in it, looks secret (api_key, token,
password, secret...: sglang_deploy.secret_names) goes to a 0600 file passed as `-e @file` (ansible-runner's
`cmdline`, so only the path is recorded) and deleted when the run ends; as a safety net every file and event of
the run is then scrubbed of the secret values in each form they can take there (secret_forms: escaped, quoted,
JSON inside JSON).

Progress: `on_event(event)` gets every ansible-runner event plus `sglang_deploy_phase` events from compare();
when it also has a `tick()` method, that is called about once a second while ansible runs (the heartbeat of
a long task). The command line's `sglang_deploy.cli.progress.Progress` is such a handler.

Nothing here prints: the command line (sglang_deploy.cli) formats what these functions return.
"""

from __future__ import annotations

import json
import os
import re
import secrets as _secrets
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from sglang_deploy import fleet
from sglang_deploy import profiles as prof
from sglang_deploy.tune import (
    Budget,
    Deployer,
    FAILED,
    HostFacts,
    OK,
    Outcome,
    Planned,
    Search,
    SearchError,
    Store,
    Workload,
    check_promotion,
    expand,
    level_metrics,
    limits_broken,
    load_search,
    plan,
    promote_profile,
    promotion_body,
    run_search,
)
from sglang_deploy.paths import REPO, require_project
from sglang_deploy.host.readiness import parse_systemctl_show
from sglang_deploy.secret_names import is_secret_name, url_passwords

RUNNER_DIR = REPO / ".runner"
KEEP_RUNS = 50  # private data dirs kept under RUNNER_DIR, newest first
DEFAULT_INVENTORY = REPO / "inventory" / "lab.yml"
REDACTED = "[redacted secret]"
# The tags of site.yml's phases, for deploy(tags=...).
PHASES = ("install", "model", "configure", "restart", "benchmark")
PHASE_EVENT = "sglang_deploy_phase"

EventHandler = Callable[[dict], object]


# --------------------------------------------------------------------------------------------------
# Results


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
        """host -> benchmark result dict (bench.run_benchmark's), from set_stats `sglang_benchmark`."""
        return self.data.get("sglang_benchmark") or {}

    @property
    def result_files(self) -> dict:
        """host -> controller path of the benchmark result JSON, from set_stats `sglang_benchmark_file`."""
        return self.data.get("sglang_benchmark_file") or {}

    @property
    def router_benchmarks(self) -> dict:
        """router host -> benchmark result through its endpoint (set_stats `sglang_fleet_benchmark`): the fleet's
        aggregate, after a roll with sglang_fleet_benchmark."""
        return self.data.get("sglang_fleet_benchmark") or {}

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

    @property
    def serving(self) -> bool:
        return self.active_state == "active" and self.profile is not None

    @property
    def stack(self) -> str | None:
        """The stack bundle and its id (bundle-id); None without a stack manifest (the lab)."""
        m = self.manifest or {}
        return f"{m.get('bundle', '?')}-{m.get('bundle_id', '?')}" if m else None


@dataclass
class StatusResult:
    """status(): host -> HostStatus, the run that read it (failures of unreachable hosts), and per router host
    (inventory group sglang_router) the fleet behind it: fleet.fleet_view() (the router's unit, readiness and
    workers, what each replica serves, the mismatches)."""

    hosts: dict
    run: RunResult
    fleet: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.run.ok

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "hosts": {h: {**asdict(s), "serving": s.serving, "stack": s.stack} for h, s in self.hosts.items()},
            "fleet": self.fleet,
            "failures": [asdict(f) for f in self.run.failures],
            "error": self.run.error,
            "artifacts": self.run.artifacts,
        }


# --------------------------------------------------------------------------------------------------
# Event parsing (pure)


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
        unit = parse_systemctl_show(raw.get("unit") or "")
        local = raw.get("local") or {}
        server = local.get("sglang_server") or {}  # the sglang_server role's local fact
        out[host] = HostStatus(
            host=host,
            profile=server.get("profile") if unit.get("LoadState") == "loaded" else None,
            active_state=unit.get("ActiveState"),
            sub_state=unit.get("SubState"),
            last_good_profile=server.get("last_good_profile"),
            manifest=raw.get("manifest") or None,
            emulated=bool((local.get("sglang_host") or {}).get("emulated")),
            asked=server.get("asked"),
            rolled_back=server.get("rolled_back") or None,
        )
    return out


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


# --------------------------------------------------------------------------------------------------
# Secrets


def split_secrets(extravars: dict) -> tuple[dict, dict]:
    """(public, secret): a variable is secret when its name or any nested key names a secret, or a value in it is
    a URL with a password."""

    def secret(key, value) -> bool:
        if is_secret_name(key):
            return True
        if isinstance(value, str):
            return bool(url_passwords(value))
        if isinstance(value, dict):
            return any(secret(k, v) for k, v in value.items())
        if isinstance(value, list):
            return any(secret("", v) for v in value)
        return False

    public, hidden = {}, {}
    for key, value in extravars.items():
        (hidden if secret(key, value) else public)[key] = value
    return public, hidden


def secret_values(secret_vars: dict) -> list:
    """The clear-text values to scrub: every string under a secret key and every URL's password (at least 4
    characters each)."""
    out: list = []

    def walk(value, under_secret: bool):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, under_secret or is_secret_name(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, under_secret)
        elif under_secret and value not in (None, "") and len(str(value)) >= 4:
            out.append(str(value))
        if isinstance(value, str):
            out.extend(p for p in url_passwords(value) if len(p) >= 4)

    walk(secret_vars, False)
    return sorted(set(out), key=len, reverse=True)


def secret_forms(values: list) -> list:
    """Each value as it can appear in a run's files and events, longest first: raw, Python repr (either quote),
    shell-quoted, YAML double- and single-quoted (\\u/\\x escapes or raw UTF-8), and each of those JSON-escaped
    once or twice (a JSON string inside a JSON event), ASCII-escaped or not."""
    import shlex

    import yaml

    forms: set = set()
    for v in values:
        base = {v, repr(v)[1:-1], repr(v + '"')[1:-2], shlex.quote(v), v.replace("'", "''")}
        for unicode in (False, True):
            dumped = yaml.safe_dump(v, default_style='"', allow_unicode=unicode, width=1 << 30)
            base.add(dumped.strip()[1:-1])
        for form in base:
            forms.add(form)
            for ascii_only in (True, False):
                once = json.dumps(form, ensure_ascii=ascii_only)[1:-1]
                forms.update((once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]))
    return sorted(forms, key=len, reverse=True)


def redact(obj, forms: list):
    """obj with every one of the forms (secret_forms) replaced by REDACTED, in strings inside dicts and lists."""
    if not forms:
        return obj
    if isinstance(obj, str):
        for form in forms:
            obj = obj.replace(form, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {k: redact(v, forms) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, forms) for v in obj]
    return obj


def scrub_tree(root: Path, forms: list) -> int:
    """Replace every one of the forms (secret_forms) in every file under root; returns the files changed."""
    needles = [form.encode() for form in forms]
    changed = 0
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        blob = path.read_bytes()
        new = blob
        for n in needles:
            new = new.replace(n, REDACTED.encode())
        if new != blob:
            path.write_bytes(new)
            changed += 1
    return changed


# --------------------------------------------------------------------------------------------------
# Running a playbook


def _new_private_dir(kind: str) -> Path:
    RUNNER_DIR.mkdir(parents=True, exist_ok=True)
    for old in sorted(RUNNER_DIR.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP_RUNS - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RUNNER_DIR / f"{stamp}-{kind}-{_secrets.token_hex(3)}"
    path.mkdir(mode=0o700)
    return path


def inventory_path(inventory) -> str:
    """The absolute path of an inventory (default: the lab's); FileNotFoundError naming the fix when it is not an
    inventory file or folder (a device or FIFO would hang or fail ansible-playbook without a word)."""
    path = Path(inventory) if inventory else DEFAULT_INVENTORY
    if not path.exists():
        raise FileNotFoundError(f"inventory {path} does not exist: give an inventory file or folder with -i")
    if not (path.is_file() or path.is_dir()):
        raise FileNotFoundError(
            f"inventory {path} is not a regular file or a folder: give an inventory file (YAML or INI) or folder with -i"
        )
    return str(path.resolve())


def _path_with_this_python() -> str:
    """PATH with this interpreter's bin folder first: ansible-playbook of the venv, activated or not."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])


def _tail(path: Path, lines: int = 15) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return "\n".join(text.strip().splitlines()[-lines:]) or None


def run_playbook(
    playbook: str,
    *,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    on_event: EventHandler | None = None,
    kind: str = "run",
    profile: str | None = None,
    tags: str | None = None,
) -> RunResult:
    """Run a playbook of the repo through ansible_runner.run and read its events into a RunResult."""
    import signal

    import ansible_runner
    from ansible_runner.utils import signal_handler

    require_project()
    inventory_file = inventory_path(inventory)
    pdd = _new_private_dir(kind)
    public, hidden = split_secrets(dict(extravars or {}))
    scrub = secret_forms(secret_values(hidden))
    events: list = []
    tick = getattr(on_event, "tick", None)
    # Ctrl-C / SIGTERM cancel the run (ansible-runner's handler, as with its default cancel_callback); the
    # caller's handlers come back when the run ends.
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    interrupted = signal_handler()  # None outside the main thread: nothing installed

    def handle(ev: dict) -> bool:
        events.append(ev)
        if on_event:
            on_event(redact(ev, scrub))
        return True

    def cancel() -> bool:
        if tick:
            tick()
        return bool(interrupted and interrupted())

    kwargs = {}
    secret_file = pdd / "secret-extravars.json"
    if hidden:
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(hidden, fh)
        kwargs["cmdline"] = f"-e @{secret_file}"
    t0 = time.monotonic()
    try:
        r = ansible_runner.run(
            private_data_dir=str(pdd),
            project_dir=str(REPO),
            playbook=playbook,
            inventory=inventory_file,
            limit=limit,
            extravars=public or None,
            tags=tags,
            quiet=True,
            event_handler=handle,
            cancel_callback=cancel,
            settings={"pexpect_timeout": 1},
            envvars={"PATH": _path_with_this_python()},
            **kwargs,
        )
    finally:
        if interrupted:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
        secret_file.unlink(missing_ok=True)
        scrub_tree(pdd, scrub)
    hosts, failures, rescued, data = parse_events(redact(events, scrub))
    result = RunResult(
        playbook=playbook,
        status=r.status,
        rc=r.rc if r.rc is not None else -1,
        hosts=hosts,
        failures=failures,
        rescued=rescued,
        data=data,
        artifacts=str(r.config.artifact_dir),
        elapsed_s=time.monotonic() - t0,
        profile=profile,
    )
    if result.rc != 0 and not failures:
        result.error = _tail(Path(r.config.artifact_dir) / "stdout") or f"ansible-playbook exited {result.rc}"
    elif not hosts:
        result.error = "no host of the inventory matched" + (f" --limit {limit}" if limit else "")
    return result


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
    return run_playbook(
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
    run = run_playbook("playbooks/status.yml", inventory=inventory, limit=limit, on_event=on_event, kind="status")
    hosts = parse_status(run.data)
    return StatusResult(hosts=hosts, run=run, fleet=parse_fleet(run.data, hosts))


def rollback(
    inventory=None, limit: str | None = None, extravars: dict | None = None, on_event: EventHandler | None = None
) -> RunResult:
    """Re-deploy each host's last good profile (playbooks/rollback.yml, no benchmark)."""
    return run_playbook(
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
    return run_playbook(
        "playbooks/lab.yml",
        inventory=inventory,
        extravars={**(extravars or {}), "lab_state": state},
        on_event=on_event,
        kind=f"lab-{state}",
    )


def compare(
    profiles: list,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    restore: str | None = None,
    on_event: EventHandler | None = None,
):
    """Deploy and benchmark each profile in turn on the same hosts, then restore what served before. Behind an smg
    router (inventory group sglang_router) each profile is rolled across the replicas, benchmarked per host and then
    through the router (sglang_fleet_benchmark).

    The restored profile is `restore`, or per host the profile status() found serving (else its last good one);
    the restore deploys without a benchmark. Returns a compare_report.Comparison; a profile that failed to deploy is
    in it with its failures and no figures.
    """
    from sglang_deploy import compare_report

    if len(profiles) < 2:
        raise ValueError("compare needs at least two profiles")
    phase = _phase_emitter(on_event)
    before: dict = {}
    if restore is None:
        phase("read what each host serves")
        found = status(inventory=inventory, limit=limit, on_event=on_event)
        before = {h: (s.profile if s.serving else s.last_good_profile) for h, s in found.hosts.items()}
    runs = {}
    # On a fleet each profile is also benchmarked through the router (playbooks/deploy.yml), and each replica restarts
    # and is benchmarked out of the router even when it serves the profile already, unless -e says otherwise.
    measured = {"sglang_fleet_benchmark": True, "sglang_fleet_force_restart": True, **(extravars or {})}
    for i, name in enumerate(profiles, 1):
        phase(f"profile {i}/{len(profiles)}: {name}")
        runs[name] = deploy(name, inventory=inventory, limit=limit, extravars=measured, on_event=on_event)
        if runs[name].status == "canceled":  # Ctrl-C: stop here, restore nothing
            return compare_report.build_comparison(profiles, runs, settings=_bench_settings(extravars))
    restores = []
    no_benchmark = {**(extravars or {}), "sglang_benchmark_enabled": False}
    if restore is not None:
        phase(f"restore {restore}")
        restores.append(deploy(restore, inventory=inventory, limit=limit, extravars=no_benchmark, on_event=on_event))
    else:
        by_profile: dict = {}
        for host, name in sorted(before.items()):
            if name:
                by_profile.setdefault(name, []).append(host)
        for name, hosts in by_profile.items():
            phase(f"restore {name} on {', '.join(hosts)}")
            restores.append(
                deploy(name, inventory=inventory, limit=",".join(hosts), extravars=no_benchmark, on_event=on_event)
            )
    return compare_report.build_comparison(profiles, runs, restores=restores, settings=_bench_settings(extravars))


def _bench_settings(extravars: dict | None) -> dict:
    return {k: v for k, v in (extravars or {}).items() if k.startswith("sglang_benchmark_")}


def _phase_emitter(on_event: EventHandler | None):
    def phase(text: str) -> None:
        if on_event:
            on_event({"event": PHASE_EVENT, "event_data": {"phase": text}})

    return phase


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:40] or "x"


def parse_extravars(items: list) -> dict:
    """-e items in order, later ones winning: key=value (value read as YAML: numbers, booleans, [lists]; kept
    a string for a secret key), @file.yml (a mapping), or an inline YAML/JSON mapping. ValueError if bad."""
    out: dict = {}
    for item in items or []:
        if item.startswith("@"):
            path = Path(item[1:]).expanduser()
            try:
                text = prof.read_text(path)
            except prof.ProfileError as exc:
                raise ValueError(f"-e {item}: {exc}") from exc
            if text.startswith("$ANSIBLE_VAULT"):
                raise ValueError(
                    f"-e {item}: vault-encrypted files are not read here; keep vaulted secrets in "
                    "group_vars/ or inventory vars, where ansible decrypts them"
                )
            doc = _yaml_mapping(text, f"-e {item}")
        elif item.lstrip().startswith("{"):
            doc = _yaml_mapping(item, "-e")
        else:
            key, sep, value = item.partition("=")
            if not sep or not key.isidentifier():
                raise ValueError(f"-e {item!r}: expected key=value, @file.yml or a YAML/JSON mapping")
            if is_secret_name(key):
                doc = {key: value}
            else:
                try:
                    doc = {key: prof.parse_yaml(value, f"-e {key}") if value else value}
                except prof.ProfileError as exc:
                    if exc.problems[0][0] == "yaml-duplicate-key":
                        raise ValueError(str(exc)) from exc
                    doc = {key: value}  # not YAML: the text itself
        out.update(doc)
    return out


def _yaml_mapping(text: str, what: str) -> dict:
    try:
        doc = prof.parse_yaml(text, what)
    except prof.ProfileError as exc:
        raise ValueError(str(exc)) from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"{what}: expected a mapping of variables")
    return doc


def unknown_profile(results: list) -> tuple[str, list] | None:
    """(name, available profile names) when a run failed because a profile name is not in sglang_profiles."""
    for r in results:
        for f in r.failures:
            if f.unknown_profile is not None:
                return f.unknown_profile, list(f.available_profiles or [])
    return None


# --------------------------------------------------------------------------------------------------
# Flag-matrix search: tune() reads the hosts' facts (playbooks/tune_facts.yml, read-only), prunes candidates with
# the rules, deploys and benchmarks the rest one by one with deploy() (the playbook's rollback handles a crashing
# candidate), stores each result as it completes, restores what served before and writes the report.
# Logic: sglang_deploy.tune and tune_report.


TUNE_FACTS_PLAYBOOK = "playbooks/tune_facts.yml"
TUNE_READY_ACTION = "sglang_ready"


@dataclass
class TuneResult:
    """tune(): the outcome (None when the facts could not be read), where the report is, the runs around it."""

    search: Search
    outcome: Outcome | None = None
    report_dir: Path | None = None
    facts_run: RunResult | None = None
    restores: list = field(default_factory=list)
    promoted: dict | None = None  # {name, file, diff, candidate}
    error: str | None = None

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and self.outcome is not None
            and not self.outcome.cancelled
            and all(r.ok for r in self.restores)
        )

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "error": self.error,
            "report_dir": str(self.report_dir) if self.report_dir else None,
            "outcome": self.outcome.to_dict() if self.outcome else None,
            "promoted": self.promoted,
            "restores": [r.to_dict() for r in self.restores],
        }


def tune_host_facts(data: dict) -> list:
    """HostFacts per host from the set_stats data of playbooks/tune_facts.yml."""
    out = []
    for host, raw in sorted((data.get("sglang_tune_facts") or {}).items()):
        facts = {k: v for k, v in (raw.get("rule_facts") or {}).items() if v not in (None, "")}
        out.append(
            HostFacts(
                host=host,
                profiles=raw.get("profiles") or {},
                settings=raw.get("settings") or {},
                sglang_version=str(raw.get("sglang_version")),
                rule_facts=facts,
                stack=raw.get("stack") or {},
                emulated=bool(raw.get("emulated")),
            )
        )
    return out


def _failure_kind(ready_results: list) -> tuple[str, list]:
    """(kind, journal lines) from the failed sglang_ready result: crash (the process died), garbage (a sanity
    check failed), not_ready (timeout); deploy_error when no readiness wait failed."""
    for res in ready_results:
        if res.get("journal"):
            return "crash", list(res["journal"])[-25:]
        if res.get("failed_check"):
            return "garbage", []
        if res.get("stage"):
            return "not_ready", []
    return "deploy_error", []


def _tune_deployer(search: Search, inventory, limit, extravars: dict, on_event) -> Deployer:
    """The search's deploy (a Deployer): deploy() of the candidate's flat profile with the workload's benchmark vars."""

    def deploy_candidate(p: Planned, workload: Workload, stage: str, repeat: int) -> dict:
        ready_failed: list = []

        def handler(ev: dict):
            d = ev.get("event_data") or {}
            if ev.get("event") == "runner_on_failed" and str(
                d.get("resolved_action") or d.get("task_action") or ""
            ).endswith(TUNE_READY_ACTION):
                ready_failed.append(d.get("res") or {})
            if on_event:
                return on_event(ev)
            return True

        if hasattr(on_event, "tick"):
            handler.tick = on_event.tick  # type: ignore[attr-defined]
        ev = {**extravars, **search.vars, **workload.extravars(), "sglang_profiles": {p.profile: p.body}}
        r = deploy(p.profile, inventory=inventory, limit=limit, extravars=ev, on_event=handler)
        if r.status == "canceled":
            raise KeyboardInterrupt
        fields = {"emulated": r.emulated, "artifacts": r.artifacts, "deploy_s": round(r.elapsed_s, 3)}
        if r.ok:
            metrics = {host: level_metrics(res) for host, res in r.benchmarks.items()}
            failed_requests = sum(m.get("failed") or 0 for res in r.benchmarks.values() for m in res.get("levels", []))
            if not metrics or failed_requests:
                return {
                    **fields,
                    "status": FAILED,
                    "kind": "benchmark",
                    "metrics": metrics,
                    "error": f"{failed_requests} benchmark requests failed" if failed_requests else "no benchmark",
                }
            return {
                **fields,
                "status": OK,
                "metrics": metrics,
                "results": {h: res.get("started_at") for h, res in r.benchmarks.items()},
            }
        kind, journal = _failure_kind(ready_failed)
        message = "\n".join(f"{f.host}: {f.task}: {f.message}" for f in r.failures) or r.error or "deploy failed"
        return {**fields, "status": FAILED, "kind": kind, "error": message, "journal": journal}

    return deploy_candidate


def _tune_restore(before: dict, planned: list, inventory, extravars: dict, on_event) -> list:
    """Deploy (no benchmark) what each host served before the search; a tune candidate by its flat profile."""
    no_benchmark = {**extravars, "sglang_benchmark_enabled": False}
    bodies = {p.profile: p.body for p in planned if p.profile}
    by_profile: dict = {}
    for host, name in sorted(before.items()):
        if name:
            by_profile.setdefault(name, []).append(host)
    runs = []
    for name, hosts in by_profile.items():
        ev = {**no_benchmark, "sglang_profiles": {name: bodies[name]}} if name in bodies else no_benchmark
        runs.append(deploy(name, inventory=inventory, limit=",".join(hosts), extravars=ev, on_event=on_event))
    return runs


def tune(
    search_file,
    inventory=None,
    limit: str | None = None,
    extravars: dict | None = None,
    budget: str | None = None,
    out_dir=None,
    restore: bool = True,
    promote: str | None = None,
    promote_into=None,
    candidate: str | None = None,
    on_event=None,
    on_plan: Callable | None = None,
    over_limit: bool = False,
    promote_hint: str | None = None,
) -> TuneResult:
    """Run the search of ``search_file`` (path or Search). SearchError / ValueError for bad input.
    ``over_limit`` lets ``candidate`` be one that broke a limit; ``promote_hint``: the command report.md gives
    for promoting the winner."""
    from sglang_deploy import tune_report
    from sglang_deploy.paths import RESULTS

    search = search_file if isinstance(search_file, Search) else load_search(search_file)
    budget_obj = Budget.parse(budget)
    store = Store(Path(out_dir) if out_dir else RESULTS / f"tune-{search.name}")
    store.check()
    try:
        tune_report.check(store.report_dir)
    except ValueError as exc:
        raise SearchError(str(exc)) from exc
    promote_into = promote_into or prof.PROFILES_FILE
    if promote:  # refused before the search runs, not after it
        check_promotion(promote, promote_into)
    extravars = dict(extravars or {})
    phase = _phase_emitter(on_event)
    result = TuneResult(search=search)

    phase("read the hosts' facts (read-only)")
    facts_run = run_playbook(
        TUNE_FACTS_PLAYBOOK,
        inventory=inventory,
        limit=limit,
        extravars={**extravars, **search.vars},
        on_event=on_event,
        kind="tune-facts",
    )
    result.facts_run = facts_run
    hosts = tune_host_facts(facts_run.data)
    if not facts_run.ok or not hosts:
        result.error = "could not read the hosts' facts: " + (
            "; ".join(f"{f.host}: {f.message}" for f in facts_run.failures) or facts_run.error or "no host"
        )
        return result
    candidates, excluded = expand(search)
    # Planned only as far as the budget reaches: enough runnable candidates, or its time.
    deadline = time.monotonic() + budget_obj.seconds if budget_obj.seconds else None
    planned = plan(search, candidates, hosts, time.monotonic, budget_obj.candidates, deadline)
    unplanned = len(candidates) - len(planned)
    preview = Outcome(search=search, planned=planned, excluded=excluded, budget=budget_obj.text, unplanned=unplanned)
    if on_plan:
        on_plan(preview)

    before: dict | None = None
    deploy_one = _tune_deployer(search, inventory, limit, extravars, on_event)

    def deploy_first_reads_status(p, workload, stage, repeat):
        nonlocal before
        if before is None and restore:
            # What served when the search began: recorded by its first run, so a resumed run restores that and
            # not the candidate an interrupted run left serving.
            before = store.meta().get("before")
            if before is None:
                phase("read what each host serves")
                found = status(inventory=inventory, limit=limit, on_event=on_event)
                before = {h: (s.profile if s.serving else s.last_good_profile) for h, s in found.hosts.items()}
                store.update_meta(before=before)
        return deploy_one(p, workload, stage, repeat)

    outcome = run_search(
        search, planned, excluded, deploy_first_reads_status, store, budget_obj, on_progress=phase, unplanned=unplanned
    )
    result.outcome = outcome
    if before is None and restore:  # nothing run now, but an interrupted run left a candidate serving
        before = store.meta().get("before")
    if before and not outcome.cancelled:
        phase("restore what served before")
        result.restores = _tune_restore(before, planned, inventory, extravars, on_event)
        if all(r.ok for r in result.restores):
            store.update_meta(before=None)
    try:
        result.report_dir = tune_report.write(outcome, store.report_dir, promote_hint)
    except ValueError as exc:  # a link planted during the search
        result.error = f"the report was not written: {exc}"
        return result
    if promote:
        chosen = _tune_chosen(outcome, candidate)
        broken = limits_broken(outcome, chosen)
        if broken and not over_limit:
            raise SearchError(
                f"--candidate {candidate} broke a limit of the search ({'; '.join(broken)}): add --over-limit to "
                "promote it anyway"
            )
        body = promotion_body(search, chosen, outcome, hosts[0].profiles)
        diff, _ = promote_profile(promote_into, promote, body, hosts[0].profiles)
        result.promoted = {"name": promote, "file": str(promote_into), "diff": diff, "candidate": chosen.key}
        if broken:
            result.promoted["warning"] = f"candidate {candidate} broke a limit: {'; '.join(broken)}"
    return result


def _tune_chosen(outcome: Outcome, candidate: str | None) -> Planned:
    """The candidate to promote: --candidate (number or key prefix), else the first objective's winner."""
    if candidate:
        hits = [
            p
            for p in outcome.runnable
            if str(p.candidate.index) == candidate.lstrip("#") or (len(candidate) >= 4 and p.key.startswith(candidate))
        ]
        ok = {r["candidate_key"] for r in outcome.records if r["status"] == OK}
        if len(hits) != 1 or hits[0].key not in ok:
            raise SearchError(f"--candidate {candidate}: not one candidate measured without failure")
        return hits[0]
    if outcome.winner is None:
        d = outcome.decisions.get(outcome.search.objectives[0].name) or {}
        raise SearchError(f"no winner to promote ({d.get('reason', 'nothing measured')}); pick one with --candidate N")
    return outcome.winner
