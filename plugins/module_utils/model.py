"""Model locks (models/<name>.lock.yml): every file of a checkpoint with its size and sha256, and the checks of a
checkpoint folder against its lock and before a launch (config.json, the safetensors index and its shards).

Runs on target hosts through plugins/module_utils/model.py (plugins/module_utils links to the host package): stdlib only,
Python 3.10+. A lock reaches this code as a dict (the controller loads the YAML).

On the host a checkpoint is fetched into DEST.partial (never a folder the server loads), verified against the lock
there, and renamed to DEST; DEST/.sglang-model.json (the stamp) then records the lock's id and each file's size and
mtime as they were verified, so a later run rehashes only a file whose size or mtime changed. What is refused at
DEST and beside it, and the folders above it, is model_place.py.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat

from .model_place import PARTIAL, PREVIOUS, STAMP, dest_problem, make_parents, owned, place_problems
from .stack import _COMMIT, _NAME
from .stack_prune import tree_size
from .text import CONTROL
from .wheel_fetch import sha256_file

INDEX = "model.safetensors.index.json"
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# A repository id of the Hub: owner/name (letters, digits, '-', '_', '.').
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*\Z")
# A lock's paths reach Ansible (a template is never evaluated from a lock, but a lock is refused that holds one) and
# huggingface_hub's allow_patterns (globs).
_SPECIAL = re.compile(r"[\\{}*?\[\]]")
# The longest lock name: NAME.lock.yml and the controller cache's NAME-<lock id> stay far below a file name's 255 bytes.
MAX_NAME = 100
_KEYS = {"name", "repository", "revision", "locked_at", "files"}
_FILE_KEYS = {"path", "size", "sha256"}


def path_problem(path: object) -> str:
    """Why path cannot be a file of a checkpoint folder ('' when it can): relative, inside the folder, no hidden
    part (the stamp, the Hub's .cache/), no control character (text.CONTROL: it would act on the terminal that shows
    the path), UTF-8 (a lock is YAML)."""
    if not isinstance(path, str) or not path:
        return f"file path {path!r} is not a non-empty string"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return f"file path {path[:80]!r} is not UTF-8 (a byte the file system holds that no lock can): rename the file"
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return f"file path {path[:80]!r} must be relative, inside the folder, without hidden parts"
    if CONTROL.search(path) or _SPECIAL.search(path):
        return (
            f"file path {path[:80]!r} holds a control character, a backslash, or a character that Ansible's templates "
            "or a glob pattern read ({ } * ? [ ])"
        )
    return ""


def validate(lock: object) -> list[str]:
    """Problems of a model lock, each naming the key and the fix; [] when it can be used."""
    if not isinstance(lock, dict):
        return ["a model lock is a mapping (name, repository, revision, files)"]
    problems = [
        f"unknown key {str(key)[:40]!r} (a lock has {', '.join(sorted(_KEYS))})" for key in lock if key not in _KEYS
    ]
    problems += _origin_problems(lock)
    files = lock.get("files")
    if not isinstance(files, list) or not files:
        return problems + ["files: the list of the checkpoint's files (path, size, sha256) is missing or empty"]
    seen: set = set()
    for entry in files:
        problems += _entry_problems(entry, seen)
    if "config.json" not in seen:
        problems.append("files: config.json is not listed: a checkpoint SGLang loads has one at its top")
    return problems


def _origin_problems(lock: dict) -> list[str]:
    """The lock's name, and its Hub repository and commit (a lock made from a folder has neither)."""
    problems = []
    name = lock.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME:
        problems.append(
            f"name {str(name)[:80]!r}: lower-case letters, digits, '.' and '-' only, at most {MAX_NAME} characters "
            "(the lock file is NAME.lock.yml)"
        )
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
    return problems


def _entry_problems(entry: object, seen: set) -> list[str]:
    """One entry of files (path, size, sha256); its path joins ``seen``."""
    if not isinstance(entry, dict):
        return [f"files: entry {str(entry)[:80]!r} is not a mapping of path, size, sha256"]
    problems = [f"files: unknown key {str(key)[:40]!r} (path, size, sha256)" for key in entry if key not in _FILE_KEYS]
    path = entry.get("path")
    problem = path_problem(path)
    if problem:
        return problems + [f"files: {problem}"]
    if path in seen:
        problems.append(f"files: {path} is listed twice")
    seen.add(path)
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        problems.append(f"files: {path}: size {size!r} is not a whole number of bytes")
    if not isinstance(entry.get("sha256"), str) or not _SHA256.match(entry["sha256"]):
        problems.append(f"files: {path}: sha256 {str(entry.get('sha256'))[:80]!r} is not 64 lower-case hex digits")
    return problems


def usage_problem(lock: object, dest: str) -> str:
    """'' when lock can be installed at dest, else one sentence naming every problem (the modules' refusal)."""
    problems = [p for p in [dest_problem(dest)] if p]
    problems += validate(lock) + ([] if problems else place_problems(dest))
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
    for root, dirs, _unused in os.walk(folder):
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


def _stat(path: str, folder: str = "") -> list[int] | None:
    """[size, mtime] of a regular file, [-1, 0] for a link or anything else, None when missing; with folder, a link
    among the folders between folder and path counts as a link (it is never followed)."""
    rel = os.path.relpath(path, folder) if folder else ""
    for parent in [os.path.join(folder, *rel.split(os.sep)[:n]) for n in range(1, rel.count(os.sep) + 1)]:
        try:
            if not stat.S_ISDIR(os.lstat(parent).st_mode):
                return [-1, 0]
        except FileNotFoundError:
            return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns] if stat.S_ISREG(st.st_mode) else [-1, 0]


def read_stamp(folder: str) -> dict:
    try:
        with open(os.path.join(folder, STAMP), encoding="utf-8") as handle:
            stamp = json.load(handle)
    except (OSError, ValueError):
        return {}
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("files"), dict) else {}


def file_issues(folder: str, files: list[dict], *, full: bool = False) -> list[tuple[str, str]]:
    """(path, sentence) for each locked file that is missing from folder, a link (or below one), of another size, or
    of another sha256. A file whose size and mtime are those the stamp recorded for this lock is not hashed again
    unless full."""
    stamp = read_stamp(folder)
    known = stamp.get("files", {}) if stamp.get("lock_files") == _files_key(files) else {}
    issues = []
    for entry in files:
        rel, path = entry["path"], os.path.join(folder, entry["path"])
        seen = _stat(path, folder)
        if seen is None:
            issues.append((rel, f"{rel}: missing from {folder}"))
        elif seen[0] < 0:
            issues.append((rel, f"{rel}: a link or not a regular file in {folder}"))
        elif seen[0] != entry["size"]:
            what = "truncated" if seen[0] < entry["size"] else "longer than locked"
            issues.append((rel, f"{rel}: {seen[0]} bytes, the lock says {entry['size']} ({what})"))
        elif full or known.get(rel) != seen:
            digest = sha256_file(path)
            if digest != entry["sha256"]:
                issues.append((rel, f"{rel}: sha256 {digest}, the lock says {entry['sha256']} (altered)"))
    return issues


def file_problems(folder: str, files: list[dict], *, full: bool = False) -> list[str]:
    """The sentences of file_issues."""
    return [problem for _unused, problem in file_issues(folder, files, full=full)]


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
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
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
            if (_stat(os.path.join(partial, entry["path"]), partial) or [None])[0] != entry["size"]
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


def remove_inside(folder: str, rel: str) -> None:
    """Remove folder/rel without following a link: where a folder on the way is a link (or not a folder), that link
    itself is removed; a folder is removed whole (shutil.rmtree, which follows no link inside it)."""
    path = folder
    for part in rel.split("/"):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return
    shutil.rmtree(path)


def verified(folder: str, lock: dict) -> list[str]:
    """file_problems(full=True) for folder, each file named there removed, so that the next fetch gets it again."""
    issues = file_issues(folder, lock["files"], full=True)
    for rel, _unused in issues:
        remove_inside(folder, rel)
    return [problem for _unused, problem in issues]


def make_partial(dest: str, lock: dict, gid: int) -> dict:
    """Create the missing folders above dest (make_parents), <dest>.partial and the folders the lock's files need in
    it (owner root, group gid, 0550), refusing what place_problems refuses; an existing one is kept (a fetch resumes) once a link, a file owned by another user
    or with other names (hard links), and anything else than a file or a folder are removed from it (never
    followed). Returns problems, removed (paths inside the partial folder)."""
    problems = place_problems(dest) or make_parents(dest) or place_problems(dest)
    if problems:
        return {"problems": problems, "removed": []}
    partial, removed = dest + PARTIAL, []
    needed = {""}
    for entry in lock["files"]:
        parts = entry["path"].split("/")[:-1]
        needed.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    for folder in sorted(needed):  # a folder before the folders in it
        path = os.path.join(partial, folder) if folder else partial
        if not _make_folder(path, gid, removed, folder):
            return {
                "problems": place_problems(dest) or [f"{path}: not a folder owned by root"],
                "removed": removed,
            }
    return {"problems": _clear_partial(partial, removed), "removed": removed}


def _make_folder(path: str, gid: int, removed: list, folder: str) -> bool:
    """The folder ``folder`` of the partial folder at ``path``, made or kept (root's, group gid); what stood there
    instead (a link, a file) is removed and added to ``removed``. False when it is not a folder owned by root."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) and folder:
        os.unlink(path)  # a link or a file where a folder goes, in the partial folder only root writes
        removed.append(folder)
        os.mkdir(path, 0o700)
        st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or not owned(st):
        return False
    os.chown(path, 0 if os.geteuid() == 0 else -1, gid, follow_symlinks=False)
    os.chmod(path, 0o550 if os.geteuid() == 0 else 0o750)
    return True


def _clear_partial(partial: str, removed: list) -> list[str]:
    """Remove from the partial folder every link, file of another user or with other names, and anything else than
    a file or a folder (adding them to ``removed``); the problems: folders of another user."""
    refused = []
    for root, dirs, names in os.walk(partial):
        for name in dirs + names:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                if not owned(st):
                    refused.append(f"{path}: a folder owned by uid {st.st_uid}, not root; remove it and run again")
            elif not stat.S_ISREG(st.st_mode) or not owned(st) or st.st_nlink != 1:
                os.unlink(path)
                removed.append(os.path.relpath(path, partial))
    return refused


def finish(partial: str, dest: str, lock: dict) -> dict:
    """Verify partial against the lock (every file hashed), remove what the lock does not list, check it for a
    launch, stamp it, then move dest (a previous checkpoint) to dest.previous and partial to dest. A file that does not
    match is deleted, so the next run copies it again; problems leave dest as it was. Returns problems, removed."""
    problems = place_problems(dest)
    if not problems and not os.path.isdir(partial):
        problems = [f"{partial}: missing, nothing was fetched into it"]
    problems = problems or verified(partial, lock)
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
            remove_inside(os.path.dirname(previous), os.path.basename(previous))
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
