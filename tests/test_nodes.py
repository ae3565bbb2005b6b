"""Multi-node tensor-parallel groups: a host's place, the rendered launch of each rank, the refusals before a
restart, the batches of a rolling deploy, the dist-init port check; and the wiring through a real ansible-playbook."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from ansible_json import PLAYBOOK_BIN, needs_playbook, run_playbook
from emulator_proc import free_port

from sglang_deploy.fleet import fleet
from sglang_deploy.launch import nodes, profiles
from sglang_deploy.rules import rules
from ansible_collections.sglang.deploy.plugins.module_utils import ports
from sglang_deploy.paths import REPO

SETTINGS = profiles.load_settings()
PROFILES = profiles.load_profiles()
PAIR = ["gpu-a", "gpu-b"]
EIGHT_GPUS = {"gpu_count": 8, "gpu_arch": "sm_90", "nvlink": True}


def place(host="gpu-b", members=PAIR, **kw):
    args = {"rank0_address": "10.0.0.1", "port": 20000, "timeout": 600, "ifname": "", **kw}
    return nodes.node(host, "pair", members, **args)


def launch(host, tp=16, version="0.5.23", profile="baseline", **kw):
    settings = {**SETTINGS, "sglang_tp": tp, "sglang_node": place(host, **kw)}
    return profiles.render(profile, PROFILES, settings, version)


def test_place_in_the_group_follows_the_inventory_order():
    assert place("gpu-b") == {
        "group": "pair",
        "hosts": PAIR,
        "rank": 1,
        "nnodes": 2,
        "dist_init_addr": "10.0.0.1:20000",
        "dist_timeout": 600,
        "socket_ifname": "",
    }
    assert place("gpu-a")["rank"] == 0
    assert place(rank0_address="fd00::1")["dist_init_addr"] == "[fd00::1]:20000"
    assert place(rank0_address="[fd00::1]")["dist_init_addr"] == "[fd00::1]:20000"
    assert nodes.node("gpu-a", "", None, "", 20000, 600) == {}


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"members": None}, "not a group of the inventory"),
        ({"members": ["gpu-a", "gpu-c"]}, "not a host of that group"),
        ({"host": "gpu-a", "members": ["gpu-a"]}, "needs two or more"),
        ({"port": 70000}, "1-65535"),
        ({"port": "x"}, "sglang_dist_init_port"),
        ({"timeout": 0}, "sglang_dist_timeout"),
        ({"rank0_address": ""}, "sglang_node_address"),
        # rank 0 reached as itself (ansible_host 127.0.0.1 behind a tunnel, a connection=local controller): every
        # other rank would dial its own loopback and never join, and the group would be down for sglang_dist_timeout
        ({"rank0_address": "127.0.0.1"}, "loopback"),
        ({"rank0_address": "localhost"}, "loopback"),
        ({"rank0_address": "::1"}, "loopback"),
        ({"rank0_address": "127.8.0.1"}, "loopback"),
        ({"rank0_address": "LOCALHOST"}, "loopback"),
        ({"rank0_address": "0.0.0.0"}, "unspecified"),
        ({"rank0_address": "[::ffff:127.0.0.1]"}, "loopback"),
        ({"rank0_address": "[0:0:0:0:0:0:0:1]"}, "loopback"),
    ],
)
def test_place_refuses_a_bad_group(kwargs, fix):
    with pytest.raises(nodes.NodeError, match=fix):
        place(**kwargs)


LOCAL_ONLY = ["127.0.0.1", "LOCALHOST", "localhost.", "db.localhost", "0.0.0.0", "::", "[::1]", "[::ffff:127.0.0.1]"]
LOCAL_ONLY += ["[0:0:0:0:0:0:0:1]", "::ffff:0.0.0.0", "127.1", "0x7f.0.0.1", "2130706433", "0", "::1%lo"]


@pytest.mark.parametrize("address", LOCAL_ONLY)
def test_an_address_only_its_own_host_reaches(address):
    assert nodes.local_only(address)


@pytest.mark.parametrize("address", ["10.0.0.1", "[fd00::1]", "::ffff:10.0.0.1", "gpu-a", "localhost-2", "deadbeef"])
def test_an_address_other_hosts_reach(address):
    assert not nodes.local_only(address)


def test_ranks_run_the_same_command_but_node_rank():
    rank0, rank1 = launch("gpu-a"), launch("gpu-b")
    differ = [(a, b) for a, b in zip(rank0.argv, rank1.argv) if a != b]
    assert differ == [("0", "1")] and len(rank0.argv) == len(rank1.argv)
    i = rank1.argv.index("--node-rank")
    assert rank1.argv[i - 2 : i + 6] == [
        "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000", "--dist-timeout", "600",
    ]  # fmt: skip
    assert rank0.argv[rank0.argv.index("--tp-size") + 1] == "16"
    assert rank0.listen == rank1.listen  # every rank gets --host and --port as configured


def test_the_flags_are_those_of_a_real_two_node_run():
    """SGLang 0.5.16 on one host with two ranks (tests/fixtures/sglang-0.5.16-h200/two_nodes.json): the same flags,
    in the same form (that run's rank 0 was 127.0.0.1, which two hosts cannot share: here it is 10.0.0.1)."""
    real = json.loads((REPO / "tests" / "fixtures" / "sglang-0.5.16-h200" / "two_nodes.json").read_text())
    host, port = real["dist_init_addr"].rsplit(":", 1)
    for rank, argv in enumerate(real["argv"]):
        ours = profiles.render(
            "baseline",
            PROFILES,
            {**SETTINGS, "sglang_tp": 2, "sglang_node": place(PAIR[rank], rank0_address="10.0.0.1", port=port)},
            "0.5.16",
        ).argv
        for flag in ("--nnodes", "--node-rank", "--dist-init-addr"):
            assert ours[ours.index(flag) + 1] == argv[argv.index(flag) + 1].replace(host, "10.0.0.1")


def test_a_server_of_its_own_renders_no_node_flags():
    argv = profiles.render("baseline", PROFILES, SETTINGS, "0.5.23").argv
    assert not {"--nnodes", "--node-rank", "--dist-init-addr", "--dist-timeout"} & set(argv)
    # The settings file holds the Jinja expression that only a playbook resolves: the CLI renders it as no group.
    assert isinstance(SETTINGS["sglang_node"], str)


def test_the_socket_interface_reaches_nccl_and_gloo():
    env = launch("gpu-b", ifname="ens5").env
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "ens5"
    assert "NCCL_SOCKET_IFNAME" not in launch("gpu-b").env


def errors_of(launch_, facts):
    return {f.rule: f.message for f in rules.errors(rules.validate(launch_, facts))}


def test_tp_times_pp_must_use_every_gpu_of_the_group():
    facts = {**EIGHT_GPUS, "node_count": 2, "node_rank": 1}
    found = errors_of(launch("gpu-b", tp=8), facts)
    assert "set sglang_tp to 16 for the whole group" in found["parallel-gpus"]
    assert errors_of(launch("gpu-b", tp=16), facts) == {}


def test_tp_times_pp_must_divide_by_nnodes():
    found = errors_of(launch("gpu-b", tp=15, members=["gpu-a", "gpu-b"]), {"node_count": 2, "node_rank": 1})
    assert "not divisible by --nnodes 2" in found["parallel-shape"]


@pytest.mark.parametrize(
    ("args", "facts", "fix"),
    [
        ({"nnodes": 3}, {"node_count": 2, "node_rank": 1}, "larger than the group (2 hosts)"),
        ({"nnodes": 2}, {}, "not in a multi-node group"),
        ({"node-rank": 0}, {"node_count": 2, "node_rank": 1}, "remove node-rank from the profile"),
    ],
)
def test_node_layout_refuses_a_profile_that_sets_it(args, facts, fix):
    profile_defs = {"t": {"description": "test", "args": {"tp-size": 16, **args}}}
    settings = {**SETTINGS, "sglang_node": place() if facts else {}}
    found = errors_of(profiles.render("t", profile_defs, settings, "0.5.23"), facts)
    assert fix in found["node-layout"]


@pytest.mark.parametrize("flag", ["dist-init-addr", "nccl-init-addr", "dist-init"])
def test_a_profile_cannot_move_the_groups_rendezvous_address(flag):
    """The profile's flags win over the inventory's: --nccl-init-addr 127.0.0.1:30000 replaced rank 1's
    --dist-init-addr and passed every check (they read only the canonical name)."""
    profile_defs = {"t": {"description": "test", "args": {"tp-size": 16, flag: "127.0.0.1:30000"}}}
    with pytest.raises(
        profiles.ProfileError, match=f"sets --{flag}: rank 0's rendezvous address comes from the inventory"
    ):
        profiles.render("t", profile_defs, {**SETTINGS, "sglang_node": place()}, "0.5.23")


def test_the_dist_init_port_may_not_be_the_api_port():
    found = errors_of(launch("gpu-b", port=30000), {"node_count": 2, "node_rank": 1})
    assert "set sglang_dist_init_port to another port" in found["node-layout"]


def record(host, **kw):
    base = {"profile": "baseline", "stack": "stable-0.5.23 abc", "sglang_version": "0.5.23"}
    return {**base, "argv": launch(host).argv, **kw}


def test_group_problems_name_each_fix():
    same = {h: record(h) for h in PAIR}
    assert nodes.group_problems("pair", PAIR, same, PAIR) == []
    missing = nodes.group_problems("pair", PAIR, same, ["gpu-a"])
    assert missing == [
        "rank 1 (gpu-b) of group pair is not in this run (unreachable, failed, or left out by --limit): bring it back,"
        " or leave the whole group out (--limit '!pair')"
    ]
    other = {**same, "gpu-b": record("gpu-b", profile="nextn", stack="nightly def")}
    problems = nodes.group_problems("pair", PAIR, other, PAIR)
    assert "profiles of the nodes differ (gpu-a: baseline, gpu-b: nextn)" in problems[0]
    assert "sglang_stack_bundle in group_vars/pair.yml" in problems[1]
    tp = {**same, "gpu-b": {**same["gpu-b"], "argv": launch("gpu-b", tp=8).argv}}
    assert "--tp-size differs (gpu-a: 16, gpu-b: 8)" in nodes.group_problems("pair", PAIR, tp, PAIR)[0]
    ifname = {
        h: {**same[h], "env": {"NCCL_SOCKET_IFNAME": f"eth{i}", "GLOO_SOCKET_IFNAME": f"eth{i}"}}
        for i, h in enumerate(PAIR)
    }
    assert nodes.group_problems("pair", PAIR, ifname, PAIR) == []  # each node's own interface name
    switch = {**ifname, "gpu-b": {**ifname["gpu-b"], "env": {**ifname["gpu-b"]["env"], "SGLANG_X": "secret-ish"}}}
    (problem,) = nodes.group_problems("pair", PAIR, switch, PAIR)
    assert "SGLANG_X differs between gpu-a and gpu-b" in problem and "secret-ish" not in problem


def test_plan_keeps_a_group_in_one_batch_rank_0_first():
    group_of = {"g0": ["g0", "g1"], "g1": ["g0", "g1"]}
    hosts = ["r1", "g1", "r2", "g0"]
    assert fleet.plan(hosts, group_of, 1) == {"order": ["r1", "g0", "g1", "r2"], "batches": [1, 2, 1]}
    assert fleet.plan(hosts, group_of, "50%")["batches"] == [1, 2, 1]  # 50% of 3 servers: 1
    assert fleet.plan(hosts, group_of, [1, "100%"])["batches"] == [1, 3]
    assert fleet.plan(hosts, group_of, 0)["batches"] == [4]
    assert fleet.plan(["r1", "r2"], {}, 2) == {"order": ["r1", "r2"], "batches": [2]}
    with pytest.raises(fleet.FleetError, match="widen --limit"):
        fleet.plan(["r1", "g0"], group_of, 1)


def test_api_servers_refuse_a_group_name_that_is_no_inventory_group():
    """The router's default worker list: a mistyped sglang_multinode_group once made every rank a server of its own,
    so ranks >= 1 (which answer only /health) were routed client requests."""
    groups = {"pair": ["g0", "g1"], "all": ["r1", "g0", "g1"]}
    names = {"g0": "pair", "g1": "pair"}
    assert nodes.api_servers(["r1", "g0", "g1"], nodes.members_of(["r1", "g0", "g1"], names, groups)) == ["r1", "g0"]
    with pytest.raises(nodes.NodeError, match="'piar' is not a group of the inventory"):
        nodes.members_of(["g0", "g1"], {"g0": "piar", "g1": "piar"}, groups)
    with pytest.raises(nodes.NodeError, match="r1 has sglang_multinode_group 'pair' but is not a host of that group"):
        nodes.members_of(["r1"], {"r1": "pair"}, groups)


def test_port_holders_find_this_process_and_its_unit():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        holders = ports.port_holders(port)
        assert [h["pid"] for h in holders] == [os.getpid()]
        unit = holders[0]["unit"]
        if unit:  # pytest itself runs inside a service: that service may hold the port
            assert ports.port_problem(port, holders, unit.removesuffix(".service")) is None
        problem = ports.port_problem(port, holders, "sglang-not-this")
        assert f"pid {os.getpid()}" in problem and "set sglang_dist_init_port to a free port" in problem
    assert ports.port_holders(port) == []


def test_a_socket_whose_process_is_hidden_counts_by_its_owner(tmp_path):
    """Root in a container without CAP_SYS_PTRACE cannot read another user's descriptors: /proc/net/tcp still names
    the listening socket's owner."""
    (tmp_path / "net").mkdir()
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    row = "   0: 00000000:4E20 00000000:0000 0A 00000000:00000000 00:00000000 00000000   997        0 10324923 1\n"
    (tmp_path / "net" / "tcp").write_text(header + row)
    holders = ports.port_holders(20000, proc=str(tmp_path))
    assert holders == [{"pid": None, "name": "unknown", "unit": None, "uid": 997}]
    assert ports.port_problem(20000, holders, "sglang", 997) is None
    assert "a process of uid 997 that this check cannot see" in ports.port_problem(20000, holders, "sglang", 998)
    assert ports.port_holders(20001, proc=str(tmp_path)) == []


@needs_playbook
def test_inventory_wiring_through_ansible(tmp_path):
    """The sglang role's defaults on an inventory with a two-host group: each host's place, its rendered launch, the
    router's workers and the roll's plan, through a real ansible-playbook (connection local, nothing started). Rank
    0's address is its ansible_host, as the role's default of sglang_node_address says, though hostvars, through
    which the other rank reads it, hold no role defaults."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "pair.yml").write_text("sglang_multinode_group: pair\nsglang_tp: 16\n")
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {
                "sglang_replicas": {
                    "hosts": {"solo": None},
                    "children": {"pair": {"hosts": {"gpu-a": {"ansible_host": "10.1.0.1"}, "gpu-b": None}}},
                },
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [
        {
            "name": "Render",
            "hosts": "all",
            "gather_facts": False,
            "roles": ["sglang"],
            "tasks": [
                {
                    "name": "Render and validate",
                    "sglang.deploy.sglang_profile": {
                        "profile": "baseline",
                        "profiles": "{{ sglang_profiles }}",
                        "settings": "{{ sglang_launch_settings }}",
                        "sglang_version": "0.5.23",
                        "facts": {
                            "gpu_count": 8,
                            "node_count": "{{ sglang_node.hosts | default([1]) | length }}",
                            "node_rank": "{{ sglang_node.rank | default(0) }}",
                        },
                    },
                },
                {
                    "name": "Plan",
                    "ansible.builtin.debug": {
                        "msg": {
                            "plan": "{{ ansible_play_hosts_all | sglang.deploy.sglang_fleet_plan(hostvars, groups, 1) }}",
                            "servers": "{{ groups.sglang_replicas | sglang.deploy.sglang_api_servers(hostvars, groups) }}",
                        }
                    },
                    "run_once": True,
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    out, doc = run_playbook(["-i", "inventory.yml", "play.yml"], tmp_path)
    rendered, planned = (t["hosts"] for t in doc["plays"][0]["tasks"][-2:])  # after the role's argument check
    assert out.returncode == 0, out.stdout[-3000:]
    argv = {h: r["argv"] for h, r in rendered.items()}
    assert argv["gpu-b"][argv["gpu-b"].index("--dist-init-addr") + 1] == "10.1.0.1:20000"
    assert argv["gpu-a"][argv["gpu-a"].index("--node-rank") + 1] == "0" and "--nnodes" not in argv["solo"]
    msg = next(iter(planned.values()))["msg"]
    assert msg["plan"] == {"order": ["solo", "gpu-a", "gpu-b"], "batches": [1, 2]}
    assert msg["servers"] == ["solo", "gpu-a"]


@needs_playbook
def test_the_plan_play_refuses_a_down_rank_and_a_cut_group(tmp_path):
    """The plan play (playbooks/plan.yml) on a group whose rank 1 does not answer (ssh to a closed port), and on a
    run that --limit cuts the group in two: refused with the fix, and no later play starts."""
    plan = yaml.safe_load((REPO / "playbooks" / "plan.yml").read_text())[0]
    plays = [plan, *yaml.safe_load((REPO / "playbooks" / "deploy.yml").read_text())[1:]]
    after = {
        "name": "After",
        "hosts": plays[1]["hosts"],
        "gather_facts": False,
        "tasks": [{"ansible.builtin.debug": {"msg": "REACHED"}, "tags": ["always"]}],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{**plays[0], "hosts": "all"}, after], sort_keys=False))
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "pair.yml").write_text("sglang_multinode_group: pair\n")
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    down = {
        "ansible_host": "127.0.0.1",
        "ansible_port": free_port(),  # nobody listens there
        "ansible_connection": "ssh",
        "ansible_ssh_args": "-o ConnectTimeout=5",
    }
    inventory = {"all": {"children": {"pair": {"hosts": {"gpu-a": local, "gpu-b": down}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}

    def run(*args):
        cmd = [PLAYBOOK_BIN, "-i", "inventory.yml", "play.yml", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    out = run()
    assert out.returncode != 0 and "REACHED" not in out.stdout
    assert "gpu-b, rank 1 of the multi-node group pair, is unreachable" in out.stdout
    assert "--limit '!pair'). Nothing was restarted." in " ".join(out.stdout.split())
    out = run("--limit", "gpu-a")
    assert out.returncode != 0 and "REACHED" not in out.stdout
    assert "the run holds gpu-a but not gpu-b of the same multi-node group" in out.stdout
    for tags in (["--tags", "configure"], ["--tags", "install"], ["--skip-tags", "restart"]):
        out = run("--limit", "gpu-a", *tags)
        assert out.returncode != 0 and "REACHED" not in out.stdout
        assert "skips the restart phase on the multi-node group pair" in " ".join(out.stdout.split()), tags
