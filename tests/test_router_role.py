"""The sglang_router role's settings check, through a real ansible-playbook run against localhost in check mode:
what it refuses stops the play at its first task, before the router's unit or secrets change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_json import needs_playbook, run_playbook

from sglang_deploy.paths import REPO

pytestmark = needs_playbook
KEY = "k" * 24


ROUTER_DEFAULTS = {"sglang_router_workers": ["localhost"], "sglang_router_admin_api_key": KEY}


def router_checks(tmp_path: Path, hosts: dict, play_hosts: list, play_vars: dict) -> dict[str, dict]:
    """The role's first task (Check the router settings) in check mode, connection local: its result per play host.
    ``hosts``: inventory hosts -> their variables, besides localhost (a worker at 10.0.0.2)."""
    inventory = {"localhost": {"sglang_router_worker_url": "http://10.0.0.2:30000"}}
    for host, host_vars in hosts.items():
        inventory[host] = {**inventory.get(host, {}), **host_vars}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": inventory}}))
    play = [
        {
            "name": "Router settings",
            "hosts": ":".join(play_hosts),
            "gather_facts": False,
            "vars": play_vars,
            "tasks": [{"name": "Run the role", "ansible.builtin.include_role": {"name": "sglang_router"}}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    _, doc = run_playbook(
        ["-i", "hosts.yml", "-c", "local", "--check", "play.yml"], tmp_path, {"ANSIBLE_ROLES_PATH": str(REPO / "roles")}
    )
    check = [t for t in doc["plays"][0]["tasks"] if t["task"]["name"].endswith("Check the router settings")]
    return check[0]["hosts"]


def settings_check(tmp_path: Path, replicas: dict | None = None, **router_vars) -> dict:
    """The check's result for these settings on localhost, the router host and its own worker; ``replicas``:
    inventory hosts -> their variables."""
    return router_checks(tmp_path, replicas or {}, ["localhost"], {**ROUTER_DEFAULTS, **router_vars})["localhost"]


def settings_checks(tmp_path: Path, cases: dict[str, dict]) -> dict[str, dict]:
    """settings_check for many router settings in one ansible-playbook run (one costs about 2.5 CPU s): each case an
    inventory host of its own with the case's variables as host variables, localhost its worker. Only for settings
    refused at the role's first task: a case that passes goes on to the role's next tasks."""
    hosts = {name: {**ROUTER_DEFAULTS, **router_vars} for name, router_vars in cases.items()}
    return router_checks(tmp_path, hosts, list(cases), {})


def named_cases(prefix: str, rows: list) -> list[tuple]:
    """(case name, given, expected) per row: the names settings_checks' hosts and the tests share."""
    return [(f"{prefix}{i}", given, expected) for i, (given, expected) in enumerate(rows)]


# Settings the check refuses: (the router's variables, what the refusal names), checked in one run (refused below).
BAD_KEYS = [
    ({"sglang_router_api_key": "short-key"}, "sglang_router_api_key has 9 characters: use at least 16"),
    ({"sglang_router_admin_api_key": "admin-pw"}, "sglang_router_admin_api_key has 8 characters: use at least 16"),
    ({"sglang_router_api_key": "a key with spaces!"}, "sglang_router_api_key holds whitespace"),
]


@pytest.mark.parametrize(("case", "settings", "named"), named_cases("key", BAD_KEYS))
def test_a_key_the_launcher_refuses_or_cannot_mask_stops_the_role_before_the_router_restarts(
    refused, case, settings, named
):
    """launch.py refuses an SMG_API_KEY under 16 characters (the restarted router would never come back: every
    replica unreachable) and masks a control-plane key in the journal only from 16 characters."""
    result = refused[case]
    assert result.get("failed") and named in result["msg"], result
    assert all(value not in result["msg"] for value in settings.values())


def test_good_keys_pass_the_check(tmp_path):
    result = settings_check(tmp_path, {"localhost": {"sglang_api_key": KEY}}, sglang_router_api_key=KEY)
    assert not result.get("failed"), result


OTHER_KEY = "o" * 24


@pytest.mark.parametrize(
    ("replica_keys", "router_vars", "named"),
    [
        # group_vars/sglang_replicas.yml's hint followed: the replicas have the key, the router host does not
        ({"gpu-1": KEY, "gpu-2": KEY}, {}, "gpu-1, gpu-2 require an API key (sglang_api_key) and the router has none"),
        ({"localhost": KEY, "gpu-1": OTHER_KEY}, {"sglang_router_api_key": KEY}, "gpu-1 have another sglang_api_key"),
        (
            {"localhost": KEY, "gpu-1": ""},
            {"sglang_router_api_key": KEY},
            "gpu-1 have no sglang_api_key while the router",
        ),
    ],
)
def test_a_router_whose_key_is_not_the_replicas_is_refused_with_the_fix(tmp_path, replica_keys, router_vars, named):
    """The router presents sglang_router_api_key to every replica: another key (or none on the router) gets 401 on
    every proxied request while /health, which needs no key, says ready."""
    replicas = {
        h: {"sglang_api_key": k, "sglang_router_worker_url": f"http://{h}:30000"} for h, k in replica_keys.items()
    }
    result = settings_check(tmp_path, replicas, sglang_router_workers=list(replica_keys), **router_vars)
    assert result.get("failed") and named in result["msg"], result
    assert "group_vars/all" in result["msg"]
    assert KEY not in json.dumps(result) and OTHER_KEY not in json.dumps(result)


def test_a_replica_without_its_own_url_is_reached_at_the_sglang_roles_default(tmp_path):
    """hostvars hold a replica's inventory variables, never a role's defaults: one whose inventory sets no
    sglang_router_worker_url is reached at the sglang role's default for it, http://<its ansible_host>:<its
    sglang_port> (a loopback ansible_host here, which the check refuses)."""
    replicas = {"gpu-1": {"ansible_host": "127.0.0.2", "sglang_api_key": KEY}}
    result = settings_check(tmp_path, replicas, sglang_router_workers=["gpu-1"], sglang_router_api_key=KEY)
    assert result.get("failed") and "Workers gpu-1 have a loopback" in result["msg"], result
    replicas["gpu-1"]["ansible_host"] = "10.0.0.3"
    result = settings_check(tmp_path, replicas, sglang_router_workers=["gpu-1"], sglang_router_api_key=KEY)
    assert not result.get("failed"), result


def test_a_keyless_replica_acknowledged_as_open_passes_behind_a_keyed_router(tmp_path):
    """On a private network a replica may run without a key (sglang_server_allow_open_bind); it takes the router's."""
    replicas = {
        "gpu-1": {
            "sglang_api_key": "",
            "sglang_server_allow_open_bind": True,
            "sglang_router_worker_url": "http://gpu-1:1",
        }
    }
    result = settings_check(tmp_path, replicas, sglang_router_workers=["gpu-1"], sglang_router_api_key=KEY)
    assert not result.get("failed"), result
    replicas["gpu-1"]["sglang_server_allow_open_bind"] = False
    result = settings_check(tmp_path, replicas, sglang_router_workers=["gpu-1"], sglang_router_api_key=KEY)
    assert result.get("failed") and "sglang_server_allow_open_bind: true" in result["msg"], result


def test_the_installed_smg_parser_refuses_a_typo_and_a_bad_value_before_the_router_restarts(smg_python):
    """What the role's check runs on the router host (check_argv.py --smg): smg itself exits 2 on these at start."""
    from sglang_deploy.fleet import fleet

    check_argv = REPO / "plugins" / "module_utils" / "check_argv.py"
    launches = {
        "role": fleet.router_argv(
            {"host": "0.0.0.0", "port": 8000, "policy": "cache_aware", "discovery-provider": "file"}
        ),
        "typo": fleet.router_argv({"max-concurent-requests": 64}),
        "choice": fleet.router_argv({"policy": "fastest"}),
        "dash": fleet.router_argv({"health-check-endpoint": "--api-key"}),
        # smg itself would take --api-ke for --api-key; the check refuses the abbreviation and does not show the key
        "abbreviation": fleet.router_argv({"api-ke": KEY}),
        "abbreviated-port": fleet.router_argv({"por": 9000}),
    }
    python, env = smg_python
    out = subprocess.run(
        [python, str(check_argv), "--smg", json.dumps(launches)], capture_output=True, text=True, timeout=120, env=env
    )
    refused = json.loads(out.stdout.strip().splitlines()[-1])["refused"]
    expected = ["abbreviated-port", "abbreviation", "choice", "dash", "typo"]
    assert out.returncode == 2 and sorted(refused) == expected, out.stderr[-2000:]
    assert "--max-concurent-requests" in refused["typo"] and "fastest" in refused["choice"]
    assert refused["abbreviation"] == "unrecognized arguments: --api-ke" and KEY not in out.stdout + out.stderr


SECRET_FLAGS = [
    ({"api-key": KEY}, "sets api-key, a secret"),
    ({f"api-key={KEY}": True}, "has 'api-key…', not a flag name"),
    ({"--api-key": KEY}, "has '--api-key', not a flag name"),
    ({"api-ke": KEY}, "sets api-ke, an abbreviation of --api-key"),
    (
        {"control-plane-api-key": f"a:b:admin:{KEY}"},
        "sets control-plane-api-key, an abbreviation of --control-plane-api-keys",
    ),
    ({"control-plane-api-keys": f"a:b:admin:{KEY}"}, "sets control-plane-api-keys, a secret"),
    ({"tenant-api-key": f"t:{KEY}"}, "sets tenant-api-key, a secret"),
    ({"oracle-password": KEY}, "sets oracle-password, a secret"),
    ({"mesh-tls-key": KEY}, "sets mesh-tls-key, a secret"),
    # abbreviations that smg's parser takes for its other secret flags (no name rule sees them)
    ({"oracle-pass": KEY}, "sets oracle-pass, an abbreviation of --oracle-password"),
    ({"tenant-api": f"t:{KEY}"}, "sets tenant-api, an abbreviation of --tenant-api-key"),
    ({"mesh-tls-k": KEY}, "sets mesh-tls-k, an abbreviation of --mesh-tls-key"),
    # a list value smuggled flags past the name check, and smg's own parser took them
    ({"log-dir": ["/tmp", "--port", "9999", "--api-key", KEY]}, "log-dir begins with '-'"),
    ({"postgres-db-url": f"postgres://smg:{KEY}@db:5432/smg"}, "postgres-db-url is a URL with a password"),
    ({"redis-url": [f"redis://:{KEY}@cache:6379"]}, "redis-url is a URL with a password"),
    ({"postgres-db-url": f"postgres://svc@corp:{KEY}@db/smg"}, "postgres-db-url is a URL with a password"),
    ({"log-dir": {"a": KEY}}, "log-dir takes one value or a list of values"),
]


@pytest.mark.parametrize(("case", "extra", "named"), named_cases("secret", SECRET_FLAGS))
def test_a_key_in_the_routers_extra_flags_is_refused_before_it_reaches_argv(refused, case, extra, named):
    """smg's parser takes these (argparse also takes an abbreviation for the flag), so only this check keeps a secret
    given in sglang_router_extra_args out of the unit's command line, which every user of the host can read."""
    result = refused[case]
    assert result.get("failed") and named in result["msg"], result
    assert KEY not in json.dumps(result)


OWN_FLAGS = [
    ({"port": 9000}, "sets port, which the role sets itself: set sglang_router_port instead"),
    ({"host": "127.0.0.1"}, "sets host, which the role sets itself: set sglang_router_host instead"),
    ({"policy": "random"}, "sets policy, which the role sets itself: set sglang_router_policy instead"),
    ({"discovery-file": "/tmp/w.json"}, "sets discovery-file, which the role sets itself: remove it"),
    ({"prometheus-port": 1}, "sets prometheus-port, which the role sets itself: set sglang_router_prometheus_port"),
    (
        {"hos": "0.0.0.0"},
        "sets hos (an abbreviation of --host), which the role sets itself: set sglang_router_host",
    ),
    (
        {"worker-urls": ["http://10.0.0.9:1"]},
        "sets worker-urls, which the role sets itself: set sglang_router_workers",
    ),
]


# smg's retries resend what a stalled server held once the stall watchdog restarts it (its worker, localhost, runs
# the watchdog by default): flags that turn them off are refused (fleet.retry_problems).
NO_RETRIES = [
    ({"disable-retries": True}, "sglang_router_extra_args disable-retries: True turns smg's retries off"),
    ({"retry_max_retries": 1}, "sglang_router_extra_args retry-max-retries: 1 turns smg's retries off"),
    ({"max-buffered-request-bytes": 0}, "max-buffered-request-bytes: 0 turns smg's retries off"),
]


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, dict]:
    """The check's result for BAD_KEYS (key0...), SECRET_FLAGS (secret0...), OWN_FLAGS (own0...) and NO_RETRIES
    (retry0...)."""
    cases = {case: settings for case, settings, _ in named_cases("key", BAD_KEYS)}
    cases |= {
        case: {"sglang_router_extra_args": {**extra, "max-concurrent-requests": 64}}
        for case, extra, _ in named_cases("secret", SECRET_FLAGS)
    }
    cases |= {case: {"sglang_router_extra_args": extra} for case, extra, _ in named_cases("own", OWN_FLAGS)}
    cases |= {case: {"sglang_router_extra_args": extra} for case, extra, _ in named_cases("retry", NO_RETRIES)}
    return settings_checks(tmp_path_factory.mktemp("router-settings"), cases)


@pytest.mark.parametrize(("case", "extra", "fix"), named_cases("own", OWN_FLAGS))
def test_a_flag_the_role_sets_is_refused_in_the_extra_flags_with_its_variable(refused, case, extra, fix):
    """An extra flag would win over the role's own, and the recorded router URL and worker list would be wrong."""
    result = refused[case]
    assert result.get("failed") and f"sglang_router_extra_args {fix}" in result["msg"], result


@pytest.mark.parametrize(("case", "extra", "named"), named_cases("retry", NO_RETRIES))
def test_flags_that_turn_smgs_retries_off_are_refused_where_the_stall_watchdog_runs(refused, case, extra, named):
    """Without retries, the requests a stalled replica holds fail at the watchdog's restart (docs/watchdog.md)."""
    result = refused[case]
    assert result.get("failed") and named in result["msg"], result
    assert "set sglang_watch_enabled: false on those hosts" in result["msg"]


SMG_SPELLINGS = """if True:
    import argparse, json, sys
    from smg.router_args import RouterArgs
    parser = argparse.ArgumentParser(exit_on_error=False)
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    flags = [o[2:] for o in parser._option_string_actions if o.startswith("--")]
    taken = []
    for flag in json.loads(sys.argv[1]) or flags:
        action = parser._option_string_actions["--" + flag]
        value = list(action.choices)[0] if action.choices else "1"
        for end in range(1, len(flag) + 1):
            try:
                args, extra = parser.parse_known_args(["--" + flag[:end], str(value)])
            except (argparse.ArgumentError, SystemExit):  # ambiguous: smg refuses it
                continue
            if not extra and getattr(args, action.dest) != action.default:
                taken.append([flag[:end], flag])
    print(json.dumps({"flags": flags, "taken": taken}))
"""


def smg_spellings(smg_python, flags: list[str]) -> dict:
    """smg's flags, and [spelling, flag] for every spelling (an abbreviation included) smg's own parser takes for
    one of ``flags`` (every flag when empty)."""
    python, env = smg_python
    out = subprocess.run(
        [python, "-c", SMG_SPELLINGS, json.dumps(flags)], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


ROUTER_VARS = yaml.safe_load((REPO / "roles/sglang_router/vars/main.yml").read_text())


def test_every_spelling_of_a_flag_the_role_sets_that_smg_takes_is_refused(smg_python):
    """smg's own parser takes an abbreviation (por for --port, prometheus-hos for --prometheus-host): each one it maps
    to a flag the role sets, or to worker-urls, is refused in sglang_router_extra_args (issue 20 item 11)."""
    from sglang_deploy.launch import profiles

    owned = {**ROUTER_VARS["__sglang_router_flag_vars"], **ROUTER_VARS["__sglang_router_worker_flags"]}
    taken = [spelling for spelling, _ in smg_spellings(smg_python, list(owned))["taken"]]
    assert {"hos", "por", "prometheus-hos", "worker-urls"} <= set(taken)
    assert [n for n in taken if not profiles.extra_flag_problems({n: "1"}, "v", owned, "")] == []


def test_every_spelling_of_a_secret_flag_of_smg_is_refused(smg_python):
    """A flag of smg that takes a secret is in __sglang_router_secret_flags, and every spelling smg's parser takes for
    one is refused: oracle-pass, tenant-api and mesh-tls-k passed (the name rule sees no secret in them) and put the
    secret in the unit's command line and in check mode's --diff."""
    sys.path.insert(0, str(REPO / "plugins" / "filter"))
    from sglang import router_flag_problems

    from sglang_deploy.secret_names import is_secret_name

    secrets = ROUTER_VARS["__sglang_router_secret_flags"]
    smg = smg_spellings(smg_python, secrets)
    assert {flag for flag in smg["flags"] if is_secret_name(flag)} <= set(secrets)
    taken = smg["taken"]
    assert {"oracle-pass", "tenant-api", "mesh-tls-k"} <= {spelling for spelling, _ in taken}
    passed = [s for s, _ in taken if not router_flag_problems({s: KEY}, {}, secrets)]
    assert passed == []


def test_ordinary_extra_flags_pass_the_check(tmp_path):
    extra = {"max-concurrent-requests": 64, "log-json": True, "sticky-key-idle-secs": 60, "tls-key-path": "/etc/k"}
    result = settings_check(tmp_path, sglang_router_extra_args=extra)
    assert not result.get("failed"), result


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:30000",
        "http://LOCALHOST:30000",
        "http://0.0.0.0:30000",
        "http://[::ffff:127.0.0.1]:30000",
        "http://[0:0:0:0:0:0:0:1]:30000",
    ],
)
def test_a_replica_the_router_cannot_reach_is_refused_with_the_fix(tmp_path, url):
    """A replica's URL that only its own host reaches: the router would dial itself (nodes.local_only)."""
    replicas = {"gpu-1": {"sglang_router_worker_url": url}, "gpu-2": {"sglang_router_worker_url": "http://gpu-2:1"}}
    result = settings_check(tmp_path, replicas, sglang_router_workers=["localhost", "gpu-1", "gpu-2"])
    assert result.get("failed") and "Workers gpu-1 have a loopback or unspecified" in result["msg"], result
    assert "sglang_router_worker_url to an address the router reaches" in result["msg"]


def test_extra_flags_that_are_not_a_mapping_of_names_are_refused_without_their_values():
    from sglang_deploy.launch import profiles

    assert profiles.extra_flag_problems(["api-key", KEY], "v", {}, "") == [
        "v must be a mapping: flag name without dashes -> value (true: a bare switch)"
    ]
    problems = profiles.extra_flag_problems({8000: KEY, f"api-key {KEY}": True}, "v", {}, "")
    assert problems[0].startswith("v has a key of type int") and "'api-key…', not a flag name" in problems[1]
    assert KEY not in " ".join(problems)
