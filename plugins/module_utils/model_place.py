"""Where a checkpoint goes on a host: the model folder (sglang_model_dir), <dest>.partial and <dest>.previous beside it,
and the folders above them. What the role refuses before it works there as root (a system folder, a folder another
user could swap for a link, a folder that holds no checkpoint), and the missing folders above it, made without
following a link. Stdlib only; model.py installs the checkpoint.
"""

from __future__ import annotations

import os
import stat

from .text import CONTROL

STAMP = ".sglang-model.json"
PARTIAL = ".partial"
PREVIOUS = ".previous"


# The system's folders, which a checkpoint never replaces: each of _SYSTEM_TREES and everything below it, each of
# _SYSTEM_FOLDERS itself, and a home folder /home/USER itself. A checkpoint goes in a folder of its own below them.
_SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/efi", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/lost+found", "/proc", "/run",
    "/sbin", "/snap", "/sys", "/usr",
)  # fmt: skip
_SYSTEM_FOLDERS = {
    "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var", "/var/backups", "/var/cache", "/var/lib",
    "/var/local", "/var/lock", "/var/log", "/var/mail", "/var/opt", "/var/run", "/var/snap", "/var/spool", "/var/tmp",
}  # fmt: skip


def system_folder(path: str) -> bool:
    """Whether path is one of the system's folders (_SYSTEM_TREES and below, _SYSTEM_FOLDERS, /home/USER)."""
    return (
        path in _SYSTEM_FOLDERS
        or any(path == tree or path.startswith(tree + "/") for tree in _SYSTEM_TREES)
        or (path.startswith("/home/") and path.count("/") == 2)
    )


def dest_problem(dest: str) -> str:
    """Why dest cannot be a checkpoint folder ('' when it can): an absolute, normalized path below the root, since
    <dest>.partial and <dest>.previous are made beside it and the folder there is replaced; never a system folder
    (system_folder), by its name or by where the links of the folders above it lead."""
    if not dest or not os.path.isabs(dest) or os.path.normpath(dest) != dest or dest == "/" or CONTROL.search(dest):
        return (
            f"model folder {dest[:80]!r}: an absolute, normalized path below / (e.g. /data/models/NAME); "
            "set sglang_model_dir or sglang_model_path"
        )
    real = os.path.join(os.path.realpath(os.path.dirname(dest)), os.path.basename(dest))
    if system_folder(dest) or system_folder(real):
        where = dest if system_folder(dest) else f"{dest} (really {real})"
        return (
            f"model folder {where} is a system folder or inside one: the role replaces that folder and deletes the "
            "one before it; set sglang_model_dir (or sglang_model_path) to a folder of its own, e.g. /data/models/NAME"
        )
    return ""


def owned(st: os.stat_result) -> bool:
    return st.st_uid in (0, os.geteuid())


def _unsafe_folder(path: str, *, missing_ok: bool = True) -> str:
    """Why another user could replace what is in the folder path ('' when no one but root can), or path itself: a
    link of another user's (which they can point elsewhere at any time) or one that leads nowhere."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        # the role creates it (make_parents: owner root, 0755)
        return "" if missing_ok else f"{path} was removed while the role made the folders in it; run again"
    if stat.S_ISLNK(st.st_mode):
        if not owned(st):
            return f"{path} is a link owned by uid {st.st_uid}, not root"
        try:
            st = os.stat(path)
        except OSError:
            return f"{path} is a link that leads to no folder"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if not owned(st):
        return f"{path} is owned by uid {st.st_uid}, not root"
    acl = _has_acl(path)  # its group bits are then the mask: what the users and groups it names may do at most
    writable = st.st_mode & (0o002 if st.st_gid == 0 and not acl else 0o022)
    if writable and not st.st_mode & stat.S_ISVTX:
        what = f"mode {stat.S_IMODE(st.st_mode):04o}" + (", an ACL" if acl else "")
        return f"{path} is writable by other users ({what}) without the sticky bit"
    return ""


def _has_acl(path: str) -> bool:
    try:
        os.getxattr(path, "system.posix_acl_access")
    except (OSError, AttributeError):  # none (ENODATA), or a file system without ACLs
        return False
    return True


def place_problems(dest: str) -> list[str]:
    """Why the role cannot work at dest safely ([] when it can): a folder above it that another user can write (who
    could swap <dest>.partial for a link between a check and its use), or dest, <dest>.partial or <dest>.previous
    already there as something else than a folder owned by root (a link planted on a shared models folder would
    make the role, as root, copy into, chmod and delete files where it leads), or dest or <dest>.previous a folder
    that holds no checkpoint (_not_a_checkpoint). Each names the fix."""
    parents = [os.path.dirname(dest)]
    while parents[-1] != "/":
        parents.append(os.path.dirname(parents[-1]))
    real = os.path.realpath(parents[0])
    while real != "/":
        parents.append(real)
        real = os.path.dirname(real)
    problems = [p for p in dict.fromkeys(_unsafe_folder(parent) for parent in reversed(parents)) if p]
    if problems:
        return [
            f"{'; '.join(problems)}: another user could replace {dest}, {dest}{PARTIAL} or {dest}{PREVIOUS} with a "
            f"link while the role works there as root; make the folders above {dest} owned by root and not writable "
            "by others (chown root, chmod go-w, or chmod +t as /tmp has), or set sglang_model_dir to such a folder"
        ]
    for path in (dest, dest + PARTIAL, dest + PREVIOUS):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        what = (
            "a link"
            if stat.S_ISLNK(st.st_mode)
            else "not a folder"
            if not stat.S_ISDIR(st.st_mode)
            else f"owned by uid {st.st_uid}, not root"
            if not owned(st)
            else ""
        )
        if what:
            problems.append(
                f"{path} is {what}: the role makes and replaces that folder itself and never works through what "
                "another user may have put there; see what it is, remove it (the link itself, not where it leads) "
                "and run again"
            )
        elif path != dest + PARTIAL:
            problems += _not_a_checkpoint(path, dest)
    return problems


def _not_a_checkpoint(path: str, dest: str) -> list[str]:
    """[] when the folder path (dest or <dest>.previous, which the role replaces or deletes) is empty, was installed
    by the role (its stamp) or holds a checkpoint (config.json at its top), else why the role leaves it alone."""
    try:
        names = set(os.listdir(path))
    except OSError as exc:
        return [f"{path}: {exc.strerror}, while the role looked into it; run again"]
    if not names or STAMP in names or "config.json" in names:
        return []
    fate = f"moves it to {dest}{PREVIOUS} and deletes that at the next install" if path == dest else "deletes it"
    return [
        f"{path} is a folder that holds no checkpoint (no config.json or {STAMP} at its top), which the role "
        f"{fate}: it was left as it is; move it away, or set sglang_model_dir (or sglang_model_path) to a folder of "
        "its own, e.g. /data/models/NAME, and run again"
    ]


def make_parents(dest: str) -> list[str]:
    """Create the missing folders above dest (owner root, 0755), never through a link: a folder another user made
    (or linked) there between the checks and the mkdir is refused, not chmodded or chowned where it leads (an Ansible
    file task follows a link planted after the plan). Returns problems."""
    missing, path = [], os.path.dirname(dest)
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    # The folder the first mkdir goes through: a link another user put there after place_problems (on a sticky
    # shared folder) would have the mkdir, fchown and fchmod below work where it leads.
    problem = _unsafe_folder(path, missing_ok=False) if missing else ""
    if problem:
        return [f"{problem}: made or changed by another user while the role made the folders above {dest}"]
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            return [f"{path}: {exc.strerror}, while the role made it; run again"]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return [f"{path}: a link or not a folder, made by another user while the role made it; remove it"]
        try:
            st = os.fstat(fd)
            if not owned(st):
                return [f"{path}: a folder of uid {st.st_uid}, made while the role made it; remove it and run again"]
            if os.geteuid() == 0:
                os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o755)
        finally:
            os.close(fd)
    return []
