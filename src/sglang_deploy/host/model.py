"""Model locks (models/<name>.lock.yml): every file of a checkpoint with its size and sha256, and the checks of a
checkpoint folder against its lock and before a launch (config.json, the safetensors index and its shards).

Runs on target hosts through module_utils/sglang_deploy/model.py (module_utils/sglang_deploy links to the host package): stdlib only,
Python 3.10+. A lock reaches this code as a dict (the controller loads the YAML).

On the host a checkpoint is fetched into DEST.partial (never a folder the server loads), verified against the lock
there, and renamed to DEST; DEST/.sglang-model.json (the stamp) then records the lock's id and each file's size and
mtime as they were verified, so a later run rehashes only a file whose size or mtime changed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil

from .stack import _COMMIT, _NAME
from .stack_prune import tree_size
from .wheel_fetch import sha256_file

STAMP = ".sglang-model.json"
PARTIAL = ".partial"
PREVIOUS = ".previous"
INDEX = "model.safetensors.index.json"
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# A repository id of the Hub: owner/name (letters, digits, '-', '_', '.').
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A lock's paths reach Ansible (a template is never evaluated from a lock, but a lock is refused that holds one) and
# huggingface_hub's allow_patterns (globs).
_SPECIAL = re.compile(r"[\\{}*?\[\]]")
_KEYS = {"name", "repository", "revision", "locked_at", "files"}
_FILE_KEYS = {"path", "size", "sha256"}


def path_problem(path: object) -> str:
    """Why path cannot be a file of a checkpoint folder ('' when it can): relative, inside the folder, no hidden
    part (the stamp, the Hub's .cache/), no control character."""
    if not isinstance(path, str) or not path:
        return f"file path {path!r} is not a non-empty string"
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return f"file path {path[:80]!r} must be relative, inside the folder, without hidden parts"
    if _CONTROL.search(path) or _SPECIAL.search(path):
        return (
            f"file path {path[:80]!r} holds a control character, a backslash, or a character that Ansible's templates "
            "or a glob pattern read ({ } * ? [ ])"
        )
    return ""


def dest_problem(dest: str) -> str:
    """Why dest cannot be a checkpoint folder ('' when it can): an absolute, normalized path below the root, since
    <dest>.partial and <dest>.previous are made beside it and the folder there is replaced."""
    if not dest or not os.path.isabs(dest) or os.path.normpath(dest) != dest or dest == "/" or _CONTROL.search(dest):
        return (
            f"model folder {dest[:80]!r}: an absolute, normalized path below / (e.g. /data/models/NAME); "
            "set sglang_model_dir or sglang_model_path"
        )
    return ""


def validate(lock: object) -> list[str]:
    """Problems of a model lock, each naming the key and the fix; [] when it can be used."""
    if not isinstance(lock, dict):
        return ["a model lock is a mapping (name, repository, revision, files)"]
    problems = [
        f"unknown key {str(key)[:40]!r} (a lock has {', '.join(sorted(_KEYS))})" for key in lock if key not in _KEYS
    ]
    name = lock.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        problems.append(f"name {name!r}: lower-case letters, digits, '.' and '-' only (the lock file is NAME.lock.yml)")
    repository, revision = lock.get("repository", ""), lock.get("revision", "")
    if repository:
        if not isinstance(repository, str) or not _REPO.match(repository):
            problems.append(f"repository {str(repository)[:80]!r}: a Hub repository id OWNER/NAME")
        if not isinstance(revision, str) or not _COMMIT.match(revision):
            problems.append(
                f"revision {str(revision)[:80]!r} is not a commit (40 lower-case hex digits): a branch or tag moves; "
                "pin a commit, or let `sglang-deploy model lock --revision BRANCH` resolve it into the lock"
            )
    elif revision:
        problems.append("revision without a repository: a lock made from a folder has neither")
    files = lock.get("files")
    if not isinstance(files, list) or not files:
        return problems + ["files: the list of the checkpoint's files (path, size, sha256) is missing or empty"]
    seen = set()
    for entry in files:
        if not isinstance(entry, dict):
            problems.append(f"files: entry {str(entry)[:80]!r} is not a mapping of path, size, sha256")
            continue
        problems += [
            f"files: unknown key {str(key)[:40]!r} (path, size, sha256)" for key in entry if key not in _FILE_KEYS
        ]
        path = entry.get("path")
        problem = path_problem(path)
        if problem:
            problems.append(f"files: {problem}")
            continue
        if path in seen:
            problems.append(f"files: {path} is listed twice")
        seen.add(path)
        size = entry.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            problems.append(f"files: {path}: size {size!r} is not a whole number of bytes")
        if not isinstance(entry.get("sha256"), str) or not _SHA256.match(entry["sha256"]):
            problems.append(f"files: {path}: sha256 {str(entry.get('sha256'))[:80]!r} is not 64 lower-case hex digits")
    if "config.json" not in seen:
        problems.append("files: config.json is not listed: a checkpoint SGLang loads has one at its top")
    return problems


def usage_problem(lock: object, dest: str) -> str:
    """'' when lock can be installed at dest, else one sentence naming every problem (the modules' refusal)."""
    problems = [p for p in [dest_problem(dest)] if p] + validate(lock)
    name = lock.get("name") if isinstance(lock, dict) else None
    return f"model lock {name!r} cannot be used at {dest[:80]!r}: " + "; ".join(problems) if problems else ""


def lock_id(lock: dict) -> str:
    """First 12 hex digits of the sha256 of what the lock pins (repository, revision, files)."""
    content = {key: lock.get(key, "") for key in ("repository", "revision", "files")}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]


def folder_files(folder: str) -> list[str]:
    """Every regular file under folder as a relative path, sorted; hidden files and folders (the stamp, the Hub's
    .cache/) are left out, and a link is refused: a checkpoint is locked and copied as plain files."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if name.startswith("."):
                continue
            if os.path.islink(path) or not os.path.isfile(path):
                raise ValueError(f"{rel}: a link or not a regular file in {folder}; copy the checkpoint as plain files")
            found.append(rel)
    for root, dirs, _ in os.walk(folder):
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                raise ValueError(f"{os.path.relpath(os.path.join(root, name), folder)}: a link to a folder in {folder}")
    return sorted(found)


def file_entries(folder: str) -> list[dict]:
    """The files: list of a lock for a checkpoint folder: path, size and sha256 of every file (folder_files)."""
    return [
        {
            "path": rel,
            "size": os.path.getsize(os.path.join(folder, rel)),
            "sha256": sha256_file(os.path.join(folder, rel)),
        }
        for rel in folder_files(folder)
    ]


def _stat(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns] if os.path.isfile(path) and not os.path.islink(path) else [-1, 0]


def read_stamp(folder: str) -> dict:
    try:
        with open(os.path.join(folder, STAMP), encoding="utf-8") as handle:
            stamp = json.load(handle)
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("files"), dict) else {}


def file_problems(folder: str, files: list[dict], *, full: bool = False) -> list[str]:
    """Each locked file that is missing from folder, a link, of another size, or of another sha256, naming it. A file
    whose size and mtime are those the stamp recorded for this lock is not hashed again unless full."""
    stamp = read_stamp(folder)
    known = stamp.get("files", {}) if stamp.get("lock_files") == _files_key(files) else {}
    problems = []
    for entry in files:
        path = os.path.join(folder, entry["path"])
        seen = _stat(path)
        if seen is None:
            problems.append(f"{entry['path']}: missing from {folder}")
        elif seen[0] < 0:
            problems.append(f"{entry['path']}: a link or not a regular file in {folder}")
        elif seen[0] != entry["size"]:
            what = "truncated" if seen[0] < entry["size"] else "longer than locked"
            problems.append(f"{entry['path']}: {seen[0]} bytes, the lock says {entry['size']} ({what})")
        elif full or known.get(entry["path"]) != seen:
            digest = sha256_file(path)
            if digest != entry["sha256"]:
                problems.append(f"{entry['path']}: sha256 {digest}, the lock says {entry['sha256']} (altered)")
    return problems


def _files_key(files: list[dict]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def write_stamp(folder: str, lock: dict) -> None:
    """Record the lock and each verified file's size and mtime in folder's stamp (written whole, then renamed)."""
    stamp = {
        "name": lock["name"],
        "lock_id": lock_id(lock),
        "repository": lock.get("repository", ""),
        "revision": lock.get("revision", ""),
        "lock_files": _files_key(lock["files"]),
        "files": {entry["path"]: _stat(os.path.join(folder, entry["path"])) for entry in lock["files"]},
    }
    tmp = os.path.join(folder, STAMP + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(stamp, handle, indent=1, sort_keys=True)
    os.chmod(tmp, 0o444)
    os.replace(tmp, os.path.join(folder, STAMP))


def launch_problems(folder: str, files: list[dict] | None = None) -> list[str]:
    """What stops SGLang from loading folder, from the real files: config.json a JSON object; with a safetensors
    index, every shard it names present (with its locked size when files, the lock's entries, are given); without
    one, at least one *.safetensors file."""
    sizes = {entry["path"]: entry["size"] for entry in files or []}
    problems = []
    config = _json(folder, "config.json", problems)
    if config is not None and not isinstance(config, dict):
        problems.append("config.json: not a JSON object")
    if os.path.isfile(os.path.join(folder, INDEX)):
        index = _json(folder, INDEX, problems)
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            problems.append(f"{INDEX}: no weight_map naming the shards")
            return problems
        for shard in sorted(set(map(str, weight_map.values()))):
            problem = path_problem(shard)
            if problem:
                problems.append(f"{INDEX}: {problem}")
                continue
            seen = _stat(os.path.join(folder, shard))
            if seen is None or seen[0] < 0:
                problems.append(f"{shard}: named by {INDEX}, missing from {folder}")
            elif files is not None and shard not in sizes:
                problems.append(f"{shard}: named by {INDEX}, not in the lock")
            elif shard in sizes and seen[0] != sizes[shard]:
                problems.append(f"{shard}: {seen[0]} bytes, the lock says {sizes[shard]}")
    elif not any(name.endswith(".safetensors") for name in os.listdir(folder)):
        problems.append(f"no {INDEX} and no *.safetensors file in {folder}: no weights to load")
    return problems


def _json(folder: str, name: str, problems: list[str]) -> object:
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        problems.append(f"{name}: missing from {folder}")
    except (OSError, ValueError, RecursionError) as exc:
        problems.append(f"{name}: not readable JSON ({exc.__class__.__name__}: {str(exc)[:120]})")
    return None


def extra_files(folder: str, files: list[dict]) -> list[str]:
    """Files in folder that the lock does not list (hidden ones aside); ValueError for a link (folder_files)."""
    locked = {entry["path"] for entry in files}
    return [rel for rel in folder_files(folder) if rel not in locked]


def drift(folder: str, lock: dict, *, full: bool = False) -> list[str]:
    """One line per difference between folder and the lock: missing, truncated, altered, or not in the lock."""
    if not os.path.isdir(folder):
        return [f"{folder}: no checkpoint there (lock {lock['name']} not installed)"]
    lines = file_problems(folder, lock["files"], full=full)
    try:
        lines += [f"{rel}: not in lock {lock['name']}" for rel in extra_files(folder, lock["files"])]
    except ValueError as exc:
        lines.append(str(exc))
    return lines


def plan(dest: str, lock: dict, *, full: bool = False, reserve: int = 0) -> dict:
    """What installing lock at dest takes: installed (dest matches the lock), the files still to copy into the
    partial folder (missing there or of another size), the bytes they need and the bytes free for them (the free
    space of dest's file system, plus dest.previous, which the role removes before copying, less reserve)."""
    partial = dest.rstrip("/") + PARTIAL
    previous = dest.rstrip("/") + PREVIOUS
    stamp = read_stamp(dest)
    installed = stamp.get("lock_id") == lock_id(lock) and not file_problems(dest, lock["files"], full=full)
    todo = (
        []
        if installed
        else [
            entry
            for entry in lock["files"]
            if (_stat(os.path.join(partial, entry["path"])) or [None])[0] != entry["size"]
        ]
    )
    return {
        "dest": dest,
        "partial": partial,
        "previous": previous,
        "parent_missing": not os.path.isdir(os.path.dirname(partial)),
        "installed": installed,
        "serving_lock": stamp.get("name", "") + (f" ({stamp['lock_id']})" if stamp.get("lock_id") else ""),
        "to_copy": [entry["path"] for entry in todo],
        "folders": sorted({os.path.dirname(entry["path"]) for entry in todo} - {""}),
        "bytes_needed": sum(entry["size"] for entry in todo),
        "bytes_free": free_bytes(dest) + (tree_size(previous) if todo and os.path.isdir(previous) else 0) - reserve,
        "bytes_total": sum(entry["size"] for entry in lock["files"]),
    }


def free_bytes(path: str) -> int:
    """Free bytes (for an unprivileged user) on the file system that holds path or its nearest existing parent."""
    while not os.path.exists(path):
        path = os.path.dirname(path) or "."
    return shutil.disk_usage(path).free


def verified(folder: str, lock: dict) -> list[str]:
    """file_problems(full=True) for folder, each file named there removed, so that the next fetch gets it again."""
    problems = file_problems(folder, lock["files"], full=True)
    for problem in problems:
        path = os.path.join(folder, problem.split(": ", 1)[0])
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    return problems


def finish(partial: str, dest: str, lock: dict) -> dict:
    """Verify partial against the lock (every file hashed), remove what the lock does not list, check it for a
    launch, stamp it, then move dest (a previous checkpoint) to dest.previous and partial to dest. A file that does not
    match is deleted, so the next run copies it again; problems leave dest as it was. Returns problems, removed."""
    problems = verified(partial, lock)
    if problems:
        return {"problems": problems, "removed": []}
    try:
        removed = extra_files(partial, lock["files"])
    except ValueError as exc:
        return {"problems": [str(exc)], "removed": []}
    for rel in removed:
        os.unlink(os.path.join(partial, rel))
    problems = launch_problems(partial, lock["files"])
    if problems:
        return {"problems": problems, "removed": removed}
    write_stamp(partial, lock)
    previous = dest.rstrip("/") + PREVIOUS
    if os.path.lexists(dest):
        if os.path.lexists(previous):
            shutil.rmtree(previous)
        try:
            os.replace(dest, previous)
        except OSError as exc:
            # A folder of a container image's lower layer (overlayfs without redirect_dir) cannot be renamed. It is
            # removed, not copied (a copy would need its size free again): no .previous is kept then.
            if exc.errno != errno.EXDEV:
                raise
            shutil.rmtree(dest)
    os.replace(partial, dest)
    return {"problems": [], "removed": removed}


def warm(folder: str, files: list[dict], block: int = 8 << 20) -> int:
    """Read every locked file of folder once, so that the page cache holds it when the server (re)starts and loads
    it; returns the bytes read. Reads only; the serving server is not touched."""
    total = 0
    for entry in files:
        with open(os.path.join(folder, entry["path"]), "rb", buffering=0) as handle:
            while chunk := handle.read(block):
                total += len(chunk)
    return total
