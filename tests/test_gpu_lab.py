"""tools/gpu_lab.py, the parts that need no root and no GPU: the pins from constraints.txt, the parts round trip, the
merged-usr upper layer (only what the host lacks), the boot script's mounts, and the refusals without a booted lab."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_lab", REPO / "tools" / "gpu_lab.py")
gpu_lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_lab)


def test_pins_decide_python_version_markers_for_the_target():
    text = (
        "# comment\n"
        'ansible-core==2.21.5 ; python_version >= "3.12"\n'
        'ansible-core==2.19.14 ; python_version < "3.12"\n'
        "Jinja2==3.1.6\n"
    )
    assert gpu_lab.pins(text, ("ansible-core", "jinja2")) == ["ansible-core==2.21.5", "Jinja2==3.1.6"]
    assert gpu_lab.pins(text, ("ansible-core",), python=(3, 11)) == ["ansible-core==2.19.14"]


def test_pins_name_a_package_without_a_pin():
    with pytest.raises(gpu_lab.LabError, match="pins no resolvelib for Python 3.12: pin them there"):
        gpu_lab.pins("Jinja2==3.1.6\n", ("Jinja2", "resolvelib"))


def test_the_projects_constraints_pin_every_wheel_the_lab_fetches():
    assert len(gpu_lab.pins((REPO / "constraints.txt").read_text())) == len(gpu_lab.WHEELS)


def test_parts_round_trip_and_a_broken_part_is_refused(tmp_path):
    work = tmp_path / "work"
    (work / "debs").mkdir(parents=True)
    (work / "whl").mkdir()
    (work / "debs" / "systemd_252_amd64.deb").write_bytes(b"d" * 300)
    (work / "whl" / "x-1-py3-none-any.whl").write_bytes(b"w" * 300)
    parts = gpu_lab.pack(work, tmp_path / "parts", part_bytes=1000)
    assert [p.name for p in parts] == [f"part{i:02d}" for i in range(len(parts))] and len(parts) > 1
    gpu_lab.join(tmp_path / "parts", tmp_path / "stage" / "lab.tar")
    assert (tmp_path / "stage" / "debs" / "systemd_252_amd64.deb").read_bytes() == b"d" * 300
    assert not (tmp_path / "stage" / "lab.tar").exists()
    parts[-1].write_bytes(parts[-1].read_bytes()[:-1])
    with pytest.raises(gpu_lab.LabError, match="a part is missing or broken"):
        gpu_lab.join(tmp_path / "parts", tmp_path / "stage2" / "lab.tar")


def test_upper_plan_takes_only_what_the_host_lacks_under_merged_usr(tmp_path):
    tree, host = tmp_path / "debroot", tmp_path / "host"
    for rel in ("lib/systemd/systemd", "bin/systemctl", "usr/lib/x86_64-linux-gnu/libip4tc.so.2", "etc/x.conf"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("new")
    (tree / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (tree / "lib/x86_64-linux-gnu/libssl.so.3").write_text("debian's")
    (host / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (host / "usr/lib/x86_64-linux-gnu/libssl.so.3").write_text("the host's own")
    (host / "etc").mkdir()
    (host / "etc/x.conf").write_text("host")
    assert gpu_lab.upper_plan(tree, host) == [
        "usr/bin/systemctl",
        "usr/lib/systemd/systemd",
        "usr/lib/x86_64-linux-gnu/libip4tc.so.2",
    ]


def test_fill_upper_copies_files_and_links_and_a_second_boot_keeps_what_is_there(tmp_path):
    tree, upper, host = tmp_path / "debroot", tmp_path / "upper", tmp_path / "host"
    (tree / "lib/systemd").mkdir(parents=True)
    (tree / "lib/systemd/systemd").write_text("252")
    (tree / "lib/systemd/link").symlink_to("systemd")
    host.mkdir()
    assert gpu_lab.fill_upper(tree, upper, host) == ["usr/lib/systemd/link", "usr/lib/systemd/systemd"]
    assert os.readlink(upper / "usr/lib/systemd/link") == "systemd"
    (upper / "usr/lib/systemd/systemd").write_text("changed inside the lab")
    gpu_lab.fill_upper(tree, upper, host)  # copying onto the link raised FileExistsError
    assert (upper / "usr/lib/systemd/systemd").read_text() == "changed inside the lab"


def test_boot_script_mounts_then_execs_systemd_in_the_merged_root(tmp_path):
    script = gpu_lab.boot_script(Path("/l/merged"), Path("/l/upper"), Path("/l/work"), ["/repo", "/out"])
    lines = script.splitlines()
    assert lines[1] == "mount -t overlay overlay -o lowerdir=/,upperdir=/l/upper,workdir=/l/work /l/merged"
    assert "mkdir -p /l/merged/repo && mount --rbind /repo /l/merged/repo" in lines
    assert "mount -t tmpfs tmpfs /l/merged/tmp" in lines
    assert lines[-2:] == ["export container=other", "exec chroot /l/merged /usr/lib/systemd/systemd --system"]


def test_exec_and_stop_without_a_booted_lab_say_boot_first(tmp_path, capsys):
    assert gpu_lab.main(["exec", str(tmp_path), "--", "true"]) == 2
    assert "no lab booted under" in capsys.readouterr().err
    assert gpu_lab.main(["stop", str(tmp_path)]) == 2


def test_boot_refuses_a_root_that_holds_a_lab(tmp_path):
    (tmp_path / "unshare.pid").write_text("1\n")
    with pytest.raises(gpu_lab.LabError, match="stop it first"):
        gpu_lab.boot(tmp_path / "parts", tmp_path, [], "python3")


def test_pack_keeps_only_debs_and_wheels(tmp_path):
    work = tmp_path / "work"
    (work / "debs").mkdir(parents=True)
    (work / "whl").mkdir()
    (work / "notes.txt").write_text("not carried")
    (work / "whl" / "a-1-py3-none-any.whl").write_bytes(b"a")
    gpu_lab.pack(work, tmp_path / "parts")
    gpu_lab.join(tmp_path / "parts", tmp_path / "stage" / "lab.tar")
    assert sorted(p.relative_to(tmp_path / "stage").as_posix() for p in (tmp_path / "stage").rglob("*")) == [
        "whl",
        "whl/a-1-py3-none-any.whl",
    ]


def test_a_command_in_the_lab_gets_no_variable_only_the_gpu_machine_sets(monkeypatch):
    """The GPU machine sets PYTHONDONTWRITEBYTECODE; a GPU host's root shell does not, and with it the roles' root
    runs of the stack's Python left the image's modules without bytecode for every start of the unit."""
    seen = {}
    monkeypatch.setattr(gpu_lab, "_pid", lambda root: 4242)
    monkeypatch.setattr(gpu_lab.subprocess, "run", lambda argv, **kw: seen.update(argv=argv, env=kw["env"]))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("SGLANG_LAB_API_KEY", "k" * 24)
    gpu_lab.nsenter(Path("/root/gpulab"), ["ansible-playbook", "site.yml"])
    assert seen["argv"][:3] == ["nsenter", "-t", "4242"] and seen["argv"][-2:] == ["ansible-playbook", "site.yml"]
    assert "PYTHONDONTWRITEBYTECODE" not in seen["env"] and seen["env"]["SGLANG_LAB_API_KEY"] == "k" * 24


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda sha: None, "missing"),
        (lambda sha: sha.write_text(""), "holds no sha256"),
        (lambda sha: sha.write_text("not-a-digest  lab.tar\n"), "holds no sha256"),
        (lambda sha: sha.mkdir(), "not a regular file"),
        (lambda sha: sha.symlink_to("/dev/zero"), "not a regular file"),
    ],
)
def test_join_refuses_a_sha256_file_that_is_missing_empty_or_not_a_file(tmp_path, make, problem):
    # A sha file linked to /dev/zero was read whole (until memory ran out); the others gave a traceback.
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part00").write_bytes(b"x")
    make(parts / "lab.sha256")
    with pytest.raises(gpu_lab.LabError, match=f"lab.sha256.*{problem}"):
        gpu_lab.join(parts, tmp_path / "stage" / "lab.tar")


def test_join_refuses_a_part_that_is_not_a_file(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "lab.sha256").write_text("0" * 64 + "  lab.tar\n")
    (parts / "part00").symlink_to("/dev/zero")
    with pytest.raises(gpu_lab.LabError, match="part00 is not a regular file"):
        gpu_lab.join(parts, tmp_path / "stage" / "lab.tar")
