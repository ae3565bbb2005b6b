"""Running a playbook of the project through ansible-runner (run_playbook): a fresh private data dir under
WORK/.runner/ (the project's, gitignored; the current folder's for the installed collection) per run, with
project_dir=REPO (sglang_deploy.paths), so the project's ansible.cfg, roles, library and collections apply. Extra
variables are data, never templates: every string in them is written
`!unsafe` (a profile name a host reported could otherwise run a lookup on the controller), the public ones to the
data dir's env/extravars (which ansible-runner passes as `-e @file`), the secret ones to a 0600 file passed as
`-e @file` (ansible-runner's `cmdline`, so only the path is recorded), deleted when the run ends; the run's files
and events are scrubbed of them (sglang_deploy.api.redaction).

Progress: `on_event(event)` gets every ansible-runner event; when it also has a `tick()` method, that is called
about once a second while ansible runs (the heartbeat of a long task).
"""

from __future__ import annotations

import os
import re
import secrets as _secrets
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Callable

import yaml

from sglang_deploy.paths import REPO, WORK, require_project

from .redaction import redact, scrub_tree, secret_forms, secret_values, split_secrets
from .results import RunResult, parse_events

RUNNER_DIR = WORK / ".runner"
KEEP_RUNS = 50  # private data dirs kept under RUNNER_DIR, newest first
DEFAULT_INVENTORY = REPO / "inventory" / "lab.yml"

EventHandler = Callable[[dict], object]


def _unsafe_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    # ansible-core reads `!unsafe ""` as None; an empty string holds no template.
    return dumper.represent_scalar("!unsafe" if value else "tag:yaml.org,2002:str", value, style='"')


def _plain_keys(dumper: yaml.SafeDumper, value: dict) -> yaml.Node:
    pairs = [
        (
            yaml.ScalarNode("tag:yaml.org,2002:str", k) if isinstance(k, str) else dumper.represent_data(k),
            dumper.represent_data(v),
        )
        for k, v in value.items()
    ]
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs)


class _UnsafeDumper(yaml.SafeDumper):
    """YAML whose every string value is tagged !unsafe (Ansible never templates it); keys stay plain names."""

    yaml_representers = {**yaml.SafeDumper.yaml_representers, str: _unsafe_str, dict: _plain_keys}


def write_vars(path: Path, variables: dict) -> None:
    """Write extra variables for `-e @path` as unsafe YAML, the file created 0600 (it may hold secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.dump(variables, fh, Dumper=_UnsafeDumper, allow_unicode=True, sort_keys=False)


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


def _var_files(pdd: Path, public: dict, hidden: dict, secret_file: Path) -> dict:
    """Write the extra variables (public to env/extravars, hidden to ``secret_file``); ansible_runner.run's
    arguments for them."""
    if public:
        (pdd / "env").mkdir(mode=0o700)
        write_vars(pdd / "env" / "extravars", public)
    if not hidden:
        return {}
    write_vars(secret_file, hidden)
    return {"cmdline": f"-e @{secret_file}"}


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

    secret_file = pdd / "secret-extravars.yml"
    kwargs = _var_files(pdd, public, hidden, secret_file)
    t0 = time.monotonic()
    try:
        r = ansible_runner.run(
            private_data_dir=str(pdd),
            project_dir=str(REPO),
            playbook=playbook,
            inventory=inventory_file,
            limit=limit,
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
