"""Prune of a host's stacks: the venvs a running process holds, which venvs and wheels go (never the serving one,
the rollback ones, or one in use), and their removal. The `sglang_stack_prune` module runs it. Stdlib only,
Python 3.10+.
"""

from __future__ import annotations

import os
import re
import shutil


def venvs_in_use(venvs_dir: str) -> dict[str, str]:
    """Venv folders of venvs_dir that a running process holds: a file of it mapped (a server's torch and CUDA
    libraries, /proc/PID/maps) or open (/proc/PID/fd). Name -> "pid N (comm)". Needs root to see every process."""
    prefix = os.path.realpath(venvs_dir) + os.sep
    held: dict[str, str] = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        base = os.path.join("/proc", pid)
        paths = []
        try:
            with open(os.path.join(base, "maps"), encoding="utf-8", errors="replace") as handle:
                fields = [line.rstrip("\n").split(None, 5) for line in handle]
            paths = [parts[5] for parts in fields if len(parts) == 6]
            for fd in os.listdir(os.path.join(base, "fd")):
                paths.append(os.readlink(os.path.join(base, "fd", fd)))
        except OSError:  # gone, or not ours to read (the role runs this as root)
            pass
        for path in paths:
            if path.startswith(prefix):
                name = path[len(prefix) :].split(os.sep, 1)[0]
                if name not in held:
                    try:
                        with open(os.path.join(base, "comm"), encoding="utf-8") as handle:
                            comm = handle.read().strip()
                    except OSError:
                        comm = "?"
                    held[name] = f"pid {pid} ({comm})"
    return held


def prune_plan(venvs_dir: str, serving: str, rollback: list[str], keep: int, in_use: dict[str, str]) -> dict:
    """Which venv folders of venvs_dir to keep (name -> reason) and which to remove (paths).

    Kept: the serving venv (it takes its place in keep also before it is built, so check mode plans what the run
    does), the rollback venv (the first of the rollback names that exists and is not the serving one: the venv the
    last good profile ran on, then the previous link target), the newest others until keep venvs are kept in all,
    and every venv a process holds (in_use), whatever keep says. Folders whose name starts with '.' are what an
    interrupted removal left: removed unless held.
    """
    if not os.path.isdir(venvs_dir):
        return {"kept": {}, "remove": []}
    folders = [entry for entry in os.scandir(venvs_dir) if entry.is_dir(follow_symlinks=False)]
    folders.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime, reverse=True)
    names = {entry.name for entry in folders}
    named = {serving: "serving"} if serving else {}
    for name in rollback:
        if name in names and name not in named:
            named[name] = "rollback"
            break
    kept = {name: reason for name, reason in named.items() if name in names}
    room = keep - len(named)
    for entry in folders:
        if entry.name in named:
            continue
        if entry.name in in_use:
            kept[entry.name] = f"in use by {in_use[entry.name]}"
        elif room > 0 and not entry.name.startswith("."):
            kept[entry.name] = "newest of the others"
            room -= 1
    return {"kept": kept, "remove": sorted(entry.path for entry in folders if entry.name not in kept)}


def requirements_wheels(requirement_files: list[str], wheel_dir: str) -> set[str]:
    """Wheel files (relative to wheel_dir) that requirements files written by requirements_text name; a file that
    does not exist names none (a venv installed from the indexes), one that cannot be read raises OSError."""
    named = set()
    for path in requirement_files:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                named.update(os.path.relpath(line.split()[0], wheel_dir) for line in handle if line.strip())
    return named


# The folder of a wheel built from an SGLang git commit (stack_lock.build_git_wheel): sglang-<12 hex digits>.
GIT_WHEEL_DIR = re.compile(r"sglang-[0-9a-f]{12}")


def git_wheel_dir(commit: str) -> str:
    """The wheelhouse folder (GIT_WHEEL_DIR) of the wheel built from this SGLang commit."""
    return f"sglang-{commit[:12]}"


def unreferenced_wheels(wheel_dir: str, referenced: set[str]) -> list[str]:
    """Wheel files in wheel_dir and its sglang-<commit>/ folders, and downloads that download() left unfinished
    (.NAME.part), whose path relative to wheel_dir is not in referenced; paths in wheel_dir, sorted."""
    found = []
    for folder, dirs, files in os.walk(wheel_dir):
        dirs[:] = [d for d in dirs if folder == wheel_dir and GIT_WHEEL_DIR.fullmatch(d)]
        for name in files:
            path = os.path.join(folder, name)
            ours = name.endswith(".whl") or (name.startswith(".") and name.endswith(".part"))
            if ours and os.path.relpath(path, wheel_dir) not in referenced:
                found.append(path)
    return sorted(found)


def tree_size(path: str) -> int:
    """Bytes of the files under path (links not followed)."""
    total = 0
    for folder, _unused, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def remove_venv(path: str) -> None:
    """Rename the venv to a hidden folder first (it disappears at once, never half-deleted under its name), then
    delete it; a removal cut short leaves only the hidden folder, which the next prune removes."""
    hidden = path
    if not os.path.basename(path).startswith("."):
        hidden = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".removing")
        if os.path.isdir(hidden):
            shutil.rmtree(hidden)
        os.replace(path, hidden)
    shutil.rmtree(hidden)


def remove_wheels(wheel_dir: str, paths: list[str]) -> None:
    """Delete wheel files of wheel_dir, then the sub-folders (sglang-<commit>/) that this left empty; no other
    folder."""
    for path in paths:
        os.unlink(path)
    top = os.path.normpath(wheel_dir)
    for folder in sorted({os.path.dirname(os.path.normpath(path)) for path in paths} - {top}):
        if not os.listdir(folder):
            os.rmdir(folder)
