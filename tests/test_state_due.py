"""What differs on a host from what a role converges it to (module_utils/state_due.py): a role skips its
convergence only when nothing does, so every kind of drift must show."""

from __future__ import annotations

import getpass
import grp
import hashlib
import json
import os
import pwd
import time

import jinja2
import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.sglang.deploy.plugins.module_utils import state_due
from ansible_collections.sglang.deploy.plugins.module_utils.state_due import (
    account_differs,
    dirs_differ,
    files_differ,
    release,
)
from ansible_collections.sglang.deploy.plugins.modules import sglang_state_due
from sglang_deploy.paths import REPO


def wanted(path, text: str = "unit\n", mode: str = "0640") -> dict:
    me, group = getpass.getuser(), grp.getgrgid(os.getgid()).gr_name
    return {
        "path": str(path),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "owner": me,
        "group": group,
        "mode": mode,
    }


def test_a_file_as_the_role_writes_it_differs_in_nothing(tmp_path):
    f = tmp_path / "smg.service"
    f.write_text("unit\n")
    f.chmod(0o640)
    assert files_differ([wanted(f)]) == []
    assert files_differ([{"path": str(f)}]) == []  # owner, mode and digest each only when given


def test_an_edited_file_a_changed_mode_an_absent_file_and_a_link_differ(tmp_path):
    f, link, gone = tmp_path / "unit", tmp_path / "link", tmp_path / "gone"
    f.write_text("unit, edited on the host\n")
    f.chmod(0o644)
    link.symlink_to(f)
    assert files_differ([wanted(f), wanted(link), wanted(gone)]) == [
        f"{f}: content, mode",
        f"{link}: not a regular file",
        f"{gone}: absent",
    ]


def test_a_file_of_another_owner_or_group_differs(tmp_path):
    f = tmp_path / "workers.json"
    f.write_text("unit\n")
    f.chmod(0o640)
    assert files_differ([{**wanted(f), "owner": "no-such-user-x", "group": "no-such-group-x"}]) == [
        f"{f}: owner, group"
    ]


def test_folders_differ_by_mode_or_when_absent_or_no_folder(tmp_path):
    d, f = tmp_path / "smg", tmp_path / "file"
    d.mkdir(mode=0o750)
    d.chmod(0o750)
    f.write_text("")
    assert dirs_differ([{"path": str(d), "mode": "0750"}]) == []
    assert dirs_differ([{"path": str(d), "mode": "0755"}, {"path": str(f)}, {"path": str(tmp_path / "x")}]) == [
        f"{d}: mode",
        f"{f}: not a folder",
        f"{tmp_path / 'x'}: absent",
    ]


def test_a_linked_folder_is_followed_and_a_file_on_the_way_is_reported_not_raised(tmp_path):
    """The file module follows a link to a folder (a symlinked /opt/smg), so a link to one is as good; /etc/smg
    being a file made every path under it raise NotADirectoryError."""
    real, link, blocker = tmp_path / "real", tmp_path / "smg", tmp_path / "etc-smg"
    real.mkdir(mode=0o750)
    real.chmod(0o750)
    link.symlink_to(real)
    blocker.write_text("")
    assert dirs_differ([{"path": str(link), "mode": "0750"}]) == []
    assert files_differ([wanted(blocker / "workers.json")]) == [f"{blocker / 'workers.json'}: Not a directory"]
    assert dirs_differ([{"path": str(blocker / "sub")}]) == [f"{blocker / 'sub'}: Not a directory"]


def test_a_link_where_a_folder_is_made_with_follow_false_differs(tmp_path):
    """The server's folders are never made through a link (the file module with follow: false fails on one): a link
    there must make the comparison due, so that the convergence fails loudly, not skip it."""
    real, link = tmp_path / "real", tmp_path / "home"
    real.mkdir(mode=0o750)
    real.chmod(0o750)
    link.symlink_to(real)
    assert dirs_differ([{"path": str(real), "mode": "0750", "follow": False}]) == []
    assert dirs_differ([{"path": str(link), "mode": "0750", "follow": False}]) == [f"{link}: not a folder"]
    assert dirs_differ([{"path": str(link), "mode": "0750", "follow": True}]) == []


def test_a_release_is_one_with_or_without_trailing_zeros():
    """smg reports 1.13.0 for sglang_router_version 1.13 (or the reverse): a due every run, never converged away."""
    assert release("1.13") == release("1.13.0") == release("1.13.0.0\n")
    assert release("1.13.1") != release("1.13") != release("1.13.0rc1")


def test_an_account_differs_when_absent_or_its_group_shell_or_home_changed():
    me = pwd.getpwuid(os.getuid())
    group = grp.getgrgid(me.pw_gid).gr_name
    account = {"user": me.pw_name, "group": group, "shell": me.pw_shell, "home": me.pw_dir}
    assert account_differs(account) == []
    assert account_differs({**account, "shell": "/no/shell", "home": "/nonexistent-x"}) == [
        f"user {me.pw_name}: shell, home"
    ]
    assert account_differs({**account, "user": "no-such-user-x"}) == ["user no-such-user-x: absent"]
    assert account_differs({**account, "group": "no-such-group-x"}) == ["group no-such-group-x: absent"]


def test_an_account_differs_when_a_group_it_joins_exists_and_does_not_list_it(monkeypatch):
    """The user module's append adds the account to each group of sglang_service_groups (the device groups that
    exist on the host): a group absent on the host is left out, and only a group's own member list counts."""
    me = pwd.getpwuid(os.getuid())
    primary = grp.getgrgid(me.pw_gid)
    host = {
        primary.gr_name: grp.struct_group((primary.gr_name, "x", primary.gr_gid, [])),
        "video": grp.struct_group(("video", "x", 44, ["other", me.pw_name])),
        "render": grp.struct_group(("render", "x", 105, ["other"])),
    }
    monkeypatch.setattr(state_due.grp, "getgrnam", lambda name: host[name])  # KeyError for a group not there
    account = {"user": me.pw_name, "group": primary.gr_name, "groups": ["video", "no-such-group-x"]}
    assert account_differs(account) == []
    assert account_differs({**account, "groups": ["render", "video", primary.gr_name]}) == [
        f"user {me.pw_name}: not in render, {primary.gr_name}"
    ]


def run_module(monkeypatch, capsys, args: dict, commands: dict) -> dict:
    """sglang_state_due's main() with ``args``; each command's argv[0..1] joined answers from ``commands``."""
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode())
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy")
    ran = []

    def run_command(self, argv, **kw):
        ran.append(argv)
        answer = commands[argv[0]]
        if callable(answer):
            answer = answer(argv)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    with pytest.raises(SystemExit):
        sglang_state_due.main()
    result = json.loads(capsys.readouterr().out)
    result["ran"] = ran
    return result


SHOW = "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\nNeedDaemonReload=no\nMainPID={pid}\n"


def test_the_module_reports_an_unchanged_host_as_nothing_due_and_never_as_changed(monkeypatch, capsys, tmp_path):
    secret = tmp_path / "smg.env"
    secret.write_text("SMG_API_KEY=sk-secret-value-1234\n")
    secret.chmod(0o600)
    monkeypatch.setattr(sglang_state_due, "process_start", lambda pid: time.time() + 60)
    result = run_module(
        monkeypatch,
        capsys,
        {
            "files": [{"path": str(secret), "mode": "0600"}],
            "secret_digests": {str(secret): hashlib.sha256(secret.read_bytes()).hexdigest()},
            "installed": {"python": "/opt/smg/venv/bin/python", "name": "smg", "version": "1.13"},
            "unit": "smg",
            "restart_paths": [str(secret)],
        },
        {"/opt/smg/venv/bin/python": (0, "1.13.0\n", ""), "systemctl": (0, SHOW.format(pid=42), "")},
    )
    assert (result["changed"], result["differs"], result["newer"]) == (False, [], [])
    assert result["ran"][1][:5] == [
        "systemctl",
        "show",
        "-p",
        "LoadState,UnitFileState,ActiveState,NeedDaemonReload,MainPID",
        "smg",
    ]
    assert "sk-secret-value-1234" not in json.dumps(result)
    assert (
        "secret_digests" not in result.get("invocation", {}).get("module_args", {})
        or result["invocation"]["module_args"]["secret_digests"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    )


def test_the_module_finds_a_wrong_secret_a_broken_venv_a_stopped_unit_and_a_lost_restart(monkeypatch, capsys, tmp_path):
    """The secret's digest comes from secret_digests; a venv whose python dangles is due, not a failed task; a
    router started before its environment file changed missed the restart notified for it (M1)."""
    secret, dist = tmp_path / "smg.env", tmp_path / "lib" / "python3.11" / "site-packages" / "smg-1.13.0.dist-info"
    secret.write_text("SMG_API_KEY=new\n")
    dist.mkdir(parents=True)
    monkeypatch.setattr(sglang_state_due, "process_start", lambda pid: time.time() - 60)
    args = {
        "files": [{"path": str(secret)}],
        "secret_digests": {str(secret): "0" * 64},
        "installed": {"python": "/opt/smg/venv/bin/python", "name": "smg", "version": "1.13.0"},
        "unit": "smg",
        "restart_paths": [str(secret), str(tmp_path / "lib" / "python*" / "site-packages" / "smg-*.dist-info")],
    }
    result = run_module(
        monkeypatch,
        capsys,
        args,
        {
            "/opt/smg/venv/bin/python": FileNotFoundError(2, "No such file or directory"),
            "systemctl": (0, SHOW.format(pid=42), ""),
        },
    )
    assert result["changed"] is False
    assert result["newer"] == sorted([str(secret), str(dist)])
    assert result["differs"] == [
        f"{secret}: content",
        "smg: /opt/smg/venv/bin/python fails (No such file or directory)",
        f"unit smg: started before {', '.join(sorted([str(secret), str(dist)]))} changed",
    ]
    result = run_module(
        monkeypatch,
        capsys,
        {**args, "files": [], "restart_paths": []},
        {
            "/opt/smg/venv/bin/python": (0, "1.12.2\n", ""),
            "systemctl": (
                0,
                "LoadState=loaded\nUnitFileState=disabled\nActiveState=failed\nNeedDaemonReload=yes\nMainPID=0\n",
                "",
            ),
        },
    )
    assert result["differs"] == [
        "smg: 1.12.2 installed, 1.13.0 wanted",
        "unit smg: UnitFileState=disabled",
        "unit smg: ActiveState=failed",
        "unit smg: NeedDaemonReload=yes",
    ]


def test_the_module_compares_each_of_several_units_by_its_own_state_and_restart_paths(monkeypatch, capsys, tmp_path):
    """A watchdog's timer (enabled, active: no process), its oneshot service (only loaded from its current file: the
    timer starts it) and an exporter started before its modules changed (a lost restart); unit and units together."""
    unit_file, module, other = tmp_path / "exporter.service", tmp_path / "mods" / "watchdog.py", tmp_path / "x.py"
    module.parent.mkdir()
    for f in (unit_file, module, other):
        f.write_text("")
    os.utime(unit_file, (time.time() - 600, time.time() - 600))
    monkeypatch.setattr(sglang_state_due, "process_start", lambda pid: {7: time.time() - 60}[pid])
    shows = {
        "watch.timer": "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\nNeedDaemonReload=no\n",
        "watch.service": "LoadState=loaded\nUnitFileState=static\nActiveState=inactive\nNeedDaemonReload=no\nMainPID=0\n",
        "exporter": SHOW.format(pid=7),
        "smg": SHOW.format(pid=0),
    }
    args = {
        "unit": "smg",
        "units": [
            {"name": "watch.timer"},
            {"name": "watch.service", "state": "loaded"},
            {"name": "exporter", "restart_paths": [str(unit_file), str(module.parent / "*.py")]},
        ],
    }
    result = run_module(monkeypatch, capsys, args, {"systemctl": lambda argv: (0, shows[argv[-1]], "")})
    assert [argv[-1] for argv in result["ran"]] == ["smg", "watch.timer", "watch.service", "exporter"]
    assert result["newer"] == [str(module)]  # the unit file is older than the process; x.py is no restart path
    assert result["differs"] == [f"unit exporter: started before {module} changed"]
    shows |= {
        "watch.timer": "LoadState=loaded\nUnitFileState=disabled\nActiveState=inactive\nNeedDaemonReload=yes\n",
        "watch.service": "LoadState=not-found\nUnitFileState=\nActiveState=inactive\nNeedDaemonReload=no\nMainPID=0\n",
        "exporter": "LoadState=loaded\nUnitFileState=enabled\nActiveState=failed\nNeedDaemonReload=no\nMainPID=0\n",
    }
    result = run_module(
        monkeypatch, capsys, {"units": args["units"]}, {"systemctl": lambda argv: (0, shows[argv[-1]], "")}
    )
    assert (result["newer"], result["differs"]) == (
        [],
        [
            "unit watch.timer: UnitFileState=disabled",
            "unit watch.timer: ActiveState=inactive",
            "unit watch.timer: NeedDaemonReload=yes",
            "unit watch.service: LoadState=not-found",  # systemctl show says NeedDaemonReload=no for no unit
            "unit exporter: ActiveState=failed",
        ],
    )


# The writer of each file and folder the router's comparison holds (roles/sglang_router/vars/main.yml), and the
# task that includes it with its variables: a writer whose path, mode, owner or group drifts from its comparison
# entry would make every run converge (and change something) without a test failing.
WRITERS = {
    "/etc/systemd/system/smg.service": (
        "roles/sglang_service/tasks/files.yml",
        "Write the service's systemd unit",
        ("roles/sglang_router/tasks/configure.yml", "Write the router's secrets and unit"),
    ),
    "/etc/smg/smg.env": (
        "roles/sglang_service/tasks/files.yml",
        "Write the service's environment file",
        ("roles/sglang_router/tasks/configure.yml", "Write the router's secrets and unit"),
    ),
    "/opt/smg/launch.py": (
        "roles/sglang_service/tasks/launcher.yml",
        "Install the launcher that keeps the secrets out of argv",
        ("roles/sglang_router/tasks/install.yml", "Install the launcher that keeps the keys out of argv"),
    ),
    "/etc/smg/workers.json": (
        "roles/sglang_fleet/tasks/workers.yml",
        None,
        ("roles/sglang_router/tasks/configure.yml", "Write the worker list the router reads"),
    ),
    "/etc/ansible/facts.d/sglang_router.fact": (
        "roles/sglang_router/tasks/main.yml",
        "Record the router for rolling deploys",
        None,
    ),
    "/opt/smg/wheels/WHEELS.sha256": (
        "roles/sglang_router/tasks/install.yml",
        "Record the digest of the wheelhouse copied to the host",
        None,
    ),
}


def tasks(path: str) -> list[dict]:
    return yaml.safe_load((REPO / path).read_text())


def task(path: str, name: str | None) -> dict:
    found = [t for t in tasks(path) if name is None or t.get("name") == name]
    assert len(found) == 1, (path, name)
    return found[0]


def test_each_compared_file_and_folder_is_as_its_writer_task_writes_it():
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    rv = yaml.safe_load((REPO / "roles/sglang_router/vars/main.yml").read_text())
    names = {
        "sglang_router_service": "smg",
        "sglang_router_config_dir": "/etc/smg",
        "sglang_router_tools_dir": "/opt/smg",
        "sglang_router_group": "smg",
        "sglang_router_wheelhouse": "/wheels",
    }

    def render(value, context):
        while isinstance(value, str) and "{{" in value:
            value = env.from_string(value).render(context)
        return value

    for name in ("__sglang_router_env_path", "__sglang_router_manifest_path", "__sglang_router_wheels_digest_path"):
        names[name] = render(rv[name], names)
    record = {k: render(rv["__sglang_router_record"][k], names) for k in ("manifest", "owner", "group")}
    names["__sglang_router_record"] = record
    entries = [*rv["__sglang_router_files"], rv["__sglang_router_wheels_file"]]
    compared = {
        render(e["path"], names): {k: render(e.get(k), names) for k in ("mode", "owner", "group")} for e in entries
    }
    assert sorted(compared) == sorted(WRITERS)
    for path, (writer_file, writer_name, caller) in WRITERS.items():
        context = dict(names)
        if caller:
            for k, v in task(*caller).get("vars", {}).items():
                context[k] = record if v == "{{ __sglang_router_record }}" else render(v, names)
        args = next(v for k, v in task(writer_file, writer_name).items() if k.startswith("ansible.builtin."))
        written = {k: render(args.get(k), context) for k in ("mode", "owner", "group")}
        assert render(args["dest"], context) == path
        assert compared[path] == written, path  # what the writer sets is compared, and only that

    folders = task("roles/sglang_router/tasks/install.yml", "Create the router's folders")["ansible.builtin.file"]
    assert {k: folders[k] for k in ("owner", "group", "mode")} == {
        k: f"{{{{ item.{k} }}}}" for k in ("owner", "group", "mode")
    }


def test_the_module_reads_a_folders_follow_as_ansible_reads_a_boolean(monkeypatch, capsys, tmp_path):
    """A follow of "no" (a string from a template) is false: a truthy string would follow the link unseen."""
    real, link = tmp_path / "real", tmp_path / "home"
    real.mkdir()
    link.symlink_to(real)
    result = run_module(monkeypatch, capsys, {"dirs": [{"path": str(link), "follow": "no"}, {"path": str(link)}]}, {})
    assert result["differs"] == [f"{link}: not a folder"]


def expression(value, context: dict, env: jinja2.Environment):
    """A role variable's value as Ansible templates it: one ``{{ expression }}`` keeps its type."""
    if isinstance(value, list):
        return [expression(v, context, env) for v in value]
    text = value.strip() if isinstance(value, str) else ""
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return expression(env.compile_expression(text[2:-2].strip())(**context), context, env)
    return env.from_string(value).render(context) if isinstance(value, str) and "{{" in value else value


# The server's folders, as the security rule wants them (roles/sglang_server/vars/main.yml): never made through a link
# but the tools folder; the service account owns its home and the stack's cache folder only.
SERVER_DIRS = {
    "/var/lib/sglang": ("sglang", "sglang", "0750", False),
    "/etc/sglang": ("root", "sglang", "0750", False),
    "/etc/sglang/last-good": ("root", "sglang", "0700", False),
    "/var/cache/sglang": ("root", "sglang", "0750", False),
    "/opt/sglang-deploy": ("root", "root", "0755", True),
    "/var/cache/sglang/stack": ("sglang", "sglang", "0750", False),
}


def test_the_servers_account_and_folders_are_compared_as_the_install_phase_creates_them():
    """The folders install.yml compares are those install_converge.yml creates, from the same variables, each key
    passed as given; the account compared is the one sglang_service's account.yml creates with the server's
    names, in the device groups of sglang_server_device_groups that exist on the host."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["combine"] = lambda a, b: {**a, **b}
    rv = yaml.safe_load((REPO / "roles/sglang_server/vars/main.yml").read_text())
    context = {
        "sglang_server_user": "sglang",
        "sglang_server_group": "sglang",
        "sglang_server_home": "/var/lib/sglang",
        "sglang_server_config_dir": "/etc/sglang",
        "sglang_server_cache_root": "/var/cache/sglang",
        "__sglang_server_cache_dir": "/var/cache/sglang/stack",
        "sglang_server_tools_dir": "/opt/sglang-deploy",
        "sglang_server_device_groups": ["video", "render"],
        "__sglang_service_account": yaml.safe_load((REPO / "roles/sglang_service/vars/main.yml").read_text())[
            "__sglang_service_account"
        ],
    }
    context["__sglang_server_last_good_dir"] = expression(rv["__sglang_server_last_good_dir"], context, env)
    install = "roles/sglang_server/tasks/install.yml"
    converge = "roles/sglang_server/tasks/install_converge.yml"
    due = task(install, "Find whether the service account or the server's folders differ from what the role creates")
    order = [t["name"] for t in tasks(converge)]
    makers = [task(converge, "Create the server's home, configuration, cache and tools folders")]
    makers.append(task(converge, "Create the stack's cache folder"))  # after the others: not through a link found
    assert order.index(makers[0]["name"]) < order.index(makers[1]["name"])
    keys = ("owner", "group", "mode", "follow")
    for maker in makers:
        assert {k: maker["ansible.builtin.file"][k] for k in ("path", *keys)} == {
            "path": "{{ item.path }}",
            "owner": "{{ item.owner | default(omit) }}",
            "group": "{{ item.group | default(omit) }}",
            "mode": "{{ item.mode }}",
            "follow": "{{ item.follow | default(true) }}",  # the comparison's default too (sglang_state_due's docs)
        }
    lists = {k: rv[k] for k in ("__sglang_server_dirs", "__sglang_server_cache_dir_entry")}
    created = [e for maker in makers for e in expression(maker["loop"], {**context, **lists}, env)]
    assert expression(due["sglang.deploy.sglang_state_due"]["dirs"], {**context, **lists}, env) == created
    dirs = {}
    for entry in created:
        assert set(entry) <= {"path", *keys}, entry  # a key the file task does not pass would be compared alone
        dirs[expression(entry["path"], context, env)] = tuple(
            expression(entry.get(k), context, env) for k in ("owner", "group", "mode")
        ) + (entry.get("follow", True),)
    assert dirs == SERVER_DIRS

    made = task(converge, "Create the service account")
    names = ("sglang_service_user", "sglang_service_group", "sglang_service_home")
    written = {k: expression(made["vars"][k], context, env) for k in names}
    context.update({k: expression(v, context, env) for k, v in due.get("vars", {}).items()})
    context["__sglang_service_account"] = {
        k: expression(v, context, env) for k, v in context["__sglang_service_account"].items()
    }
    compared = expression(rv["__sglang_server_account"], context, env)
    account_yml = "roles/sglang_service/tasks/account.yml"
    user = task(account_yml, "Create the service account")["ansible.builtin.user"]
    assert (user["shell"], user["home"]) == (
        "{{ __sglang_service_account.shell }}",
        "{{ __sglang_service_account.home }}",
    )
    assert compared == {
        "user": written["sglang_service_user"],
        "group": written["sglang_service_group"],
        "groups": ["video", "render"],
        "shell": "/usr/sbin/nologin",
        "home": written["sglang_service_home"],
    }
    getent = {"ansible_facts": {"getent_group": {"video": [], "render": []}}}  # every one there: all joined
    assert expression(made["vars"]["sglang_service_groups"], {**context, **getent}, env) == compared["groups"]
