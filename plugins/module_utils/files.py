"""Files written whole: a checked destination and an atomic write. Used on hosts (the benchmark's result) and on
the controller (tune's store, report and promoted profiles, compare's report, the model and stack locks)."""

from __future__ import annotations

import os
import tempfile


def check_dest(dest: str) -> str:
    """The absolute path write_file would write ``dest`` to; ValueError (before anything runs) when it cannot."""
    path = os.path.abspath(os.path.expanduser(dest))
    if os.path.isdir(path):
        raise ValueError(f"{dest} is a folder: give a file name in it")
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        raise ValueError(f"{dest} exists and is not a regular file: give a new file name or a regular file to replace")
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write to {dest}: {parent} is not a writable folder")
    return path


def check_folder(folder: str, names) -> str:
    """The absolute path of ``folder``; ValueError naming the fix when the files ``names`` cannot be written into it
    as write_file writes: the folder or a file is a link (a dangling one too) or not what it should be."""
    path = os.path.abspath(os.path.expanduser(str(folder)))
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        raise ValueError(f"{folder} is a link or not a folder: remove it, or give a new folder")
    for name in names:
        check_dest(os.path.join(path, name))
    return path


def write_files(folder: str, files: dict, mode: int = 0o644) -> str:
    """``files`` (name: text or bytes) written into ``folder`` by write_file once check_folder refused none of them;
    returns the folder's absolute path."""
    path = check_folder(folder, files)
    for name, data in files.items():
        write_file(data, os.path.join(path, name), mode)
    return path


def write_file(data: str | bytes, dest: str, mode: int = 0o600, sync: bool = False) -> str:
    """Write ``data`` (text as UTF-8) to ``dest`` with ``mode``, parent directories created; returns the absolute
    path. A private temporary file beside it (not a fixed name a link could stand on), then an atomic rename, which
    replaces a link at ``dest`` instead of writing through it; ``sync``: on disk (file and folder) on return."""
    path = os.path.abspath(os.path.expanduser(dest))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(fh.fileno(), mode)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    if sync:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return path
