"""What differs on a host from the state a role converges it to (stdlib only; runs on hosts).

One call compares every file (content digest, owner, group, mode), folder, installed package, account and unit the
role would otherwise check with a task each: a role skips its convergence only when nothing here differs, so a
drift on the host (an edited unit, a broken venv, a stopped service) or in the inventory (a flag, a worker, a wheel:
the digests it renders) still converges on the next run.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
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


def _differ(entries: list[dict], is_kind, not_kind: str, content=lambda want: [], follow: bool = False) -> list[str]:
    """``path: what`` for each entry ({path, owner?, group?, mode?, follow?}) that is absent, unreadable, not of its
    kind or differs (a link is followed only with the entry's ``follow``, else ``follow``)."""
    out = []
    for want in entries:
        path = want["path"]
        try:
            st = os.stat(path) if want.get("follow", follow) else os.lstat(path)
            what = content(want) + _owner(st, want) if is_kind(st.st_mode) else [not_kind]
        except FileNotFoundError:
            what = ["absent"]
        except OSError as e:  # a file where a folder should be on the way, no permission
            what = [e.strerror or type(e).__name__]
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
    """The folders ({path, owner?, group?, mode?, follow?}) that are absent, no folder or differ. A link to one is one,
    as the file module follows it; not with ``follow: false``, on which the file module with follow false fails."""
    return _differ(dirs, stat.S_ISDIR, "not a folder", follow=True)


def release(version: str) -> tuple:
    """A version as pip compares releases: 1.13 and 1.13.0 alike (trailing zeros of the release dropped)."""
    m = re.match(r"v?(\d+(?:\.\d+)*)(.*)", version.strip().lower())
    if not m:
        return (version.strip().lower(),)
    numbers = [int(n) for n in m.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return (*numbers, m.group(2))


def account_differs(account: dict) -> list[str]:
    """What differs of the system account ({user, group, shell?, home?, groups?}): absent, or its primary group,
    shell or home, or a group of ``groups`` that exists and does not list it (the user module's append adds it
    there; one absent on the host is left out, as the role's own account task leaves it out)."""
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
    missing = []
    for name in account.get("groups") or []:
        try:
            if account["user"] not in grp.getgrnam(name).gr_mem:
                missing.append(name)
        except KeyError:  # no such group on the host: nothing to join
            pass
    if missing:
        what.append(f"not in {', '.join(missing)}")
    return [f"user {account['user']}: {', '.join(what)}"] if what else []
