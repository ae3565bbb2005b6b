"""The controller's stack files: bundles and locks read from a stacks folder (links out of it refused), and the
wheelhouse: `stack fetch` (a lock's wheels, each checked against it) and `stack prune` (wheels no lock names).
Locking is stack_lock.py."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sglang_deploy.launch import profiles
from ansible_collections.sglang.deploy.plugins.module_utils import stack, stack_prune, wheel_fetch
from sglang_deploy.locks.stack_lock import LockError


@dataclass
class PruneResult:
    locks: list[Path]
    kept: int
    kept_bytes: int
    missing: int
    unreferenced: list[tuple[Path, int]]  # path in the wheelhouse, size in bytes
    deleted: bool


@dataclass
class FetchResult:
    wheelhouse: Path
    files: int
    downloaded: int
    bytes_downloaded: int
    total_bytes: int


def _inside(stacks_dir: Path, name: str, what: str) -> Path:
    """stacks_dir/name, refused when it leads out of stacks_dir (a link): a YAML error would echo lines of that file."""
    path = stacks_dir / name
    if not path.resolve().is_relative_to(stacks_dir.resolve()):
        raise LockError(
            f"{what} {name} in {stacks_dir} is a link to a file outside it: bundles and locks are read only there"
        )
    return path


def load_bundle(name: str, stacks_dir: Path) -> dict:
    """stacks_dir/<name>.yml; an unknown name lists the bundles there."""
    if not stack._NAME.match(name):
        raise LockError(
            f"bundle name {name[:60]!r}: lower-case letters, digits, '.' and '-' only (a file of {stacks_dir})"
        )
    path = _inside(stacks_dir, f"{name}.yml", "bundle")
    if not path.is_file():
        known = sorted(p.stem for p in stacks_dir.glob("*.yml") if not p.name.endswith(".lock.yml"))
        raise LockError(f"no bundle {name!r} in {stacks_dir}; bundles there: {', '.join(known) or 'none'}")
    try:
        return profiles.read_yaml(path)
    except profiles.ProfileError as exc:
        raise LockError(f"{exc} (a bundle is a mapping of keys, see stacks/README.md)") from exc


def load_lock(bundle: dict, stacks_dir: Path) -> dict:
    """The lock file of a locked bundle, checked against the bundle's lock id."""
    if not bundle.get("lock"):
        raise LockError(f"bundle {bundle.get('name')} is not locked: run sglang-deploy stack lock {bundle.get('name')}")
    problems = stack.lock_file_problems(bundle)
    if problems:
        raise LockError(f"bundle {bundle['name']}: {problems[0]}")
    path = _inside(stacks_dir, bundle["lock"]["file"], "lock")
    try:
        data = profiles.read_yaml(path)
    except profiles.ProfileError as exc:
        raise LockError(f"lock of bundle {bundle['name']}: {exc}") from exc
    problems = stack.check_lock(bundle, data)
    if problems:
        raise LockError("; ".join(problems))
    return data


def fetch(
    lock_data: dict,
    wheelhouse: Path,
    *,
    jobs: int = 4,
    max_bytes: int = wheel_fetch.MAX_WHEEL_BYTES,
    timeout: float = wheel_fetch.FETCH_TIMEOUT,
) -> FetchResult:
    """Download every wheel of a lock into wheelhouse (kept when already there with the right sha256), each
    checked against the lock (wheel_fetch.fetch_wheels, the rule the role's controller check uses too); a wheel stops past
    max_bytes, the whole fetch at timeout seconds."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    entries = stack.lock_files(lock_data)
    result = wheel_fetch.fetch_wheels(str(wheelhouse), entries, jobs, max_bytes=max_bytes, timeout=timeout)
    if result["problems"]:
        hint = (
            f" ({result['stopped']} stopped by the size cap or the deadline, leaving no file: raise stack fetch's "
            "--max-wheel-gb or --timeout only for a wheel known to be that large or a slow mirror)"
            if result["stopped"]
            else ""
        )
        raise LockError("; ".join(result["problems"]) + hint)
    total = sum((wheelhouse / entry["file"]).stat().st_size for entry in entries)
    return FetchResult(wheelhouse, len(entries), result["downloaded"], result["bytes"], total)


def prune(wheelhouse: Path, stacks_dirs: list[Path], *, delete: bool = False) -> PruneResult:
    """The wheels in wheelhouse that no lock (*.lock.yml) in stacks_dirs names, deleted only with delete. A lock that
    cannot be read stops it before anything is deleted: the wheels it names are not known."""
    locks = sorted(path for folder in stacks_dirs for path in folder.glob("*.lock.yml"))
    referenced: set[str] = set()
    for path in locks:
        try:
            data = profiles.read_yaml(_inside(path.parent, path.name, "lock"))
            referenced.update(entry["file"] for entry in stack.lock_files(data))
        except (LockError, profiles.ProfileError, AttributeError, KeyError, TypeError) as exc:
            raise LockError(
                f"{path}: not a readable lock ({exc.__class__.__name__}: {exc}); nothing pruned: repair or move it"
            ) from exc
    if delete and not locks:
        raise LockError(
            f"no lock (*.lock.yml) in {', '.join(map(str, stacks_dirs))}: every wheel in {wheelhouse} would go;"
            " nothing deleted: give --stacks-dir the folder of your locks"
        )
    found = (
        [Path(p) for p in stack_prune.unreferenced_wheels(str(wheelhouse), referenced)] if wheelhouse.is_dir() else []
    )
    unreferenced = [(path, path.stat().st_size) for path in found]
    present = [wheelhouse / name for name in referenced if (wheelhouse / name).is_file()]
    if delete and found:
        stack_prune.remove_wheels(str(wheelhouse), [str(path) for path in found])
    return PruneResult(
        locks=locks,
        kept=len(present),
        kept_bytes=sum(path.stat().st_size for path in present),
        missing=len(referenced) - len(present),
        unreferenced=unreferenced,
        deleted=delete,
    )


def default_wheelhouse() -> Path:
    """SGLANG_DEPLOY_WHEELHOUSE, else ~/.cache/sglang-deploy/wheelhouse."""
    return Path(os.environ.get("SGLANG_DEPLOY_WHEELHOUSE") or Path.home() / ".cache" / "sglang-deploy" / "wheelhouse")
