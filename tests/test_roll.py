"""A rolling deploy behind the smg router (site.yml, playbooks/deploy.yml): what it refuses before anything runs."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_json import PLAYBOOK_BIN, needs_playbook

from sglang_deploy import api
from sglang_deploy.fleet import fleet
from sglang_deploy.launch import profiles
from sglang_deploy.cli import runs
from sglang_deploy.paths import REPO

# Every host answers ssh on a closed port: a play that reaches a host fails it as unreachable.
DOWN = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_ssh_args": "-o ConnectTimeout=3"}


def site(tmp_path, replicas: list[str], *args: str, playbook: str = "site.yml") -> subprocess.CompletedProcess:
    inventory = {
        "all": {
            "vars": DOWN,
            "children": {
                "sglang_replicas": {"hosts": {h: {} for h in replicas}},
                "sglang_router": {"hosts": {"rt": {}}},
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    cmd = [PLAYBOOK_BIN, "-i", str(tmp_path / "inventory.yml"), playbook, "-e", "profile=baseline", *args]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)


@needs_playbook
@pytest.mark.parametrize(
    ("replicas", "serial", "named"),
    [
        (["r1", "r2", "r3"], "3", "This batch (r1, r2, r3, sglang_fleet_serial 3) is every server of the router on rt"),
        (["r1", "r2"], "100%", "Use a smaller sglang_fleet_serial (default 1)"),
        (["r1"], "1", "The router has this one server: add replicas"),
    ],
)
def test_a_batch_that_is_every_server_of_the_router_is_refused_before_anything_runs(tmp_path, replicas, serial, named):
    """Refused in the plan, before the stack and router plays of site.yml reach any host (it used to come after
    the router play had run)."""
    out = site(tmp_path, replicas, "-e", f"sglang_fleet_serial={serial}")
    text = " ".join(out.stdout.split())
    assert out.returncode != 0 and named in text and "Nothing was run." in text
    assert "UNREACHABLE" not in out.stdout and "Install CUDA" not in out.stdout


@needs_playbook
def test_a_batch_that_leaves_the_router_a_server_passes_the_plan(tmp_path):
    out = site(tmp_path, ["r1", "r2", "r3"], "-e", '{"sglang_fleet_serial": [1, "100%"]}')
    assert "Nothing was run" not in out.stdout
    assert "UNREACHABLE" in out.stdout  # the stack play went on to the hosts


def test_a_host_the_run_did_not_restart_is_unchanged_and_behind_a_router_not_drained():
    results = {"a": {"restarted": False}, "b": {"restarted": True}}
    rows = fleet.summary(["a", "b"], {"a": "nextn", "b": "baseline"}, results, "nextn", True)
    assert [(r["outcome"], r["state"]) for r in rows] == [
        ("unchanged", "unchanged, not drained"),
        ("deployed", "deployed"),
    ]
    alone = fleet.summary(["a"], {}, {"a": {"failed": True, "rolled_back_to": None, "serves": None}}, "nextn", False)
    assert [(r["outcome"], r["state"]) for r in alone] == [("failed", "nextn failed here; not serving")]


def failed_roll_status() -> dict:
    """What playbooks/status.yml publishes after a roll of baseline that stopped at the 2nd replica: the 1st
    updated, the 2nd rolled back to nextn (its record says so), the 3rd untouched."""
    unit = "LoadState=loaded\nActiveState=active\nSubState=running\n"
    records = {
        "r1": {"profile": "baseline", "asked": "baseline", "last_good_profile": "baseline"},
        "r2": {
            "profile": "nextn",
            "asked": "baseline",
            "last_good_profile": "nextn",
            "rolled_back": {"from": "baseline", "to": "nextn", "at": "2026-12-01T12:00:00Z"},
        },
        "r3": {"profile": "nextn", "asked": "nextn", "last_good_profile": "nextn"},
    }
    router = {
        "deployed": True,
        "url": "http://rt:8000",
        "unit": unit,
        "readiness": {"status": 200, "body": {}},
        "workers": {h: {"url": f"http://{h}:30000", "status": "ready", "healthy": True} for h in records},
        "members": [{"id": h, "url": f"http://{h}:30000"} for h in records],
    }
    return {
        "sglang_status": {h: {"unit": unit, "local": {"sglang_server": r}, "manifest": {}} for h, r in records.items()},
        "sglang_router_status": {"rt": router},
    }


def test_status_after_a_failed_roll_names_the_host_that_rolled_back_and_the_one_the_roll_did_not_reach():
    """It named r1, the one replica that got what was asked, as the odd one, and said nothing of r2's rollback."""
    data = failed_roll_status()
    hosts = api.parse_status(data)
    view = api.parse_fleet(data, hosts)["rt"]
    assert [(m["kind"], m["subject"]) for m in view["mismatches"]] == [
        ("rolled_back", "r2"),
        ("roll_stopped_before", "r3"),
    ]
    assert "baseline failed there (2026-12-01T12:00:00Z) and it serves nextn again" in view["mismatches"][0]["message"]
    table = runs.format_status(hosts)
    assert "r1    baseline  baseline" in table
    assert "r2    nextn     baseline (failed, rolled back to nextn)" in table
    assert "r3    nextn     nextn" in table


def test_the_summary_says_a_host_restarted_when_the_role_found_a_change_the_check_had_not():
    """Another run changed the host between the check and the restart: it restarted, so it was not "unchanged"."""
    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "plugins" / "filter" / "sglang.py")
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    hostvars = {
        "a": {"sglang_fleet_done": True, "sglang_fleet_restarted": True},
        "b": {"sglang_fleet_done": True, "sglang_fleet_restarted": False},
        "c": {"sglang_fleet_failed": "baseline", "sglang_server_rolled_back_to": "baseline"},
    }
    rows = filters.fleet_summary(["a", "b", "c"], hostvars, "nextn", False)
    assert [r["outcome"] for r in rows] == ["deployed", "unchanged", "rolled back"]


@needs_playbook
def test_deploy_yml_alone_refuses_the_outage_too(tmp_path):
    """Its import of the plan had a `when` on the plan's own fact, which skipped the refusal after the plan was made."""
    out = site(tmp_path, ["r1", "r2"], "-e", "sglang_fleet_serial=0", playbook="playbooks/deploy.yml")
    assert out.returncode != 0 and "is every server of the router on rt" in " ".join(out.stdout.split())
    assert "UNREACHABLE" not in out.stdout


@needs_playbook
def test_an_unknown_profile_is_refused_in_the_plan_before_the_stack_and_router_plays(tmp_path):
    """It was refused only by the deploy play's render, after the stack and router plays had run (16-22 s on the lab
    fleet), and the roll's summary then said the first replica failed. The plan refuses it on the controller, with
    the fields the CLI reads (api.unknown_profile), before any play reaches a host (these are down)."""
    out = site(tmp_path, ["r1", "r2"], "-e", "profile=ghost")
    assert out.returncode != 0 and "unknown profile 'ghost'" in out.stdout
    assert "UNREACHABLE" not in out.stdout and "Install CUDA" not in out.stdout and "smg router" not in out.stdout
    result = api.deploy("ghost", inventory=str(tmp_path / "inventory.yml"))
    assert api.unknown_profile([result]) == ("ghost", sorted(profiles.load_profiles()))


@needs_playbook
def test_a_known_profile_passes_the_plan(tmp_path):
    out = site(tmp_path, ["r1", "r2"], "-e", "profile=nextn")
    assert "unknown profile" not in out.stdout and "UNREACHABLE" in out.stdout  # the stack play went on to the hosts


def test_a_host_that_failed_before_its_server_restarted_still_serves_its_profile_and_says_so():
    """The summary said "nextn failed here, roll stopped", and a host without a rollback "not serving" when alone,
    while its server, never restarted, served its profile: what it serves is read from its record and its unit."""
    record = {"profile": "baseline", "asked": "baseline", "last_good_profile": "baseline"}
    running = {"ActiveState": "active", "MainPID": "4242"}
    # alone: refused before the run looked at the server (None), or after it found the same process (4242)
    for pid_before in (None, 4242):
        assert fleet.after_failure(record, running, pid_before, None, False, False) == {
            "serves": "baseline",
            "restarted": False,
        }
    # a new process without a rollback, or no process: the run restarted it and nothing is known to serve
    assert fleet.after_failure(record, running, 1000, None, False, False) == {"serves": None, "restarted": True}
    stopped = {"ActiveState": "failed", "MainPID": "0"}
    assert fleet.after_failure(record, stopped, None, None, False, False) == {"serves": None, "restarted": False}
    assert fleet.after_failure(record, running, 1000, "baseline", False, False)["serves"] == "baseline"
    # behind a router: what the router has ready again
    assert fleet.after_failure(record, running, 4242, None, True, True) == {"serves": "baseline", "restarted": False}
    assert fleet.after_failure(record, running, 4242, None, True, False)["serves"] is None
    results = {"a": {"failed": True, "rolled_back_to": None, "serves": "baseline", "restarted": False}}
    rows = fleet.summary(["a", "b"], {"a": "baseline", "b": "baseline"}, results, "nextn", True)
    assert [(r["serves"], r["outcome"], r["state"]) for r in rows] == [
        (
            "baseline",
            "failed",
            "nextn failed here before its server restarted, which still serves baseline, roll stopped",
        ),
        ("baseline", "untouched", "untouched"),
    ]
    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "plugins" / "filter" / "sglang.py")
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    hostvars = {"a": {"sglang_fleet_failed": "baseline", "sglang_fleet_failed_restarted": False}}
    assert "before its server restarted" in filters.fleet_summary(["a"], hostvars, "nextn", True)[0]["state"]


def test_a_roll_leaves_out_the_servers_with_nothing_due_but_sizes_its_batches_over_all():
    """A no-op roll took every replica through the server role one at a time (85-97 s, 1,100-1,350 lines on the lab
    fleet): the servers with nothing due are done before the batches, and only the others are rolled."""
    assert fleet.plan(["a", "b", "c", "d"], {}, "50%", idle=["b"]) == {"order": ["a", "c", "d"], "batches": [2, 1]}
    assert fleet.plan(["a", "b"], {}, 1, idle=["a", "b"]) == {"order": [], "batches": []}
    group = {"b": ["b", "c"], "c": ["b", "c"]}
    # a group rolls as one: one node with something due takes the group into the roll
    assert fleet.plan(["a", "b", "c"], group, 1, idle=["a", "b"]) == {"order": ["b", "c"], "batches": [2]}
    assert fleet.plan(["a", "b", "c"], group, 1, idle=["b", "c"]) == {"order": ["a"], "batches": [1]}


@pytest.mark.parametrize(
    ("change", "due"),
    [
        ({}, False),
        ({"restarts": True}, True),
        ({"asked": "nextn"}, True),  # the last run asked for another profile: the record must say this one
        ({"rolled_back": {"from": "nextn", "to": "baseline", "at": "t"}}, True),
        ({"argv": ["--tp-size", "2"]}, True),
        ({"sglang_version": "0.5.22"}, True),
        ({"last_good_profile": None}, True),
    ],
)
def test_a_server_has_nothing_due_only_when_the_role_would_change_nothing(change, due):
    record = {
        "profile": "baseline",
        "asked": "baseline",
        "last_good_profile": "baseline",
        "argv": ["--tp-size", "1"],
        "sglang_version": "0.5.23",
    }
    restarts = change.pop("restarts", False)
    record.update(change)
    assert fleet.nothing_due(record, "baseline", ["--tp-size", "1"], "0.5.23", restarts) is not due


def test_only_a_whole_run_behind_a_router_that_restarts_only_what_changed_leaves_servers_out():
    assert fleet.quick_roll(True, ["all"], [], False, False)
    assert not fleet.quick_roll(False, ["all"], [], False, False)  # alone, an unchanged server is benchmarked
    assert not fleet.quick_roll(True, ["configure", "restart"], [], False, False)
    assert not fleet.quick_roll(True, ["all"], ["benchmark"], False, False)
    assert not fleet.quick_roll(True, ["all"], [], True, False)  # a rolling restart (compare)
    assert not fleet.quick_roll(True, ["all"], [], False, True)  # a benchmark through the router


FLEET = ["sglang-fleet-1", "sglang-fleet-2", "sglang-fleet-3"]


def fleet_lab_missing() -> str | None:
    """Why the lab fleet (./lab fleet up: inventory/fleet-lab.yml) cannot be used, or None."""
    if shutil.which("docker") is None:
        return "docker is not installed"
    for name in [*FLEET, "sglang-fleet-router"]:
        r = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", name], capture_output=True, text=True)
        if r.stdout.strip() != "true":
            return f"the lab fleet's container {name} is not running (./lab fleet up)"
    return None


def roll_fleet(profile: str, *inventories: str) -> subprocess.CompletedProcess:
    """site.yml with PROFILE across the lab fleet, as `./lab fleet run PROFILE` does."""
    cmd = [PLAYBOOK_BIN, "-i", str(REPO / "inventory" / "fleet-lab.yml")]
    for extra in inventories:
        cmd += ["-i", extra]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(
        [*cmd, "site.yml", "-e", f"profile={profile}"], capture_output=True, text=True, env=env, cwd=REPO, timeout=900
    )


def started(host: str) -> str:
    show = ["docker", "exec", host, "systemctl", "show", "-p", "ActiveEnterTimestamp", "--value", "sglang"]
    return subprocess.run(show, capture_output=True, text=True).stdout.strip()


def printed_rows(stdout: str) -> dict:
    """host -> the row of the last "Print what each host serves" (the summary as the play prints it)."""
    block = stdout.rsplit("Print what each host serves", 1)[1].split("msg:", 1)[1]
    rows = yaml.safe_load(re.split(r"\n\s*\n", block, maxsplit=1)[0])
    return {row["host"]: row for row in rows}


needs_fleet_lab = pytest.mark.skipif(fleet_lab_missing() is not None, reason=str(fleet_lab_missing()))


@pytest.mark.lab
@needs_fleet_lab
def test_a_no_op_roll_on_the_lab_fleet_rolls_no_batch_restarts_nothing_and_is_short():
    """A roll of the profile every replica serves took each through the server role one batch at a time: 85-97 s and
    1,100-1,350 lines on the lab fleet. Every replica is found unchanged at once, and the rolling play gets no host."""
    assert roll_fleet("baseline").returncode == 0  # whatever the fleet served: now baseline
    before = {h: started(h) for h in FLEET}
    out = roll_fleet("baseline")
    assert out.returncode == 0, out.stdout[-3000:]
    rolling = out.stdout.split("PLAY [Deploy an SGLang launch profile and benchmark it]", 1)[1]
    assert rolling.lstrip("* \n").startswith("skipping: no hosts matched")
    assert "Ask the router for its workers (leave)" not in out.stdout
    assert {h: r["state"] for h, r in printed_rows(out.stdout).items()} == {h: "unchanged, not drained" for h in FLEET}
    assert {h: started(h) for h in FLEET} == before
    assert len(out.stdout.splitlines()) < 600


@pytest.mark.lab
@needs_fleet_lab
def test_a_roll_stopped_before_any_server_restarted_says_that_every_replica_serves_its_profile(tmp_path):
    """A roll that stopped at the first replica before its first router step (its launch refused there: an unknown
    profile was, before the plan refused it) said "failed here, roll stopped" for it and `serves: null` for the
    others, while all served their profile: what each serves is read from the host records and the unit."""
    assert roll_fleet("baseline").returncode == 0
    refused = tmp_path / "refused.yml"
    # An environment name the unit's environment file cannot hold: refused in the render, before anything changes.
    replica = {FLEET[0]: {"sglang_server_env": {"1BAD": "x"}}}
    refused.write_text(yaml.safe_dump({"all": {"children": {"sglang_replicas": {"hosts": replica}}}}))
    before = {h: started(h) for h in FLEET}
    out = roll_fleet("nextn", str(refused))
    assert out.returncode != 0
    rows = printed_rows(out.stdout)
    assert [(rows[h]["serves"], rows[h]["outcome"]) for h in FLEET] == [
        ("baseline", "failed"),
        ("baseline", "untouched"),
        ("baseline", "untouched"),
    ]
    assert (
        rows[FLEET[0]]["state"]
        == "nextn failed here before its server restarted, which still serves baseline, roll stopped"
    )
    assert {h: started(h) for h in FLEET} == before


def router_play(*args: str) -> subprocess.CompletedProcess:
    """playbooks/router.yml on the lab fleet (the router play of site.yml)."""
    cmd = [PLAYBOOK_BIN, "-i", str(REPO / "inventory" / "fleet-lab.yml"), "playbooks/router.yml", *args]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def on_router(script: str) -> str:
    done = subprocess.run(["docker", "exec", "sglang-fleet-router", "sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


ROUTER_STATE = (
    "sha256sum /etc/systemd/system/smg.service /etc/smg/workers.json /opt/smg/wheels/WHEELS.sha256;"
    " stat -c '%a %U %G' /etc/smg/smg.env; systemctl is-active smg"
)
CONVERGED = "Write the service's systemd unit"  # a task of the convergence, named only where it ran


@pytest.mark.lab
@needs_fleet_lab
def test_an_unchanged_router_skips_its_convergence_and_a_drifted_one_is_converged():
    """The router play converges only when the router differs from what it writes (sglang_state_due): a drift on
    the host (an edited unit, a worker left out of the list, the wheelhouse's digest, a mode) or in the inventory
    (a flag) is converged on the next run, and the run after that changes nothing again."""
    assert router_play().returncode == 0
    good = on_router(ROUTER_STATE)
    out = router_play()
    assert out.returncode == 0 and CONVERGED not in out.stdout, out.stdout[-3000:]
    assert re.search(r"sglang-fleet-router\s*: ok=\d+\s+changed=0 ", out.stdout)
    on_router(
        "echo '# drift' >> /etc/systemd/system/smg.service && chmod 0644 /etc/smg/smg.env"
        " && echo other > /opt/smg/wheels/WHEELS.sha256"
        ' && printf \'{"version": 1, "workers": []}\\n\' > /etc/smg/workers.json'
    )
    assert on_router(ROUTER_STATE) != good
    out = router_play()
    assert out.returncode == 0 and CONVERGED in out.stdout, out.stdout[-3000:]
    assert on_router(ROUTER_STATE) == good
    out = router_play("-e", "sglang_router_health_check_timeout=7")
    assert out.returncode == 0 and CONVERGED in out.stdout, out.stdout[-3000:]
    assert "--health-check-timeout-secs 7" in on_router("cat /etc/systemd/system/smg.service")
    out = router_play()
    assert out.returncode == 0 and CONVERGED in out.stdout, out.stdout[-3000:]
    assert on_router(ROUTER_STATE) == good
    assert CONVERGED not in router_play().stdout
    # A restart lost with its run (the environment file changed, the play stopped before its handlers): the router
    # started before the file is due, and restarts; an uninstalled smg is due, and installed again.
    pid = on_router("systemctl show -p MainPID --value smg")
    on_router("sleep 1; touch /etc/smg/smg.env")
    out = router_play()
    assert out.returncode == 0 and "started before /etc/smg/smg.env changed" in out.stdout, out.stdout[-3000:]
    assert on_router("systemctl show -p MainPID --value smg") != pid
    on_router("/opt/smg/venv-*/bin/python -m pip uninstall -q -y smg")
    out = router_play()
    assert out.returncode == 0 and "smg: /opt/smg/venv-" in out.stdout, out.stdout[-3000:]
    out = router_play()
    assert out.returncode == 0 and CONVERGED not in out.stdout, out.stdout[-3000:]
    assert re.search(r"sglang-fleet-router\s*: ok=\d+\s+changed=0 ", out.stdout)
