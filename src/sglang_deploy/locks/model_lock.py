"""Model locks on the controller: write models/<name>.lock.yml from a checkpoint folder or from a Hub repository at
a commit, read one back (checked by model.validate), and check a folder against one.

From the Hub the lock takes each file's size and sha256 from the Hub's LFS metadata (the weights); a file stored in
git (config.json, the tokenizer) has only a git blob id there, so it is downloaded once and hashed here. A branch or
tag given as the revision is resolved to its commit, which the lock records. What runs on the host is in model.py.

Every file comes from the Hub's resolve URL through wheel_fetch.download: it stops past the size the lock (or, when
locking, the Hub's metadata) states, and at a deadline per file. The endpoint is https (http only on this machine's
loopback, or acknowledged), so the token and the metadata a lock is made from never travel in clear.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

from sglang_deploy import paths
from ansible_collections.sglang.deploy.plugins.module_utils import model, wheel_fetch
from sglang_deploy.launch import profiles
from ansible_collections.sglang.deploy.plugins.module_utils.files import write_file
from ansible_collections.sglang.deploy.plugins.module_utils.wheel_fetch import sha256_file

MODELS = paths.REPO / "models"
HUB = "https://huggingface.co"
# Seconds one file's download may take (configurable: --file-timeout, sglang_model_hf_file_timeout): an hour moves a
# 10 GB shard at 3 MB/s.
FILE_TIMEOUT = 3600
# The cap of a file kept in git, not LFS (config.json, the tokenizer; the Hub keeps files over 10 MB in LFS), whatever
# size the Hub's metadata states, and of one it gives no size for (configurable: --max-small-file-mb).
MAX_SMALL_FILE_BYTES = 64 << 20
# The cap of the Hub's answer about a repository at a revision (about 300 bytes a file: 200,000 files).
MAX_INFO_BYTES = 64 << 20
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_INSECURE = (
    "http:// sends the token and the files' metadata (which a lock pins) in clear: use https://, or acknowledge it "
    "with --allow-insecure-endpoint (the role: sglang_model_hf_allow_insecure_endpoint: true)"
)


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


def endpoint_url(endpoint: str = "", *, allow_insecure: bool = False) -> str:
    """The Hub endpoint to use: endpoint, else HF_ENDPOINT, else the Hub, without a trailing '/'. An https URL; http
    only to a loopback address (localhost, 127.0.0.0/8, ::1: nothing leaves this machine) or with allow_insecure."""
    url = (endpoint or os.environ.get("HF_ENDPOINT") or HUB).rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        raise ModelLockError("the Hub endpoint holds a user name or password: give the token in HF_TOKEN instead")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ModelLockError(f"Hub endpoint {url[:80]!r}: an https:// URL, e.g. {HUB} or a mirror's")
    if parts.scheme == "http" and not allow_insecure and not _loopback(parts.hostname):
        raise ModelLockError(f"Hub endpoint {url[:80]}: {_INSECURE}")
    return url


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _download(
    endpoint: str,
    repository: str,
    revision: str,
    rel: str,
    dest: str,
    size: int,
    *,
    token: str = "",
    exact: bool = True,
    timeout: float = FILE_TIMEOUT,
    stop=None,
) -> None:
    """Download the file rel of repository at revision to dest: at most size bytes (exact: the locked size, else a
    cap), within timeout seconds, until stop (an Event) is set; ModelLockError naming the file, the token masked."""
    url = f"{endpoint}/{urllib.parse.quote(repository)}/resolve/{revision}/{urllib.parse.quote(rel)}"
    headers = {"User-Agent": "sglang-deploy"} | ({"Authorization": f"Bearer {token}"} if token else {})
    cap = (
        f"its size of {size} bytes"
        if exact
        else f"the {size} bytes allowed for a file of unknown size (--max-small-file-mb)"
    )
    try:
        deadline = time.monotonic() + timeout
        wheel_fetch.download(url, dest, max_bytes=size, deadline=deadline, stop=stop, headers=headers, cap=cap)
    except wheel_fetch.DOWNLOAD_ERRORS as exc:
        if isinstance(exc, wheel_fetch.DownloadStopped) and "deadline" in str(exc):
            exc = wheel_fetch.DownloadStopped(f"{exc} (the limit per file is {timeout:g} s: --file-timeout)")
        raise ModelLockError(f"{rel}: " + _masked(f"{exc.__class__.__name__}: {exc}", token)[:600]) from exc


def _model_info(endpoint: str, repository: str, revision: str, *, token: str = "", timeout: float) -> dict:
    """The Hub's answer about repository at revision (the API huggingface_hub's model_info(files_metadata=True)
    reads): its commit (sha) and its files (siblings: rfilename, size, lfs), through wheel_fetch.download, so that
    it stops past MAX_INFO_BYTES and at timeout seconds (huggingface_hub kept an endless answer in memory and waited
    for a dripping one without end). ModelLockError naming what is wrong, the token masked."""
    quoted = urllib.parse.quote(revision, safe="")
    url = f"{endpoint}/api/models/{urllib.parse.quote(repository)}/revision/{quoted}?blobs=true"
    headers = {"User-Agent": "sglang-deploy"} | ({"Authorization": f"Bearer {token}"} if token else {})
    cap = f"the {MAX_INFO_BYTES >> 20} MiB allowed for the Hub's answer about a repository"
    with tempfile.TemporaryDirectory(prefix="sglang-model-info-") as tmp:
        path = os.path.join(tmp, "info.json")
        try:
            wheel_fetch.download(
                url, path, max_bytes=MAX_INFO_BYTES, deadline=time.monotonic() + timeout, headers=headers, cap=cap
            )
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
        except (*wheel_fetch.DOWNLOAD_ERRORS, RecursionError) as exc:  # ValueError: not JSON
            text = _masked(f"{exc.__class__.__name__}: {exc}", token)[:600]
            raise ModelLockError(f"the Hub's answer about the repository: {text}") from exc
    sha, siblings = (info.get("sha"), info.get("siblings")) if isinstance(info, dict) else (None, None)
    if (
        not isinstance(sha, str)
        or not _COMMIT.match(sha)
        or not isinstance(siblings, list)
        or not all(isinstance(s, dict) and isinstance(s.get("rfilename"), str) for s in siblings)
    ):
        raise ModelLockError("the Hub's answer about the repository has no commit (sha) or no list of files (siblings)")
    return info


def hub_entries(
    repository: str,
    revision: str,
    *,
    token: str = "",
    endpoint: str = "",
    allow_insecure: bool = False,
    file_timeout: float = FILE_TIMEOUT,
    max_small_file: int = MAX_SMALL_FILE_BYTES,
) -> tuple[str, list[dict], int]:
    """(commit, files entries, files hashed here) of repository at revision (a commit, branch or tag). A file kept in
    git is downloaded (at most the size the Hub's metadata states, else max_small_file bytes, within file_timeout s);
    one the Hub states over max_small_file bytes is refused before its download."""
    endpoint = endpoint_url(endpoint, allow_insecure=allow_insecure)
    where = f"{repository} at {revision} on {endpoint}"
    try:
        info = _model_info(endpoint, repository, revision, token=token, timeout=file_timeout)
        entries, hashed = [], 0
        with tempfile.TemporaryDirectory(prefix="sglang-model-lock-") as tmp:
            for sibling in sorted(info["siblings"], key=lambda s: s["rfilename"]):
                if any(part.startswith(".") for part in sibling["rfilename"].split("/")):
                    continue  # git's own files (.gitattributes): no part of a checkpoint, never in its folder
                lfs = sibling.get("lfs")
                if lfs is not None:
                    size, sha256 = (lfs.get("size"), lfs.get("sha256")) if isinstance(lfs, dict) else (None, None)
                else:
                    stated = sibling.get("size")
                    exact = isinstance(stated, int) and not isinstance(stated, bool) and stated >= 0
                    if exact and stated > max_small_file:
                        raise ModelLockError(_too_large(sibling["rfilename"], stated, max_small_file))
                    path = os.path.join(tmp, "file")
                    _download(
                        endpoint, repository, info["sha"], sibling["rfilename"], path,
                        stated if exact else max_small_file, token=token, exact=exact, timeout=file_timeout,
                    )  # fmt: skip
                    size, sha256, hashed = os.path.getsize(path), sha256_file(path), hashed + 1
                    os.unlink(path)
                    if exact and size != stated:
                        raise ModelLockError(f"{sibling['rfilename']}: {size} bytes arrived, the Hub states {stated}")
                entries.append({"path": sibling["rfilename"], "size": size, "sha256": sha256})
    except ModelLockError as exc:
        raise ModelLockError(f"{where}: {exc}") from exc
    except OSError as exc:  # the temporary folder: named, token masked
        raise ModelLockError(f"{where}: " + _masked(f"{exc.__class__.__name__}: {exc}", token)[:600]) from exc
    return info["sha"], entries, hashed


def _too_large(rel: str, stated: int, limit: int) -> str:
    return (
        f"{rel}: the Hub states {stated} bytes for this file kept in git (not LFS), over the limit of {limit} bytes "
        f"({limit / 2**20:g} MiB) for one; a real checkpoint keeps large files in LFS: check the endpoint, or raise "
        "the limit with --max-small-file-mb"
    )


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
    lock_path(name, models_dir)  # a bad name is refused before anything is hashed
    entries = folder_entries(folder)
    return Locked(write(name, models_dir, entries), load(name, models_dir), len(entries))


def lock_hub(name: str, repository: str, revision: str, models_dir: Path = MODELS, **hub) -> Locked:
    """Lock repository at revision as models_dir/<name>.lock.yml; hub: hub_entries' keywords (token, endpoint...)."""
    lock_path(name, models_dir)  # a bad name is refused before anything is downloaded
    commit, entries, hashed = hub_entries(repository, revision, **hub)
    path = write(name, models_dir, entries, repository=repository, revision=commit)
    return Locked(path, load(name, models_dir), hashed)


def hub_download(
    lock: dict,
    folder: str,
    *,
    token: str = "",
    endpoint: str = "",
    allow_insecure: bool = False,
    file_timeout: float = FILE_TIMEOUT,
    jobs: int = 4,
) -> bool:
    """Download the lock's files of its repository at its commit into folder, each one missing there, of another size
    or altered (files that match are kept), jobs at a time: each stops past its locked size and at file_timeout
    seconds. Then every file is checked against the lock and the folder stamped. A file that does not match is
    deleted and named in the error. Returns whether it downloaded."""
    endpoint = endpoint_url(endpoint, allow_insecure=allow_insecure)
    os.makedirs(folder, exist_ok=True)
    todo = {rel for rel, _unused in model.file_issues(folder, lock["files"])}
    if not todo:
        return False
    where = f"{lock['repository']} at {lock['revision']} from {endpoint}"

    def get(entry: dict) -> str:
        model.remove_inside(folder, entry["path"])  # a link there is removed, never written through
        try:
            _download(
                endpoint, lock["repository"], lock["revision"], entry["path"], os.path.join(folder, entry["path"]),
                entry["size"], token=token, timeout=file_timeout, stop=stop,
            )  # fmt: skip
        except ModelLockError as exc:
            return str(exc)
        return ""

    stop = threading.Event()
    with ThreadPoolExecutor(jobs) as pool:
        try:
            failed = [p for p in pool.map(get, [e for e in lock["files"] if e["path"] in todo]) if p]
        except BaseException:  # Ctrl-C: the other downloads stop too, and remove their temporary files
            stop.set()
            raise
    if failed:
        raise ModelLockError(f"download of {where} failed: " + "; ".join(failed))
    problems = model.verified(folder, lock)
    if problems:
        raise ModelLockError(f"{where} does not match lock {lock['name']}: " + "; ".join(problems))
    model.write_stamp(folder, lock)
    return True
