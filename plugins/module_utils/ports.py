"""Which processes listen on a TCP port (read from /proc), and whether one outside the server's unit holds rank 0's
dist-init port of a multi-node group: the `sglang_port_free` module runs it on the host before the group starts.
Stdlib only.
"""

from __future__ import annotations

import os

LISTEN_STATE = "0A"  # TCP_LISTEN in /proc/net/tcp (include/net/tcp_states.h)


def port_holders(port: int, proc: str = "/proc") -> list[dict]:
    """The processes listening on TCP ``port`` (any address, IPv4 or IPv6): [{"pid", "name", "unit", "uid"}], where
    unit is the systemd service whose control group holds the process and uid the socket's owner. A socket whose
    process cannot be seen (another user's, without CAP_SYS_PTRACE: a container's root) has pid None."""
    sockets: dict[str, int] = {}  # "socket:[inode]" -> owner uid
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{table}", encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == LISTEN_STATE and int(fields[1].rsplit(":", 1)[1], 16) == port:
                sockets[f"socket:[{fields[9]}]"] = int(fields[7])
    holders, seen = [], set()
    for pid in filter(str.isdigit, os.listdir(proc)) if sockets else ():
        try:
            fds = os.listdir(f"{proc}/{pid}/fd")
        except OSError:  # gone, or another user's
            continue
        found = {_link(f"{proc}/{pid}/fd/{fd}") for fd in fds} & set(sockets)
        if found:
            seen |= found
            uid = sockets[next(iter(found))]
            holders.append(
                {
                    "pid": int(pid),
                    "name": _read(f"{proc}/{pid}/comm"),
                    "unit": _unit(f"{proc}/{pid}/cgroup"),
                    "uid": uid,
                }
            )
    unseen = {uid for inode, uid in sockets.items() if inode not in seen}
    return holders + [{"pid": None, "name": "unknown", "unit": None, "uid": uid} for uid in sorted(unseen)]


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed since the listing
        return ""


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _unit(cgroup_file: str) -> str | None:
    """The .service in a process's control group path (cgroup v2 `0::/system.slice/x.service`, or v1's name=systemd)."""
    for line in _read(cgroup_file).splitlines():
        for part in reversed(line.split(":", 2)[-1].split("/")):
            if part.endswith(".service"):
                return part
    return None


def port_problem(port: int, holders: list[dict], service: str, service_uid: int | None = None) -> str | None:
    """Why rank 0 cannot open its dist-init ``port``: held by a process outside ``service`` (our own server holds it
    while it runs, and frees it when it restarts). A socket whose process is hidden counts as the server's when its
    owner is the server's account ``service_uid``."""
    others = [
        h
        for h in holders
        if h["unit"] != f"{service}.service"
        and not (h["pid"] is None and service_uid is not None and h["uid"] == service_uid)
    ]
    if not others:
        return None
    listed = ", ".join(
        f"pid {h['pid']} ({h['name']}{', unit ' + h['unit'] if h['unit'] else ''})"
        if h["pid"]
        else f"a process of uid {h['uid']} that this check cannot see"
        for h in others
    )
    return (
        f"port {port}, where rank 0 opens the group's --dist-init-addr, is taken by {listed}: stop that process,"
        " or set sglang_dist_init_port to a free port for the group"
    )
