"""Model locks on the controller: write models/<name>.lock.yml from a checkpoint folder or from a Hub repository at
a commit, read one back (checked by model.validate), and check a folder against one.

From the Hub the lock takes each file's size and sha256 from the Hub's LFS metadata (the weights); a file stored in
git (config.json, the tokenizer) has only a git blob id there, so it is downloaded once and hashed here. A branch or
tag given as the revision is resolved to its commit, which the lock records. What runs on the host is in model.py.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from sglang_deploy import paths
from sglang_deploy.host import model
from sglang_deploy import profiles
from sglang_deploy.host.bench.sweep import write_file
from sglang_deploy.host.wheel_fetch import sha256_file

MODELS = paths.REPO / "models"
_NO_HUB = "huggingface_hub is not installed on the controller: pip install 'sglang-deploy[hub]' (or huggingface_hub), or lock a folder"


class ModelLockError(Exception):
    """A lock that cannot be made, read or matched; the message names the file or the fix, never a token."""


@dataclass
class Locked:
    path: Path
    lock: dict
    hashed_here: int  # files hashed on this machine (the rest: the Hub's LFS sha256)


def _masked(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def default_cache() -> Path:
    """SGLANG_DEPLOY_MODEL_CACHE, else ~/.cache/sglang-deploy/models: where Hub checkpoints land on the controller."""
    return Path(os.environ.get("SGLANG_DEPLOY_MODEL_CACHE") or Path.home() / ".cache" / "sglang-deploy" / "models")


def lock_path(name: str, models_dir: Path) -> Path:
    """models_dir/<name>.lock.yml; a bad name or a link out of models_dir is refused."""
    problems = model.validate({"name": name, "files": [{"path": "config.json", "size": 0, "sha256": "0" * 64}]})
    if problems:
        raise ModelLockError(problems[0])
    path = models_dir / f"{name}.lock.yml"
    if path.is_symlink() and not path.resolve().is_relative_to(models_dir.resolve()):
        raise ModelLockError(f"{path} is a link to a file outside {models_dir}: model locks are read only there")
    return path


def load(name: str, models_dir: Path = MODELS) -> dict:
    """The checked lock models_dir/<name>.lock.yml; an unknown name lists the locks there."""
    path = lock_path(name, models_dir)
    if not path.is_file():
        known = sorted(p.name.removesuffix(".lock.yml") for p in models_dir.glob("*.lock.yml"))
        raise ModelLockError(
            f"no model lock {name!r} in {models_dir}; locks there: {', '.join(known) or 'none'} "
            "(make one with sglang-deploy model lock NAME --path DIR | --repo OWNER/NAME --revision COMMIT)"
        )
    try:
        data = profiles.read_yaml(path)
    except profiles.ProfileError as exc:
        raise ModelLockError(str(exc)) from exc
    problems = model.validate(data)
    if not problems and data["name"] != name:
        problems = [f"name {data['name']!r} differs from the file name {path.name}"]
    if problems:
        raise ModelLockError(f"{path}: " + "; ".join(problems))
    return data


def folder_entries(folder: Path) -> list[dict]:
    if not (folder / "config.json").is_file():
        raise ModelLockError(f"{folder}: no config.json there, not a checkpoint folder")
    try:
        return model.file_entries(str(folder))
    except (ValueError, OSError) as exc:
        raise ModelLockError(str(exc)) from exc


def _huggingface_hub():
    """The huggingface_hub module, its progress bars off (domain code writes nothing to the terminal)."""
    try:
        import huggingface_hub
        from huggingface_hub.utils import disable_progress_bars
    except ImportError as exc:
        raise ModelLockError(_NO_HUB) from exc
    disable_progress_bars()
    return huggingface_hub


def hub_entries(repository: str, revision: str, *, token: str = "", endpoint: str = "") -> tuple[str, list[dict], int]:
    """(commit, files entries, files hashed here) of repository at revision (a commit, branch or tag)."""
    hub = _huggingface_hub()
    api = hub.HfApi(endpoint=endpoint or None, token=token or False)
    where = f"{repository} at {revision} on {endpoint or 'the Hub'}"
    try:
        info = api.model_info(repository, revision=revision, files_metadata=True)
        entries, hashed = [], 0
        with tempfile.TemporaryDirectory(prefix="sglang-model-lock-") as tmp:
            for sibling in sorted(info.siblings or [], key=lambda s: s.rfilename):
                lfs = sibling.lfs
                if lfs is not None:
                    size, sha256 = (lfs["size"], lfs["sha256"]) if isinstance(lfs, dict) else (lfs.size, lfs.sha256)
                else:
                    path = hub.hf_hub_download(
                        repository,
                        sibling.rfilename,
                        revision=info.sha,
                        local_dir=tmp,
                        token=token or False,
                        endpoint=endpoint or None,
                    )
                    size, sha256, hashed = os.path.getsize(path), sha256_file(path), hashed + 1
                entries.append({"path": sibling.rfilename, "size": size, "sha256": sha256})
    except Exception as exc:  # noqa: BLE001 - huggingface_hub's and httpx's errors, OSError: named, token masked
        raise ModelLockError(f"{where}: " + _masked(f"{exc.__class__.__name__}: {exc}", token)[:600]) from exc
    return info.sha, entries, hashed


def write(name: str, models_dir: Path, entries: list[dict], *, repository: str = "", revision: str = "") -> Path:
    """Write models_dir/<name>.lock.yml (checked first: a lock the role would refuse is never written)."""
    data = {
        "name": name,
        "repository": repository,
        "revision": revision,
        "locked_at": datetime.date.today().isoformat(),
        "files": entries,
    }
    problems = model.validate(data)
    if problems:
        raise ModelLockError("; ".join(problems))
    path = lock_path(name, models_dir)
    header = (
        f"# Model lock {name}: every file of the checkpoint with its size and sha256, written by sglang-deploy model "
        "lock.\n# Deploy it with -e sglang_model_lock=" + name + " (roles/sglang_model); do not edit it by hand.\n"
    )
    write_file(header + "---\n" + yaml.safe_dump(data, sort_keys=False, width=1000), str(path), 0o644)
    return path


def lock_folder(name: str, folder: Path, models_dir: Path = MODELS) -> Locked:
    entries = folder_entries(folder)
    return Locked(write(name, models_dir, entries), load(name, models_dir), len(entries))


def lock_hub(
    name: str, repository: str, revision: str, models_dir: Path = MODELS, *, token: str = "", endpoint: str = ""
) -> Locked:
    commit, entries, hashed = hub_entries(repository, revision, token=token, endpoint=endpoint)
    path = write(name, models_dir, entries, repository=repository, revision=commit)
    return Locked(path, load(name, models_dir), hashed)


def hub_download(lock: dict, folder: str, *, token: str = "", endpoint: str = "") -> bool:
    """Download the lock's files of its repository at its commit into folder with huggingface_hub (its fast transfer
    backends where installed) unless folder already matches the lock, then check every file against the lock and
    stamp the folder. A file that does not match is deleted and named in the error. Returns whether it downloaded."""
    os.makedirs(folder, exist_ok=True)
    if not model.file_problems(folder, lock["files"]):
        return False
    hub = _huggingface_hub()
    try:
        hub.snapshot_download(
            repo_id=lock["repository"],
            revision=lock["revision"],
            local_dir=folder,
            allow_patterns=[entry["path"] for entry in lock["files"]],
            token=token or False,
            endpoint=endpoint or None,
        )
    except Exception as exc:  # noqa: BLE001 - huggingface_hub's errors, httpx's (no OSError), OSError: all named
        raise ModelLockError(
            f"download of {lock['repository']} at {lock['revision']} from {endpoint or 'the Hub'} failed: "
            + _masked(f"{exc.__class__.__name__}: {exc}", token)[:600]
        ) from exc
    problems = model.verified(folder, lock)
    if problems:
        raise ModelLockError(
            f"{lock['repository']} at {lock['revision']} does not match lock {lock['name']}: " + "; ".join(problems)
        )
    model.write_stamp(folder, lock)
    return True
