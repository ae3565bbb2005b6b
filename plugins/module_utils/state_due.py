"""What differs on a host from the state a role converges it to (stdlib only; runs on hosts).

One call compares every file (content digest, owner, group, mode), folder, installed path, account and unit the
role would otherwise check with a task each: a role skips its convergence only when nothing here differs, so a
drift on the host (an edited unit, a removed venv, a stopped service) or in the inventory (a flag, a worker, a wheel:
the digests it renders) still converges on the next run.
"""

from __future__ import annotations

import glob
import grp
import os
import pwd
import stat

from .wheel_fetch import sha256_file


def _owner(st: os.stat_result, want: dict) -> list[str]:
    out = []
    try:
        if "owner" in want and pwd.getpwuid(st.st_uid).pw_name != want["owner"]:
            out.append("owner")
    except KeyError:
        out.append("owner")
    try:
        if "group" in want and grp.getgrgid(st.st_gid).gr_name != want["group"]:
            out.append("group")
    except KeyError:
        out.append("group")
    if "mode" in want and stat.S_IMODE(st.st_mode) != int(str(want["mode"]), 8):
        out.append("mode")
    return out


def _differ(entries: list[dict], is_kind, not_kind: str, content=lambda want: []) -> list[str]:
    """``path: what`` for each entry ({path, owner?, group?, mode?}) that is absent, not of its kind or differs."""
    out = []
    for want in entries:
        path = want["path"]
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out.append(f"{path}: absent")
            continue
        what = content(want) + _owner(st, want) if is_kind(st.st_mode) else [not_kind]
        if what:
            out.append(f"{path}: {', '.join(what)}")
    return out


def files_differ(files: list[dict]) -> list[str]:
    """The files ({path, sha256?, owner?, group?, mode?}) that are absent, no regular file (a link too) or differ."""
    return _differ(
        files,
        stat.S_ISREG,
        "not a regular file",
        lambda want: ["content"] if want.get("sha256") and sha256_file(want["path"]) != want["sha256"] else [],
    )


def dirs_differ(dirs: list[dict]) -> list[str]:
    """The folders ({path, owner?, group?, mode?}) that are absent, no folder or differ."""
    return _differ(dirs, stat.S_ISDIR, "not a folder")


def absent(patterns: list[str]) -> list[str]:
    """The glob patterns that match nothing (an installed package's dist-info, a venv's interpreter)."""
    return [f"{p}: absent" for p in patterns if not glob.glob(p)]


def account_differs(account: dict) -> list[str]:
    """What differs of the system account ({user, group, shell?, home?}): absent, or its primary group, shell or
    home."""
    try:
        group = grp.getgrnam(account["group"])
    except KeyError:
        return [f"group {account['group']}: absent"]
    try:
        user = pwd.getpwnam(account["user"])
    except KeyError:
        return [f"user {account['user']}: absent"]
    what = [
        name
        for name, have, want in (
            ("group", user.pw_gid, group.gr_gid),
            ("shell", user.pw_shell, account.get("shell", user.pw_shell)),
            ("home", user.pw_dir, account.get("home", user.pw_dir)),
        )
        if have != want
    ]
    return [f"user {account['user']}: {', '.join(what)}"] if what else []
