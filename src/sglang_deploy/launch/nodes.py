"""Multi-node tensor-parallel groups: the hosts of one inventory group run one SGLang server (--nnodes > 1).

Used on the controller by profiles.render (the flags), the filter plugin (a host's place in its group, the checks
across the group) and fleet.plan (a group is one server of a rolling deploy). The check that rank 0's port is free
runs on the host: host/ports.py.

What SGLang does with several nodes (python/sglang/srt/arg_groups/fields/parallel.py for the flags;
entrypoints/engine.py and utils/common.py for what each rank serves; distributed/parallel_state.py for the timeout):
- every node runs the same command except --node-rank; --tp-size counts the GPUs of all nodes, and
  (tp_size * pp_size) % nnodes must be 0 (server_args.py, ServerArgs.check_server_args);
- rank 0 holds the torch TCPStore on the port of --dist-init-addr, the tokenizer and the HTTP API; ranks >= 1 run
  schedulers only, with a stand-in server on --host:--port that answers /health and nothing of the API;
- ranks wait for each other in the rendezvous; one that never comes makes rank 0 exit after --dist-timeout
  seconds (unset: torch's 30 minutes); a rank that dies takes the group down;
- on SIGTERM ranks >= 1 wait for rank 0's shutdown request: stop rank 0 first.
SGLang does not set the socket interface of NCCL and Gloo; on hosts with several interfaces set both.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import unquote

SOCKET_IFNAME_ENV = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
# Flags that differ between the nodes of one group: everything else must be the same on every node.
RANK_FLAG = "--node-rank"


class NodeError(ValueError):
    """A multi-node group that cannot be rendered: the message names the fix."""


def node(
    host: str,
    group: str,
    members: list[str] | None,
    rank0_address: str,
    port: object,
    timeout: object,
    ifname: str = "",
) -> dict:
    """``host``'s place in the multi-node group ``group`` whose hosts, in inventory order, are ``members`` (rank 0
    first): {"group", "hosts", "rank", "nnodes", "dist_init_addr", "dist_timeout", "socket_ifname"}; {} when
    ``group`` is empty (a server of its own)."""
    if not group:
        return {}
    _check_members(host, group, members)
    port_num = _positive_int(port, "sglang_dist_init_port")
    if port_num > 65535:
        raise NodeError(f"sglang_dist_init_port {port_num} is not a TCP port: use one of 1-65535")
    address = str(rank0_address)
    if not address or any(c.isspace() for c in address):
        raise NodeError(f"rank 0 ({members[0]}) of group {group} has no usable sglang_node_address ({address!r})")
    if local_only(address):
        raise NodeError(
            f"rank 0 ({members[0]}) of group {group} has the loopback or unspecified sglang_node_address {address}:"
            " every other node would reach itself there and never join; set sglang_node_address on it to an address"
            " the other nodes reach"
        )
    return {
        "group": group,
        "hosts": list(members),
        "rank": members.index(host),
        "nnodes": len(members),
        "dist_init_addr": f"[{address.strip('[]')}]:{port_num}" if ":" in address else f"{address}:{port_num}",
        "dist_timeout": _positive_int(timeout, "sglang_dist_timeout"),
        "socket_ifname": str(ifname or ""),
    }


def _address(address: object) -> tuple[str, ipaddress.IPv4Address | ipaddress.IPv6Address | None]:
    """(the name in lower case, its IP or None) for an IP, [IPv6], zone-suffixed or host name; IPv4 also in the
    short forms URL parsers and inet_aton read (127.1, 0x7f.1, 2130706433); IPv4-mapped IPv6 as its IPv4."""
    text = unquote(str(address)).strip().strip("[]").split("%", 1)[0].rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        try:  # inet_aton stops at a space: only what an IPv4 number can hold
            ip = ipaddress.IPv4Address(socket.inet_aton(text)) if re.fullmatch(r"[0-9a-fx.]+", text) else None
        except OSError:
            ip = None
    return text, getattr(ip, "ipv4_mapped", None) or ip


def _is_loopback(text: str, ip) -> bool:
    local_names = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
    return text in local_names or text.endswith(".localhost") or (ip is not None and ip.is_loopback)


def loopback(address: object) -> bool:
    """Whether ``address`` is this host's loopback: a loopback IP in any form, or a localhost name."""
    return _is_loopback(*_address(address))


def local_only(address: object) -> bool:
    """Whether another host cannot reach this host at ``address``: loopback, or unspecified (0.0.0.0, ::; a
    connection there stays on the dialing host)."""
    text, ip = _address(address)
    return _is_loopback(text, ip) or (ip is not None and ip.is_unspecified)


def _positive_int(value: object, name: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        number = 0
    if number < 1:
        raise NodeError(f"{name} {value!r} must be a positive whole number")
    return number


def launch_args(place: dict) -> tuple[dict, dict]:
    """The flags and environment a node's launch adds to its profile: ({} , {}) for a server of its own."""
    if not place:
        return {}, {}
    args = {
        "nnodes": place["nnodes"],
        "node-rank": place["rank"],
        "dist-init-addr": place["dist_init_addr"],
        "dist-timeout": place["dist_timeout"],
    }
    env = {name: place["socket_ifname"] for name in SOCKET_IFNAME_ENV} if place.get("socket_ifname") else {}
    return args, env


def _check_members(host: str, group: str, members: list[str] | None) -> None:
    if members is None:
        raise NodeError(
            f"sglang_multinode_group {group!r} is not a group of the inventory: name the inventory group whose hosts form the server"
        )
    if host not in members:
        raise NodeError(
            f"{host} has sglang_multinode_group {group!r} but is not a host of that group: add it, or unset the variable"
        )
    if len(members) < 2:
        raise NodeError(
            f"group {group} has one host: a multi-node server needs two or more (or unset sglang_multinode_group)"
        )


def members_of(hosts: list[str], group_names: dict[str, str], groups: dict[str, list[str]]) -> dict[str, list[str]]:
    """host -> the hosts of its multi-node group (inventory order), for the hosts with a group name in
    ``group_names`` (their sglang_multinode_group); NodeError naming the fix for a name that is no inventory group
    or a group the host is not in, the refusals of node()."""
    out = {}
    for host in hosts:
        group = group_names.get(host) or ""
        if group:
            members = groups.get(group)
            _check_members(host, group, members)
            out[host] = list(members)
    return out


def api_servers(hosts: list[str], members: dict[str, list[str]]) -> list[str]:
    """The hosts that answer the API: servers of their own and rank 0 of each multi-node group (members_of's)."""
    return [h for h in hosts if h not in members or members[h][0] == h]


def _flags(argv: list) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for word in argv:
        word = str(word)
        if word.startswith("--"):
            current = word
            out[current] = []
        elif current:
            out[current].append(word)
    out.pop(RANK_FLAG, None)
    return out


def _differ(what: str, values: dict[str, object], fix: str) -> str | None:
    if len({str(v) for v in values.values()}) < 2:
        return None
    listed = ", ".join(f"{h}: {v}" for h, v in values.items())
    return f"{what} differ ({listed}): {fix}"


def group_problems(group: str, hosts: list[str], records: dict[str, dict | None], in_run: list[str]) -> list[str]:
    """Why the nodes of ``group`` cannot start as one server. ``hosts``: the group in rank order; ``in_run``: the
    hosts still in the play; ``records``: host -> {"profile", "stack", "sglang_version", "argv", "env"} as each
    node rendered its launch (None when it did not get that far)."""
    problems = []
    for rank, host in enumerate(hosts):
        if host not in in_run:
            problems.append(
                f"rank {rank} ({host}) of group {group} is not in this run (unreachable, failed, or left out by --limit):"
                f" bring it back, or leave the whole group out (--limit '!{group}')"
            )
    present = {h: records[h] for h in hosts if records.get(h)}
    if problems or len(present) < len(hosts):
        return problems or [f"group {group}: not every node rendered its launch; fix the failure above on the others"]
    where = f"group_vars/{group}.yml"
    checks = (
        (
            "profile",
            "the profiles of the nodes",
            f"deploy one profile to the whole group (set it in {where}, not per host)",
        ),
        (
            "stack",
            "the stack bundles of the nodes",
            f"install one stack bundle on every node (sglang_stack_bundle in {where})",
        ),
        ("sglang_version", "the SGLang releases of the nodes", f"install one stack bundle on every node ({where})"),
    )
    for key, what, fix in checks:
        found = _differ(f"group {group}: {what}", {h: r.get(key) for h, r in present.items()}, fix)
        if found:
            problems.append(found)
    return problems or _launch_differences(group, hosts, present, where)


def _launch_differences(group: str, hosts: list[str], present: dict[str, dict], where: str) -> list[str]:
    """The first flag and the first environment variable on which each node's launch differs from rank 0's."""
    problems = []
    first, first_flags = hosts[0], _flags(present[hosts[0]]["argv"])
    for host in hosts[1:]:
        flags = _flags(present[host]["argv"])
        for flag in sorted(set(first_flags) | set(flags)):
            if first_flags.get(flag) != flags.get(flag):
                shown = {
                    h: " ".join(f.get(flag, ["(absent)"])) or "(switch)"
                    for h, f in ((first, first_flags), (host, flags))
                }
                problems.append(
                    f"group {group}: every node must run the same launch but --node-rank, and {flag} differs"
                    f" ({', '.join(f'{h}: {v}' for h, v in shown.items())}): set it for the whole group in {where}, not per host"
                )
                break
        # Values unshown: an environment may hold what should not be printed.
        first_env, env = present[first].get("env") or {}, present[host].get("env") or {}
        for name in sorted((set(first_env) | set(env)) - set(SOCKET_IFNAME_ENV)):
            if first_env.get(name) != env.get(name):
                problems.append(
                    f"group {group}: every node must run with the same environment but the socket interface, and"
                    f" {name} differs between {first} and {host}: set it for the whole group in {where}"
                    " (sglang_server_env), not per host"
                )
                break
    return problems
