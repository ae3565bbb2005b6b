"""What differs on a host from what a role converges it to (module_utils/state_due.py): a role skips its
convergence only when nothing does, so every kind of drift must show."""

from __future__ import annotations

import getpass
import grp
import hashlib
import os
import pwd

from ansible_collections.sglang.deploy.plugins.module_utils.state_due import (
    absent,
    account_differs,
    dirs_differ,
    files_differ,
)


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


def test_an_installed_release_is_present_and_a_removed_one_absent(tmp_path):
    (tmp_path / "lib" / "python3.11" / "site-packages" / "smg-1.13.0.dist-info").mkdir(parents=True)
    pattern = str(tmp_path / "lib" / "python*" / "site-packages" / "smg-{}.dist-info")
    assert absent([pattern.format("1.13.0")]) == []
    assert absent([pattern.format("1.14.0")]) == [f"{pattern.format('1.14.0')}: absent"]


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
