"""The launcher passes secrets from the environment to the server without putting them on the command line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.sglang.deploy.plugins.module_utils.launch import Masker

LAUNCH = Path(__file__).resolve().parents[1] / "plugins" / "module_utils" / "launch.py"

# Writes what it got to <script>.out (its stdout goes through the launcher's redaction when a key is set).
SERVER = """
import os, sys
cmdline = open('/proc/self/cmdline', 'rb').read().replace(b'\\0', b' ').decode()
with open(__file__ + '.out', 'w') as out:
    print('ARGV', sys.argv[1:], file=out)
    print('CMDLINE', cmdline, file=out)
    print('ENV', os.environ.get('SGLANG_API_KEY'), file=out)
"""


def test_api_key_reaches_the_server_but_not_its_command_line(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {"SGLANG_API_KEY": "sk-secret-1234567", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, str(LAUNCH), str(script), "--port", "30000"], env=env, check=True)
    out = (tmp_path / "server.py.out").read_text()
    assert "ARGV ['--port', '30000', '--api-key', 'sk-secret-1234567']" in out
    cmdline = next(line for line in out.splitlines() if line.startswith("CMDLINE"))
    assert "--port 30000" in cmdline and "sk-secret-1234567" not in cmdline
    assert "ENV None" in out  # removed from the environment the server (and its workers) inherit


def test_without_a_key_argv_is_unchanged(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    subprocess.run([sys.executable, str(LAUNCH), str(script), "--tp", "8"], env={"PATH": "/usr/bin:/bin"}, check=True)
    out = (tmp_path / "server.py.out").read_text()
    assert "ARGV ['--tp', '8']" in out


def test_module_form_runs_a_module(tmp_path):
    (tmp_path / "fake_server.py").write_text(SERVER)
    env = {"SGLANG_API_KEY": "sk-module-key-0123", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, str(LAUNCH), "-m", "fake_server", "--x"], env=env, check=True)
    out = (tmp_path / "fake_server.py.out").read_text()
    assert "ARGV ['--x', '--api-key', 'sk-module-key-0123']" in out


LEAKY_SERVER = """
import subprocess, sys
key = sys.argv[sys.argv.index('--api-key') + 1]
print('server_args=ServerArgs(api_key=' + repr(key) + ')', flush=True)
print('stderr ' + key, file=sys.stderr, flush=True)
subprocess.run([sys.executable, '-c', 'import sys; print("worker " + sys.argv[1])', key], check=True)
"""


def test_the_key_is_masked_in_everything_the_server_and_its_workers_print(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(LEAKY_SERVER)
    out = subprocess.run(
        [sys.executable, str(LAUNCH), str(script)],
        env={"SGLANG_API_KEY": "sk-secret-1234567", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert "sk-secret-1234567" not in out.stdout + out.stderr
    assert "server_args=ServerArgs(api_key='***')" in out.stdout
    assert "stderr ***" in out.stdout and "worker ***" in out.stdout


# Like SGLang's launch_server: a startup error, then kill_process_tree(os.getpid(), include_parent=False)
# (every descendant killed) before the traceback is printed.
FAILING_SERVER = """
import os, signal, time
worker = os.fork()
if worker == 0:
    time.sleep(60)
    os._exit(0)
try:
    raise ValueError('served_model_name cannot contain a colon, key ' + os.environ.get('LEAK', ''))
finally:
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            if open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1] == str(os.getpid()):
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
"""


def test_a_startup_traceback_survives_the_server_killing_its_process_tree(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(FAILING_SERVER)
    env = {"SGLANG_API_KEY": "sk-secret-1234567", "LEAK": "sk-secret-1234567", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, str(LAUNCH), str(script)], env=env, capture_output=True, text=True, check=False, timeout=30
    )
    assert out.returncode == 1
    assert "ValueError: served_model_name cannot contain a colon, key ***" in out.stdout
    assert "sk-secret-1234567" not in out.stdout + out.stderr


# Prints the key the way SGLang logs server_args (a repr inside a dataclass repr), in JSON, and inside a line of
# 200 KiB (longer than the pipe's reads and the filter's hold-back), then exits.
SPELLING_SERVER = """
import json, sys
key = sys.argv[sys.argv.index('--api-key') + 1]
print('server_args=ServerArgs(api_key=' + repr(key) + ', host=' + repr('h') + ')', flush=True)
print('argv=' + repr(sys.argv), flush=True)
print('json=' + json.dumps({'api_key': key}), flush=True)
sys.stdout.write('x' * (200 * 1024 - 7) + key + 'y' * 70000 + '\\n')
"""


@pytest.mark.parametrize("key", ["sk-back\\\\slash-0123456", "sk-'quote\"-both-0123456", "sk-tab\\tkey-0123456789"])
def test_the_key_is_masked_in_its_repr_and_json_spellings_and_in_long_lines(tmp_path, key):
    key = key.encode().decode("unicode_escape")
    script = tmp_path / "server.py"
    script.write_text(SPELLING_SERVER)
    out = subprocess.run(
        [sys.executable, str(LAUNCH), str(script)],
        env={"SGLANG_API_KEY": key, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    for form in {key, repr(key)[1:-1], json.dumps(key)[1:-1]}:
        assert form.encode() not in out, form
    assert b"server_args=ServerArgs(api_key='***', host='h')" in out
    assert b"x" * 100 + b"***" + b"y" * 100 in out


def test_the_masker_finds_a_key_cut_anywhere():
    key = "sk-" + "k" * 30
    data = (b"a" * 150_000 + key.encode() + b"b\n") * 3
    for step in (997, 4096, 65536, 131_072):
        masker = Masker([key])
        out = b"".join(masker.feed(data[i : i + step]) for i in range(0, len(data), step)) + masker.feed(b"")
        assert out == data.replace(key.encode(), b"***"), step


def launch(script: Path, body: str, env: dict) -> subprocess.CompletedProcess:
    """Run the launcher on a script holding body, with env (and a PATH) as the whole environment."""
    script.write_text(body)
    return subprocess.run(
        [sys.executable, str(LAUNCH), str(script)],
        env={**env, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    "name, value, expect",
    [
        ("SGLANG_API_KEY", "a", "SGLANG_API_KEY has 1 characters; use at least 16"),
        ("SGLANG_SSL_KEYFILE_PASSWORD", "e", "SGLANG_SSL_KEYFILE_PASSWORD has 1 characters; use at least 8"),
    ],
)
def test_a_short_secret_is_refused_with_the_fix(tmp_path, name, value, expect):
    out = launch(tmp_path / "server.py", SERVER, {name: value})
    assert out.returncode == 1 and expect in out.stderr
    assert not (tmp_path / "server.py.out").exists()


def test_the_key_inside_a_composite_secret_is_masked_on_its_own(tmp_path):
    key = "admin-key-0123456789abcdef"
    out = launch(
        tmp_path / "server.py",
        f"print('control plane key:', {key!r}, flush=True)\n",
        {"SMG_CONTROL_PLANE_API_KEYS": f"sglang-deploy:sglang-deploy:admin:{key}"},
    )
    assert out.returncode == 0 and "control plane key: ***" in out.stdout and key not in out.stdout
