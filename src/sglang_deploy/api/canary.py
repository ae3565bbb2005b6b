"""The stack canary (`sglang-deploy stack canary`): a candidate stack bundle deployed on one host, held by the quality
gate against the fingerprint of the stack that host runs now, on the same profile, and promoted into the inventory's
bundle (sglang_stack_bundle in a group_vars file) only when it passes. When it fails, the deploy's crash path puts
back the last good profile on its stack (the venv symlink too) and the inventory is left as it was.

Steps: read what the host serves; re-deploy that profile on the current stack without a benchmark (its gate keeps
a fresh fingerprint, the reference); read the stack the host's record names; deploy the candidate with the gate
pinned to that stack (sglang_quality_reference_stack); promote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sglang_deploy.launch import group_vars
from sglang_deploy.locks import stack_files
from sglang_deploy.locks.stack_lock import LockError
from sglang_deploy.paths import GROUP_VARS, STACKS

from . import operations
from .rollout import NO_BENCHMARK, Rollout
from .runner import EventHandler

BUNDLE_VAR = "sglang_stack_bundle"


class CanaryError(RuntimeError):
    """The canary could not start (a bad bundle or host, a current stack that fails its own gate): names the fix.
    Nothing was changed on the host beyond the re-deploy of what it served."""


@dataclass
class CanaryResult:
    host: str
    profile: str
    current: str  # the stack the host ran on (the gate's reference), as the store names it
    candidate: str  # the bundle tried
    passed: bool
    gate: dict | None  # the gate's summary on the candidate (compare.gate.summary), None where it did not run
    why: str | None  # why the candidate was refused
    into: str | None  # the group_vars file promoted into
    promoted: str | None  # its diff ('' when it named the candidate already); None when not promoted
    runs: list = field(default_factory=list)  # the RunResults: current re-checked, candidate
    emulated: bool = False

    @property
    def ok(self) -> bool:
        return self.passed


def default_target() -> Path:
    """Where a passing candidate is promoted without --into: the project's group_vars/all/stack.yml."""
    return GROUP_VARS / "all" / "stack.yml"


def canary(
    bundle: str,
    host: str,
    inventory=None,
    *,
    into: str | Path | None = None,
    promote: bool = True,
    benchmark: bool = False,
    stacks_dir: Path = STACKS,
    extravars: dict | None = None,
    on_event: EventHandler | None = None,
) -> CanaryResult:
    """Try stack ``bundle`` on ``host`` (one inventory host) and promote it into ``into`` when it passes the gate.
    ``benchmark``: also benchmark the candidate. CanaryError before anything is deployed for a bad bundle or host."""
    try:
        stack_files.load_bundle(bundle, stacks_dir)
    except LockError as exc:
        raise CanaryError(str(exc)) from exc
    target = Path(into) if into else default_target()
    if promote:
        try:
            group_vars.load(target)  # refused now, not after the canary ran
        except group_vars.GroupVarsError as exc:
            raise CanaryError(f"--into: {exc}") from exc
    if not host or any(c in host for c in ",:*!&[]~ "):
        raise CanaryError(f"the canary is one inventory host, not the pattern {host!r}")
    ev = {k: v for k, v in (extravars or {}).items() if k != BUNDLE_VAR}
    rollout = Rollout(inventory=inventory, limit=host, extravars=ev, on_event=on_event)
    serving = rollout.serving()
    if list(serving) != [host]:
        raise CanaryError(
            f"host {host!r} is not a server host of the inventory (found: {', '.join(serving) or 'none'})"
        )
    profile = serving[host]
    if not profile:
        raise CanaryError(f"{host} serves no profile and has no last good one: deploy a profile there first")
    rollout.phase(f"re-check {profile} on the current stack (its fingerprint is the reference)")
    before = rollout.deploy(profile, NO_BENCHMARK)
    if not before.ok:
        raise CanaryError(
            f"{profile} on {host}'s current stack did not deploy and pass its own gate, so the candidate was not"
            f" tried: {_why(before, host)}"
        )
    rollout.phase("read the current stack")
    found = operations.status(inventory=inventory, limit=host, on_event=on_event).hosts.get(host)
    current = found.last_good_stack if found else None
    if not current:
        raise CanaryError(f"{host}'s record names no stack after the re-check: deploy once more, then try again")
    rollout.phase(f"deploy {profile} on stack {bundle}, held against {current}")
    extra = {BUNDLE_VAR: bundle, "sglang_quality": "enforce", "sglang_quality_reference_stack": current}
    tried = rollout.deploy(profile, {**extra, **({} if benchmark else NO_BENCHMARK)})
    passed = tried.ok
    result = CanaryResult(
        host=host,
        profile=profile,
        current=current,
        candidate=bundle,
        passed=passed,
        gate=tried.gate.get(host),
        why=None if passed else _why(tried, host),
        into=None,
        promoted=None,
        runs=[before, tried],
        emulated=bool(found and found.emulated),
    )
    if passed and promote:
        rollout.phase(f"promote {bundle} into {target}")
        result.into, result.promoted = str(target), group_vars.set_variable(target, BUNDLE_VAR, bundle)
    return result


def _why(run, host: str) -> str:
    """Why ``run`` failed on ``host``: the gate's problems where it failed, else the first failure, else the run's
    own error."""
    mine = [f for f in [*run.rescued, *run.failures] if f.host == host]
    problems = next(((f.quality or {}).get("problems") for f in mine if (f.quality or {}).get("problems")), None)
    if problems:
        return "; ".join(problems)
    return mine[0].message if mine else run.error or f"the run ended {run.status} (rc {run.rc})"
