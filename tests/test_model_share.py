"""The fan-out share of the sglang_model role (issue 41 N4, N18; issue 48 R13): the share answers only the round's
token, runs as its own unprivileged account, serves a bounded number of connections and stops with the round; a
receiver sends the token, stops at the locked size and checks the sha256, so another listener on the share port
cannot plant a file."""

from __future__ import annotations

import grp
import hashlib
import http.server
import io
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from emulator_proc import run_module  # first: puts the repo's module_utils on the import path

from ansible_collections.sglang.deploy.plugins.module_utils import model_share

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "modules"))
import sglang_model_peer  # noqa: E402

TOKEN = "T" * 43
CONFIG = b'{"architectures": ["LlamaForCausalLM"]}'
ROLE = REPO / "roles" / "sglang_model"


def serving(handler_or_server) -> str:
    """Serve on 127.0.0.1 in a thread (until the test ends); the URL."""
    srv = handler_or_server
    if not isinstance(srv, http.server.HTTPServer):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_or_server)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.fixture
def share(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    (folder / ".sglang-model.json").write_text("{}")
    (folder / "link.json").symlink_to(folder / "config.json")
    srv = model_share.server("127.0.0.1", 0, str(folder), TOKEN.encode())
    yield serving(srv)
    srv.shutdown()
    srv.server_close()


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_the_share_answers_only_the_rounds_token_with_plain_files(share):
    assert get(share + "/config.json", TOKEN) == (200, CONFIG)
    assert get(share + "/config.json")[0] == 403
    assert get(share + "/config.json", "U" * 43)[0] == 403
    for path in ("/.sglang-model.json", "/link.json", "/../etc/passwd", "//etc/passwd", "/%2e%2e/x", "/", "/nope"):
        assert get(share + path, TOKEN)[0] == 404, path


def test_idle_clients_hold_a_bounded_number_of_threads_and_are_dropped(share, monkeypatch):
    """Issue 48, R13: 300 idle clients held 303 threads. MAX_CLIENTS are served at once, one more is closed as it
    comes, and a connection idle for Share.timeout is dropped; then the round's receiver is served again."""
    host, port = share.removeprefix("http://").split(":")
    before = threading.active_count()
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(model_share.MAX_CLIENTS)]
    try:
        time.sleep(0.3)  # each accepted, each holding its thread
        for _ in range(3 * model_share.MAX_CLIENTS):
            with socket.create_connection((host, int(port)), timeout=10) as extra:
                assert extra.recv(1) == b""  # closed at once, not held
        assert threading.active_count() <= before + model_share.MAX_CLIENTS
    finally:
        for sock in idle:
            sock.close()
    slots_back(before)
    assert get(share + "/config.json", TOKEN) == (200, CONFIG)
    monkeypatch.setattr(model_share.Share, "timeout", 0.5)
    # 30 s guards a hang, not speed: under the share's own 60 s, a connection the 0.5 s timeout does not drop
    # raises TimeoutError here, however slow the machine.
    with socket.create_connection((host, int(port)), timeout=30) as quiet:
        assert quiet.recv(1) == b""  # dropped after the idle timeout


def slots_back(before: int) -> None:
    """Wait until the closed clients' threads have ended and given their slots back (60 s guards a hang: a loaded
    machine may take its time to run them)."""
    deadline = time.monotonic() + 60
    while threading.active_count() > before:
        assert time.monotonic() < deadline, "the closed clients' threads never ended"
        time.sleep(0.05)


def test_the_share_refuses_to_start_without_a_token(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"short\n")))
    assert model_share.main(["--bind", "127.0.0.1", "--port", "0", "--directory", str(tmp_path)]) == 2
    assert "32 or more" in capsys.readouterr().err


def receive(capsys, tmp_path, url: str, content: bytes = CONFIG, token: str = TOKEN) -> tuple[bool, dict]:
    (tmp_path / "partial").mkdir(exist_ok=True)
    args = {
        "url": url,
        "token": token,
        "path": "config.json",
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "folder": str(tmp_path / "partial"),
        "group": grp.getgrgid(os.getegid()).gr_name,
        "timeout": 20,
    }
    return run_module(sglang_model_peer, args, capsys)


def test_a_receiver_sends_the_token_and_checks_the_file_against_the_lock(share, tmp_path, capsys):
    failed, result = receive(capsys, tmp_path, share)
    got = tmp_path / "partial" / "config.json"
    assert not failed and result["bytes"] == len(CONFIG) and got.read_bytes() == CONFIG
    assert got.stat().st_mode & 0o777 == 0o440 and TOKEN not in json.dumps(result)
    got.unlink()
    failed, result = receive(capsys, tmp_path, share, token="U" * 43)
    assert failed and "403" in result["msg"] and not got.exists() and "U" * 43 not in json.dumps(result)


class Endless(http.server.BaseHTTPRequestHandler):
    """Another listener on the share port: any request, an endless body."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"x" * 65536)
        except OSError:
            pass

    def log_message(self, *args):
        pass


class Planted(Endless):
    """Another listener: a file of the locked size, another content."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(CONFIG)))
        self.end_headers()
        self.wfile.write(b"{" + b" " * (len(CONFIG) - 2) + b"}")


def test_a_receiver_stops_at_the_locked_size_and_deletes_a_file_of_another_sha256(tmp_path, capsys):
    failed, result = receive(capsys, tmp_path, serving(Endless))
    assert failed and f"sent more than its locked size ({len(CONFIG)} bytes)" in result["msg"]
    assert os.listdir(tmp_path / "partial") == []
    failed, result = receive(capsys, tmp_path, serving(Planted))
    assert failed and "the lock says" in result["msg"] and "deleted" in result["msg"]
    assert os.listdir(tmp_path / "partial") == []


def _tasks(path: Path) -> list[dict]:
    """The tasks of a task file, those in blocks included (with their block's section)."""
    found = []
    for task in yaml.safe_load(path.read_text()):
        for section in ("block", "rescue", "always"):
            found += [{**sub, "_section": section} for sub in task.get(section, [])]
        found.append(task)
    return found


def test_the_round_shares_as_its_own_account_with_a_token_out_of_argv_and_always_stops():
    """The share was `python3 -m http.server` as root, no token, left up to 24 h by a play stopped mid-round."""
    text = (ROLE / "tasks" / "fanout_round.yml").read_text()
    tasks = {t["name"]: t for t in _tasks(ROLE / "tasks" / "fanout_round.yml")}
    assert "http.server" not in text
    argv = tasks["Share the checkpoint for this round"]["ansible.builtin.command"]["argv"]
    assert "--uid={{ sglang_model_share_user }}" in argv and "--gid={{ sglang_model_group }}" in argv
    account = {t["name"]: t for t in _tasks(ROLE / "tasks" / "fanout.yml")}["Create the account the share runs as"]
    # the one account task of the project (roles/sglang_service: a system account, no login, no home created)
    assert account["ansible.builtin.import_role"] == {"name": "sglang_service", "tasks_from": "account"}
    assert account["vars"] == {
        "sglang_service_user": "{{ sglang_model_share_user }}",
        "sglang_service_group": "{{ sglang_model_group }}",
    }
    assert "--property=RuntimeMaxSec={{ sglang_model_fanout_timeout }}" in argv
    assert any(a.startswith("--property=StandardInput=file:") for a in argv)
    assert not [a for a in argv if "token" in a and "StandardInput" not in a]
    assert (
        tasks["Draw the share token of this round"]["no_log"]
        and tasks["Write the share token where only root reads it"]["no_log"]
    )
    assert tasks["Stop the share of this round"]["_section"] == "always"
    assert tasks["Remove the share's token and server"]["_section"] == "always"
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert 0 < defaults["sglang_model_fanout_timeout"] <= 4 * 3600
    assert defaults["sglang_model_share_user"] == "sglang-share"  # its own account, not the shared nobody
    peer = {t["name"]: t for t in _tasks(ROLE / "tasks" / "fetch.yml")}[
        "Download the checkpoint's files from a peer host into the partial folder"
    ]
    assert (
        peer["sglang.deploy.sglang_model_peer"]["token"]
        == "{{ hostvars[__sglang_model_peer].__sglang_model_share_token }}"
    )
    # The share server is the host package's model_share.py, copied from its one home by role_path.
    copied = {t["name"]: t for t in _tasks(ROLE / "tasks" / "fanout_round.yml")}["Copy the share server"]
    assert copied["ansible.builtin.copy"]["src"] == "{{ role_path }}/../../plugins/module_utils/model_share.py"
    assert (ROLE / "../../plugins/module_utils/model_share.py").resolve().is_file()
