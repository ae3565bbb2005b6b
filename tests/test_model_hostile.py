"""The model role's host code and the Hub downloads against hostile hosts, files and servers (issue 41): a partial
folder planted as a link on a shared models folder (N1), a lock path with ': ' (N5), a name too long (N6), a file name
that is not UTF-8 (N7), endless and throttled bodies from the Hub (N3), an http endpoint (N16), a system folder as the
model folder (N17)."""

from __future__ import annotations

import contextlib
import grp
import http.server
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import yaml
from ansible_json import PLAYBOOK_BIN, needs_playbook
from emulator_proc import run_module  # first: puts the repo's module_utils on the import path

from sglang_deploy.locks import model_lock
from sglang_deploy.cli import main
from ansible_collections.sglang.deploy.plugins.module_utils import model, model_place

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "modules"))
import sglang_model_install  # noqa: E402
import sglang_model_plan  # noqa: E402

OTHER_UID = 4242  # another local user
REVISION = "0123456789abcdef" * 2 + "01234567"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plants folders owned by another user (needs root)")


def _checkpoint(folder: Path) -> Path:
    """config.json, sub/w.safetensors and w.safetensors: a lock with a subfolder."""
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (folder / "w.safetensors").write_bytes(b"w" * 1000)
    (folder / "sub" / "w.safetensors").write_bytes(b"s" * 1000)
    return folder


@pytest.fixture
def locked(tmp_path: Path) -> dict:
    return model_lock.lock_folder("lab", _checkpoint(tmp_path / "src"), tmp_path / "models").lock


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A folder of root's the other user wants changed: its files, mode and owner must stay."""
    folder = tmp_path / "victim"
    folder.mkdir(mode=0o700)
    (folder / "config.json").write_text("root's own")
    (folder / "keep.txt").write_text("root's own")
    return folder


def _snapshot(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode), p.stat().st_uid) for p in folder.iterdir()} | {
        ".": stat.S_IMODE(folder.stat().st_mode)
    }


def _copy(src: Path, dest: Path) -> None:
    os.system(f"cp -r {src} {dest}")


# N1: a planted <dir>.partial, <dir>.previous or <dir>.


@pytest.mark.parametrize("step", ["plan", "prepare", "install"])
def test_a_partial_folder_planted_as_a_link_is_refused_and_nothing_is_done_where_it_leads(
    capsys, tmp_path, locked, victim, step
):
    dest = tmp_path / "models" / "lab"
    Path(f"{dest}{model.PARTIAL}").symlink_to(victim)
    before = _snapshot(victim)
    module, args = (sglang_model_plan, {}) if step == "plan" else (sglang_model_install, {"step": step})
    failed, result = run_module(module, {"lock": locked, "dest": str(dest), **args}, capsys)
    assert failed and f"{dest}{model.PARTIAL} is a link" in result["msg"], result
    assert "remove it (the link itself, not where it leads)" in result["msg"]
    assert _snapshot(victim) == before and not dest.exists()


@pytest.mark.parametrize("which", [model.PARTIAL, model.PREVIOUS, ""])
def test_a_folder_of_another_user_or_a_link_beside_the_checkpoint_is_refused(tmp_path, locked, victim, which):
    dest = tmp_path / "models" / "lab"
    planted = Path(f"{dest}{which}")
    planted.mkdir()
    os.chown(planted, OTHER_UID, OTHER_UID)
    assert model_place.place_problems(str(dest)) == [
        f"{planted} is owned by uid {OTHER_UID}, not root: the role makes and replaces that folder itself and never "
        "works through what another user may have put there; see what it is, remove it (the link itself, not where "
        "it leads) and run again"
    ]
    planted.rmdir()
    planted.symlink_to(victim)
    assert f"{planted} is a link" in model.usage_problem(locked, str(dest))
    result = model.make_partial(str(dest), locked, 0)
    assert result["problems"] and f"{planted} is a link" in result["problems"][0]
    assert model.finish(f"{dest}{model.PARTIAL}", str(dest), locked)["problems"] == result["problems"]


def test_a_models_folder_others_can_write_is_refused_unless_sticky(tmp_path, locked):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    dest = shared / "lab"
    (problem,) = model_place.place_problems(str(dest))
    assert problem.startswith(f"{shared} is writable by other users (mode 0777) without the sticky bit: another user")
    assert "chmod go-w, or chmod +t" in problem
    shared.chmod(0o1777)
    assert model_place.place_problems(str(dest)) == []
    shared.chmod(0o755)
    os.chown(shared, OTHER_UID, OTHER_UID)
    assert f"{shared} is owned by uid {OTHER_UID}, not root" in model_place.place_problems(str(dest))[0]
    os.chown(shared, 0, 0)
    (tmp_path / "link").symlink_to(shared)  # the folders a link leads to count too
    shared.chmod(0o777)
    assert f"{shared} is writable by other users" in model.usage_problem(locked, str(tmp_path / "link" / "lab"))


def test_a_models_folder_an_acl_lets_another_user_write_is_refused(tmp_path, locked):
    """setfacl -m u:alice:rwx on a folder of root's group: its mode reads 0775 root:root, which passed as writable by
    root's group only, and alice could swap <dir>.partial for a link between a check and its use (issue 41 review)."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    entry = lambda tag, perm, uid=0xFFFFFFFF: struct.pack("<HHI", tag, perm, uid)  # noqa: E731
    acl = struct.pack("<I", 2) + entry(1, 7) + entry(2, 7, OTHER_UID) + entry(4, 5) + entry(0x10, 7) + entry(0x20, 5)
    try:
        os.setxattr(shared, "system.posix_acl_access", acl)
    except OSError as exc:
        pytest.skip(f"no POSIX ACLs here: {exc}")
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o775 and os.stat(shared).st_gid == 0
    (problem,) = model_place.place_problems(str(shared / "lab"))
    assert problem.startswith(f"{shared} is writable by other users (mode 0775, an ACL) without the sticky bit")
    os.setxattr(shared, "system.posix_acl_access", acl[:-16] + entry(0x10, 5) + entry(0x20, 5))  # mask r-x
    assert model_place.place_problems(str(shared / "lab")) == []


def test_the_partial_folder_is_made_by_the_role_and_what_was_planted_in_it_is_removed(capsys, tmp_path, locked):
    dest = tmp_path / "models" / "lab"
    partial = Path(f"{dest}{model.PARTIAL}")
    partial.mkdir()
    (partial / "sub").symlink_to("/etc")
    (partial / "w.safetensors").write_bytes(b"w" * 1000)
    os.chown(partial / "w.safetensors", OTHER_UID, OTHER_UID)  # could keep it open and rewrite it after the check
    (tmp_path / "outside.json").write_text("{}")
    os.link(tmp_path / "outside.json", partial / "config.json")  # a second name of a file outside
    group, etc = grp.getgrgid(os.getegid()).gr_name, os.stat("/etc")
    failed, result = run_module(
        sglang_model_install, {"lock": locked, "dest": str(dest), "step": "prepare", "group": group}, capsys
    )
    assert not failed and sorted(result["removed"]) == ["config.json", "sub", "w.safetensors"], result
    assert os.stat("/etc") == etc and (tmp_path / "outside.json").read_text() == "{}"  # untouched
    for folder in (partial, partial / "sub"):
        st = os.lstat(folder)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o550 and st.st_uid == 0
    assert sorted(os.listdir(partial)) == ["sub"]
    failed, result = run_module(
        sglang_model_install, {"lock": locked, "dest": str(dest), "step": "prepare", "group": "no-such-group"}, capsys
    )
    assert failed and "group 'no-such-group' does not exist" in result["msg"]


def test_a_linked_subfolder_in_the_partial_folder_is_removed_never_deleted_through(tmp_path, locked, victim):
    dest = tmp_path / "models" / "lab"
    partial = Path(f"{dest}{model.PARTIAL}")
    _copy(tmp_path / "src", partial)
    for name in os.listdir(partial / "sub"):
        (partial / "sub" / name).unlink()
    (partial / "sub").rmdir()
    (victim / "w.safetensors").write_bytes(b"x" * 1000)  # what sub/w.safetensors names through the link
    (partial / "sub").symlink_to(victim)
    before = _snapshot(victim)
    assert "sub/w.safetensors" in model.plan(str(dest), locked)["to_copy"]  # what is behind a link is not there
    result = model.finish(str(partial), str(dest), locked)
    assert result["problems"] == [f"sub/w.safetensors: a link or not a regular file in {partial}"]
    assert _snapshot(victim) == before and not os.path.lexists(partial / "sub") and not dest.exists()


def test_a_previous_folder_planted_as_a_link_is_not_followed_by_finish(tmp_path, locked, victim, monkeypatch):
    """Between the checks and the rename: removed as a link, never emptied through."""
    dest = tmp_path / "models" / "lab"
    _copy(tmp_path / "src", dest)
    _copy(tmp_path / "src", Path(f"{dest}{model.PARTIAL}"))
    before = _snapshot(victim)
    real = model.verified

    def plant(folder: str, lock: dict) -> list:
        Path(f"{dest}{model.PREVIOUS}").symlink_to(victim)
        return real(folder, lock)

    monkeypatch.setattr(model, "verified", plant)
    assert model.finish(f"{dest}{model.PARTIAL}", str(dest), locked)["problems"] == []
    assert _snapshot(victim) == before and model.plan(str(dest), locked)["installed"]


# N5: a lock path with ': ' (a problem sentence was split at its first ': ').


def test_verified_removes_the_file_a_problem_names_not_a_prefix_of_it(tmp_path):
    folder = _checkpoint(tmp_path / "ckpt")
    lock = model_lock.lock_folder("lab", folder, tmp_path / "models").lock
    lock["files"].append({"path": "config.json: copy", "size": 2, "sha256": "0" * 64})
    assert model.validate(lock) == []
    assert model.verified(str(folder), lock) == [f"config.json: copy: missing from {folder}"]
    assert (folder / "config.json").exists()


# N6, N7: a lock name too long, a file name that is not UTF-8.


def test_a_lock_name_too_long_is_a_clear_error(tmp_path, capsys):
    name = "a" * 256
    argv = ["--models-dir", str(tmp_path / "models")]
    (tmp_path / "models").mkdir()
    assert main(["model", "lock", name, "--path", str(_checkpoint(tmp_path / "ckpt")), *argv]) == 1
    assert main(["model", "check", name, str(tmp_path / "ckpt"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("at most 100 characters") == 2 and "Traceback" not in err
    assert list((tmp_path / "models").iterdir()) == []


def test_a_file_name_that_is_not_utf8_is_refused_and_no_lock_is_written(tmp_path, capsys):
    folder = _checkpoint(tmp_path / "ckpt")
    with open(os.path.join(os.fsencode(folder), b"tok\xff.json"), "wb") as handle:
        handle.write(b"{}")
    models = tmp_path / "models"
    assert main(["model", "lock", "lab", "--path", str(folder), "--models-dir", str(models)]) == 1
    err = capsys.readouterr().err
    assert "'tok\\udcff.json' is not UTF-8" in err and "rename the file" in err
    assert not (models / "lab.lock.yml").exists()


# R15 (issue 48): characters that act on the terminal that shows a lock's paths.
# Red-team of R15: the line and paragraph separators and the zero-width characters too.
CONTROLS = ["\u202e", "\x85", "\x9b", "\u2066", "\x1b", "\u2028", "\u2029", "\u200b", "\u200d", "\u2060", "\ufeff"]


@pytest.mark.parametrize("char", CONTROLS)
def test_a_file_name_with_a_bidi_override_or_a_c1_control_is_refused_and_no_lock_is_written(tmp_path, capsys, char):
    """ansible-playbook prints a lock's paths raw in the role's loop labels: U+202E reorders what is read, C1's CSI
    (\\x9b) drives the terminal; only C0 and DEL were refused (issue 48, R15)."""
    folder = _checkpoint(tmp_path / "ckpt")
    (folder / f"evil{char}gpj.safetensors").write_bytes(b"x")
    models = tmp_path / "models"
    assert main(["model", "lock", "lab", "--path", str(folder), "--models-dir", str(models)]) == 1
    err = capsys.readouterr().err
    assert f"file path 'evil{ascii(char)[1:-1]}gpj.safetensors' holds a control character" in err, err
    assert char not in err and not (models / "lab.lock.yml").exists()
    entry = {"path": f"sub/a{char}b", "size": 1, "sha256": "0" * 64}
    lock = {"name": "lab", "files": [{**entry, "path": "config.json"}, entry]}
    (problem,) = model.validate(lock)
    assert problem.startswith(f"files: file path {entry['path']!r} holds a control character")


def _labels(path: str) -> list[str]:
    """The loop labels of the tasks of a role's task file, blocks included."""
    tasks, labels = list(yaml.safe_load((REPO / path).read_text())), []
    while tasks:
        task = tasks.pop()
        tasks += task.get("block", []) + task.get("rescue", []) + task.get("always", [])
        labels += [task["loop_control"]["label"]] if "label" in task.get("loop_control", {}) else []
    return labels


@needs_playbook
def test_the_roles_loop_labels_escape_the_lock_paths_they_print(tmp_path):
    assert _labels("roles/sglang_model/tasks/fetch.yml") == ["{{ item | sglang.deploy.sglang_escaped }}"] * 2
    assert _labels("roles/sglang_stack/tasks/wheels.yml") == ["{{ item.file | sglang.deploy.sglang_escaped }}"]
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "ansible.builtin.debug": {"msg": "x"},
                    "loop": [f"evil{char}gpj" for char in CONTROLS],
                    "loop_control": {"label": "{{ item | sglang.deploy.sglang_escaped }}"},
                }
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LOCALHOST_WARNING": "false"}
    env["ANSIBLE_STDOUT_CALLBACK"] = "ansible.builtin.default"
    run = subprocess.run(
        [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", "play.yml"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    for char in CONTROLS:
        assert f"(item=evil{ascii(char)[1:-1]}gpj)" in run.stdout
    assert not [char for char in CONTROLS if char in run.stdout]


# N17: a system folder as the model folder.


@pytest.mark.parametrize(
    "dest",
    ["/etc", "/home", "/usr", "/usr/lib/x86_64-linux-gnu", "/var", "/var/lib", "/opt", "/srv", "/tmp", "/root"]
    + ["/home/alice", "/proc/1", "/boot/efi", "/dev/shm/lab", "/run/lab", "/sys/x", "/bin", "/lib64", "/sbin/x"],
)
def test_a_system_folder_is_refused_as_the_model_folder(capsys, locked, dest):
    failed, result = run_module(sglang_model_plan, {"lock": locked, "dest": dest}, capsys)
    assert failed and f"model folder {dest} is a system folder or inside one" in result["msg"], result
    assert "set sglang_model_dir (or sglang_model_path) to a folder of its own" in result["msg"]


@pytest.mark.parametrize("dest", ["/data/models/lab", "/opt/models/lab", "/srv/lab", "/home/alice/models", "/tmp/x"])
def test_a_folder_of_its_own_is_a_model_folder(dest):
    assert model_place.dest_problem(dest) == ""


def test_a_model_folder_that_leads_into_a_system_folder_is_refused(tmp_path):
    (tmp_path / "models").symlink_to("/etc")
    assert "(really /etc/lab) is a system folder" in model_place.dest_problem(str(tmp_path / "models" / "lab"))


def test_a_missing_parent_planted_as_a_link_after_the_plan_is_refused_not_chowned_where_it_leads(tmp_path, locked):
    """The plan saw the folder above the checkpoint missing (a sticky shared folder is allowed); another user then
    linked it to a folder of theirs. The role's Ansible file task (state=directory, owner root, mode 0755) followed
    the link: the other user's folder became root's, 0755, and the checkpoint went in it (issue 41 review)."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    dest = shared / "models" / "lab"
    assert model.usage_problem(locked, str(dest)) == "" and model.plan(str(dest), locked)["parent_missing"]
    (shared / "models").symlink_to(theirs)
    os.chown(shared / "models", OTHER_UID, OTHER_UID, follow_symlinks=False)
    result = model.make_partial(str(dest), locked, 0)
    assert result["problems"] and f"{shared / 'models'} is a link owned by uid {OTHER_UID}" in result["problems"][0]
    st = os.stat(theirs)
    assert (st.st_uid, stat.S_IMODE(st.st_mode), os.listdir(theirs)) == (OTHER_UID, 0o700, [])
    (shared / "models").unlink()
    assert model.make_partial(str(dest), locked, 0)["problems"] == []  # made here: root's, 0755
    st = os.lstat(shared / "models")
    assert stat.S_ISDIR(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert Path(f"{dest}{model.PARTIAL}").is_dir()
    fetch = (REPO / "roles/sglang_model/tasks/fetch.yml").read_text()
    assert "state: directory" not in fetch  # no Ansible task makes a folder of the model's (it follows links)


@pytest.mark.parametrize("planted", ["link", "folder"])
def test_a_parent_planted_between_the_checks_and_its_mkdir_is_refused(tmp_path, locked, monkeypatch, planted):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    dest = shared / "models" / "lab"
    real_mkdir = os.mkdir

    def racing_mkdir(path, mode=0o777, **kwargs):  # the other user wins the race for the folder above dest
        if str(path) == str(shared / "models"):
            if planted == "link":
                os.symlink(theirs, path)
            else:
                real_mkdir(path, 0o777)
                os.chown(path, OTHER_UID, OTHER_UID)
        return real_mkdir(path, mode, **kwargs)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    result = model.make_partial(str(dest), locked, 0)
    assert result["problems"] and str(shared / "models") in result["problems"][0], result
    assert stat.S_IMODE(os.stat(theirs).st_mode) == 0o700 and os.listdir(theirs) == []


def test_a_link_planted_above_the_missing_folders_after_the_check_is_not_made_through(tmp_path, locked, monkeypatch):
    """make_partial checked the folders above dest, then make_parents walked up to the first one there: a link
    another user put on the sticky shared folder in between ended the walk, and the mkdir, fchown and fchmod of the
    folder below it went where it led (an empty folder of root's, 0755, named as dest's, made in a folder the other
    user picks; issue 41 review 2)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    dest = shared / "models" / "lab" / "ckpt"
    real, calls = model_place.place_problems, []

    def racing(path):  # the other user plants shared/models once the first check is done
        calls.append(path)
        problems = real(path)
        if len(calls) == 1:
            (shared / "models").symlink_to(victim)
            os.chown(shared / "models", OTHER_UID, OTHER_UID, follow_symlinks=False)
        return problems

    monkeypatch.setattr(model, "place_problems", racing)
    result = model.make_partial(str(dest), locked, 0)
    assert result["problems"] and f"{shared / 'models'} is a link owned by uid {OTHER_UID}" in result["problems"][0]
    assert os.listdir(victim) == []


def test_the_role_checks_the_model_folder_with_the_plan_module_before_anything_else():
    """The rule lives in model.py: the role's first task on the host that reads sglang_model_dir is the plan."""
    tasks = yaml.safe_load((REPO / "roles/sglang_model/tasks/main.yml").read_text())
    on_host = [t for t in tasks if "sglang_model_dir" in str(t) and "ansible.builtin.assert" not in t]
    assert on_host[0]["sglang.deploy.sglang_model_plan"]["dest"] == "{{ sglang_model_dir }}"


# N3, N16: the Hub.


@pytest.fixture
def hub():
    """A Hub endpoint on loopback: /<repo>/resolve/<rev>/<path> answers what bodies[path] says: bytes, 'endless' (no
    length, never ends), 'drip' (a byte every 50 ms), 'huge' (announces 100 GB), ('redirect', url); every request's
    Authorization header is kept in seen."""
    bodies, seen, stopping = {}, [], threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = bodies.get(self.path.split("/resolve/", 1)[-1].split("/", 1)[-1], b"")
            if isinstance(body, tuple):
                self.send_response(302)
                self.send_header("Location", body[1])
                self.end_headers()
                return
            self.send_response(200)
            if body == "huge":
                self.send_header("Content-Length", str(100 * 10**9))
            elif isinstance(body, bytes):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if isinstance(body, bytes):
                    self.wfile.write(body)
                while not isinstance(body, bytes) and not stopping.is_set():
                    self.wfile.write(b"x" * (65536 if body == "endless" else 1))
                    self.wfile.flush()
                    time.sleep(0 if body == "endless" else 0.05)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield types.SimpleNamespace(url=f"http://127.0.0.1:{server.server_port}", bodies=bodies, seen=seen)
    stopping.set()
    server.shutdown()


def _hub_lock(folder: Path, tmp_path: Path) -> dict:
    lock = model_lock.lock_folder("lab", folder, tmp_path / "models").lock
    return {**lock, "repository": "lab/dense", "revision": REVISION}


def _bounded(call, seconds: float = 60):
    """call() in a thread: a download that never ends fails the test, not the run. Returns its exception. The 60 s
    guard a hang (the downloads allow an hour a file; the tests' own timeouts are 1 s), not speed."""
    caught = []

    def run() -> None:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            caught.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), "the download did not stop"
    return caught[0] if caught else None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "endless",
            "from {url} failed: w.safetensors: DownloadStopped: sent more than its size of 1000 bytes",
        ),
        ("huge", "from {url} failed: w.safetensors: DownloadStopped: announces 100.00 GB, over its size"),
        (b"w" * 1001, "from {url} failed: w.safetensors: DownloadStopped: announces 0.00 GB, over its size"),
    ],
)
def test_a_hub_download_stops_at_the_locked_size(hub, tmp_path, body, message):
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    hub.bodies.update({"config.json": (tmp_path / "src/config.json").read_bytes(), "w.safetensors": body})
    hub.bodies["sub/w.safetensors"] = (tmp_path / "src/sub/w.safetensors").read_bytes()
    cache = tmp_path / "cache"
    error = _bounded(lambda: model_lock.hub_download(lock, str(cache), endpoint=hub.url))
    assert isinstance(error, model_lock.ModelLockError) and message.format(url=hub.url) in str(error), error
    assert sorted(os.listdir(cache)) == ["config.json", "sub"]  # no w.safetensors, no temporary file


@pytest.fixture
def tls_drip():
    """An https endpoint on loopback that never ends its TLS handshake: a record header, then a byte every 50 ms."""
    listener, stopping = socket.create_server(("127.0.0.1", 0)), threading.Event()

    def drip(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.recv(4096)  # the ClientHello
            conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB
            while not stopping.is_set():
                conn.sendall(b"\x02")
                time.sleep(0.05)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=drip, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    stopping.set()
    listener.close()


def test_a_hub_download_stops_at_its_deadline_while_the_tls_handshake_drips(tls_drip, tmp_path):
    """The deadline shut down the sockets urllib had connected, but an https socket was known only once its
    handshake was done: a server (or anyone on the way) dripping the handshake held the download for days, whatever
    the deadline (issue 41 review)."""
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    error = _bounded(lambda: model_lock.hub_download(lock, str(tmp_path / "cache"), endpoint=tls_drip, file_timeout=1))
    assert isinstance(error, model_lock.ModelLockError), error
    assert "stopped at the deadline of the fetch" in str(error)
    assert not [path for path in (tmp_path / "cache").rglob("*") if path.is_file()]  # no temporary file left


def test_a_redirect_to_ftp_is_refused_so_the_deadline_holds(hub, tmp_path):
    """urllib follows a redirect to ftp://, whose sockets the deadline did not know: a Hub (or a listener on a
    share's port) redirecting to an FTP server that drips its greeting held the download for ever (issue 41 review)."""
    ftp, stopping = socket.create_server(("127.0.0.1", 0)), threading.Event()

    def drip() -> None:
        with contextlib.suppress(OSError):
            conn = ftp.accept()[0]
            while not stopping.is_set():
                conn.sendall(b"2")
                time.sleep(0.05)

    threading.Thread(target=drip, daemon=True).start()
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    hub.bodies["config.json"] = ("redirect", f"ftp://127.0.0.1:{ftp.getsockname()[1]}/x")
    lock = {**lock, "files": [entry for entry in lock["files"] if entry["path"] == "config.json"]}
    error = _bounded(lambda: model_lock.hub_download(lock, str(tmp_path / "cache"), endpoint=hub.url, file_timeout=1))
    stopping.set()
    ftp.close()
    assert isinstance(error, model_lock.ModelLockError), error
    assert "a redirect to ftp:// is refused (http and https only)" in str(error)


def test_a_redirect_whose_connect_ends_past_the_deadline_is_stopped(hub, tmp_path, monkeypatch):
    """The deadline shut down the sockets known when it passed: a redirect whose TCP connect ended after it (a server
    that lets its accept queue fill up delays the SYN-ACK by seconds) gave a socket no one shut down, and the server
    dripped its body for ever (issue 41 review 2)."""
    target, stopping = socket.create_server(("127.0.0.1", 0)), threading.Event()
    port, create = target.getsockname()[1], socket.create_connection

    def drip() -> None:
        with contextlib.suppress(OSError):
            conn = target.accept()[0]
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
            while not stopping.is_set():
                conn.sendall(b"x")
                time.sleep(0.05)

    def slow(address, *args, **kwargs):  # the SYN-ACK of the redirect's server comes after the deadline
        if address[1] == port:
            time.sleep(1.5)
        return create(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", slow)
    threading.Thread(target=drip, daemon=True).start()
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    hub.bodies["config.json"] = ("redirect", f"http://127.0.0.1:{port}/x")
    lock = {**lock, "files": [{**e, "size": 10**9} for e in lock["files"] if e["path"] == "config.json"]}
    error = _bounded(lambda: model_lock.hub_download(lock, str(tmp_path / "cache"), endpoint=hub.url, file_timeout=1))
    stopping.set()
    target.close()
    assert isinstance(error, model_lock.ModelLockError), error
    assert "stopped at the deadline of the fetch" in str(error)


def test_a_hub_download_stops_at_its_deadline_per_file(hub, tmp_path, capsys):
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    hub.bodies.update({name: "drip" for name in ("config.json", "w.safetensors", "sub/w.safetensors")})
    error = _bounded(lambda: model_lock.hub_download(lock, str(tmp_path / "cache"), endpoint=hub.url, file_timeout=1))
    assert isinstance(error, model_lock.ModelLockError)
    assert "stopped at the deadline of the fetch after 0.0 MB (the limit per file is 1 s: --file-timeout)" in str(error)
    (tmp_path / "models" / "lab.lock.yml").write_text(yaml.safe_dump(lock))
    argv = ["model", "fetch", "lab", "--models-dir", str(tmp_path / "models"), "--cache", str(tmp_path / "cache")]
    assert _bounded(lambda: main([*argv, "--endpoint", hub.url, "--file-timeout", "0.5"])) is None
    assert "(the limit per file is 0.5 s: --file-timeout)" in capsys.readouterr().err
    for bad in ("0", "inf", "nan", "soon"):
        with pytest.raises(SystemExit):
            main([*argv, "--file-timeout", bad])


def test_a_hub_download_gets_the_locked_files_and_sends_the_token_only_to_the_endpoint(hub, tmp_path):
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    hub.bodies.update({"config.json": (tmp_path / "src/config.json").read_bytes()})
    hub.bodies["w.safetensors"] = ("redirect", f"http://localhost:{hub.url.rsplit(':', 1)[1]}/cdn/w.safetensors")
    hub.bodies["sub/w.safetensors"] = ("redirect", "/cdn/sub/w.safetensors")
    hub.bodies["cdn/w.safetensors"] = (tmp_path / "src/w.safetensors").read_bytes()
    hub.bodies["cdn/sub/w.safetensors"] = (tmp_path / "src/sub/w.safetensors").read_bytes()
    cache = tmp_path / "cache"
    assert model_lock.hub_download(lock, str(cache), endpoint=hub.url, token="hf_SECRET") is True
    assert model.file_problems(str(cache), lock["files"], full=True) == []
    tokens = dict(hub.seen)
    assert tokens[f"/lab/dense/resolve/{REVISION}/config.json"] == "Bearer hf_SECRET"
    assert tokens["/cdn/sub/w.safetensors"] == "Bearer hf_SECRET"  # the same origin
    assert tokens["/cdn/w.safetensors"] is None  # another origin (localhost, not 127.0.0.1): no token
    assert model_lock.hub_download(lock, str(cache), endpoint=hub.url) is False


INFO = "api/models/lab/dense/revision/main?blobs=true"  # the Hub's answer about lab/dense at main, in hub.bodies


def _info(size) -> bytes:
    """The Hub's answer about lab/dense at main: config.json kept in git, with the size it states."""
    return json.dumps({"sha": REVISION, "siblings": [{"rfilename": "config.json", "size": size}]}).encode()


@pytest.mark.parametrize(
    ("size", "message"),
    [
        (10, "sent more than its size of 10 bytes"),
        (None, "sent more than the 1048576 bytes allowed for a file of unknown size (--max-small-file-mb)"),
    ],
)
def test_a_hub_lock_stops_a_file_at_the_size_the_hub_states(hub, tmp_path, capsys, size, message):
    hub.bodies[INFO] = _info(size)
    hub.bodies["config.json"] = "endless"
    argv = ["model", "lock", "lab", "--repo", "lab/dense", "--revision", "main", "--endpoint", hub.url]
    argv += ["--max-small-file-mb", "1"]
    assert _bounded(lambda: main([*argv, "--models-dir", str(tmp_path / "models")])) is None
    assert f"lab/dense at main on {hub.url}: config.json: DownloadStopped: {message}" in capsys.readouterr().err
    hub.bodies["config.json"] = b"{}" * 5
    assert main([*argv, "--models-dir", str(tmp_path / "models")]) == 0
    assert model_lock.load("lab", tmp_path / "models")["files"][0]["size"] == 10


@pytest.mark.parametrize(("stated", "limit"), [(10**13, []), (2 << 20, ["--max-small-file-mb", "1"])])
def test_a_file_kept_in_git_that_the_hub_states_large_is_refused_before_its_download(
    hub, tmp_path, capsys, stated, limit
):
    """A file outside LFS was capped only at the size the Hub's metadata states: an endpoint stating 10^13 bytes got
    1.54 GB written in 20 s, with an hour allowed per file (issue 48, R4)."""
    hub.bodies[INFO] = _info(stated)
    hub.bodies["config.json"] = "endless"
    argv = ["model", "lock", "lab", "--repo", "lab/dense", "--revision", "main", "--endpoint", hub.url, *limit]
    assert _bounded(lambda: main([*argv, "--models-dir", str(tmp_path / "models")])) is None
    mib = 64 if not limit else 1
    assert (
        f"config.json: the Hub states {stated} bytes for this file kept in git (not LFS), over the limit of "
        f"{mib << 20} bytes ({mib} MiB) for one; a real checkpoint keeps large files in LFS: check the endpoint, or "
        "raise the limit with --max-small-file-mb"
    ) in capsys.readouterr().err
    assert [path for path, _unused in hub.seen] == [f"/{INFO}"]  # nothing downloaded
    assert not (tmp_path / "models" / "lab.lock.yml").exists()


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", "²", "1048577"])
def test_the_small_file_limit_is_a_whole_number_of_mib(tmp_path, capsys, bad):
    argv = ["model", "lock", "lab", "--repo", "lab/dense", "--revision", "main", "--max-small-file-mb", bad]
    with pytest.raises(SystemExit):
        main(argv)
    assert "a whole number of MiB from 1 to 1048576" in capsys.readouterr().err


def test_a_hub_lock_leaves_out_gits_own_files(hub, tmp_path, capsys):
    """Every Hub repository lists .gitattributes; the lock refuses hidden paths, so `model lock --repo` failed on
    any real repository."""
    info = json.loads(_info(10))
    info["siblings"] += [{"rfilename": ".gitattributes", "size": 3}, {"rfilename": "sub/.keep", "size": 0}]
    hub.bodies[INFO] = json.dumps(info).encode()
    hub.bodies["config.json"] = b"{}" * 5
    argv = ["model", "lock", "lab", "--repo", "lab/dense", "--revision", "main", "--endpoint", hub.url]
    assert main([*argv, "--models-dir", str(tmp_path / "models")]) == 0, capsys.readouterr().err
    assert [f["path"] for f in model_lock.load("lab", tmp_path / "models")["files"]] == ["config.json"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("endless", "DownloadStopped: sent more than the 1 MiB allowed for the Hub's answer about a repository"),
        ("drip", "DownloadStopped: stopped at the deadline of the fetch"),
        (b'{"sha": "main", "siblings": []}', "has no commit (sha) or no list of files (siblings)"),
        (b"[" * 100000, "RecursionError"),
    ],
)
def test_the_hubs_answer_about_a_repository_is_bounded_in_size_and_time(hub, tmp_path, monkeypatch, body, message):
    """huggingface_hub's model_info kept an endless answer in memory (16 GB in 45 s) and waited for a dripping one
    for ever: `model lock` against a hostile endpoint (HF_ENDPOINT, a mirror) ran the controller out of memory
    (issue 41 review)."""
    monkeypatch.setattr(model_lock, "MAX_INFO_BYTES", 1 << 20)
    hub.bodies[INFO] = body
    error = _bounded(
        lambda: model_lock.hub_entries("lab/dense", "main", endpoint=hub.url, token="hf_SECRET", file_timeout=1)
    )
    assert isinstance(error, model_lock.ModelLockError), error
    assert f"lab/dense at main on {hub.url}: " in str(error) and message in str(error), error
    assert "hf_SECRET" not in str(error) and dict(hub.seen)[f"/{INFO}"] == "Bearer hf_SECRET"


@pytest.mark.parametrize("endpoint", ["http://hub.example.invalid", "http://10.0.0.1:8080/hf"])
def test_an_http_endpoint_is_refused_unless_acknowledged(tmp_path, monkeypatch, capsys, endpoint):
    lock = _hub_lock(_checkpoint(tmp_path / "src"), tmp_path)
    with pytest.raises(model_lock.ModelLockError, match="http:// sends the token and the files' metadata"):
        model_lock.hub_download(lock, str(tmp_path / "cache"), endpoint=endpoint, token="hf_SECRET")
    assert not (tmp_path / "cache").exists()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)  # the environment's endpoint too
    with pytest.raises(model_lock.ModelLockError, match="--allow-insecure-endpoint"):
        model_lock.hub_entries("lab/dense", "main")
    argv = ["model", "lock", "lab", "--repo", "lab/dense", "--revision", "main", "--models-dir", str(tmp_path / "m")]
    assert main(argv) == 1 and "sglang_model_hf_allow_insecure_endpoint: true" in capsys.readouterr().err
    assert model_lock.endpoint_url(endpoint, allow_insecure=True) == endpoint
    monkeypatch.delenv("HF_ENDPOINT")
    assert model_lock.endpoint_url("") == model_lock.HUB
    assert model_lock.endpoint_url("http://127.0.0.1:8090/") == "http://127.0.0.1:8090"  # loopback: nothing leaves
    for bad in ("ftp://hub.example", "https://user:hf_pw@hub.example", "huggingface.co"):
        with pytest.raises(model_lock.ModelLockError) as caught:
            model_lock.endpoint_url(bad)
        assert "hf_pw" not in str(caught.value)


def test_the_role_hands_the_hub_bounds_to_the_download():
    tasks = yaml.safe_load((REPO / "roles/sglang_model/tasks/fetch.yml").read_text())[0]["block"]
    hub_args = next(t["sglang.deploy.sglang_model_hub"] for t in tasks if "sglang.deploy.sglang_model_hub" in t)
    assert hub_args["allow_insecure_endpoint"] == "{{ sglang_model_hf_allow_insecure_endpoint }}"
    assert hub_args["file_timeout"] == "{{ sglang_model_hf_file_timeout }}"
    specs = yaml.safe_load((REPO / "roles/sglang_model/meta/argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    defaults = yaml.safe_load((REPO / "roles/sglang_model/defaults/main.yml").read_text())
    for var in ("sglang_model_hf_allow_insecure_endpoint", "sglang_model_hf_file_timeout"):
        assert options[var]["default"] == defaults[var]
