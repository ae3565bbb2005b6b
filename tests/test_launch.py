"""The launcher passes secrets from the environment to the server without putting them on the command line."""

import subprocess
import sys
from pathlib import Path

LAUNCH = Path(__file__).resolve().parents[1] / "src" / "sglang_deploy" / "launch.py"

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
    env = {"SGLANG_API_KEY": "sk-secret-123", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, str(LAUNCH), str(script), "--port", "30000"], env=env, check=True)
    out = (tmp_path / "server.py.out").read_text()
    assert "ARGV ['--port', '30000', '--api-key', 'sk-secret-123']" in out
    cmdline = next(line for line in out.splitlines() if line.startswith("CMDLINE"))
    assert "--port 30000" in cmdline and "sk-secret-123" not in cmdline
    assert "ENV None" in out  # removed from the environment the server (and its workers) inherit


def test_without_a_key_argv_is_unchanged(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    subprocess.run([sys.executable, str(LAUNCH), str(script), "--tp", "8"], env={"PATH": "/usr/bin:/bin"}, check=True)
    out = (tmp_path / "server.py.out").read_text()
    assert "ARGV ['--tp', '8']" in out


def test_module_form_runs_a_module(tmp_path):
    (tmp_path / "fake_server.py").write_text(SERVER)
    env = {"SGLANG_API_KEY": "sk-module-key", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, str(LAUNCH), "-m", "fake_server", "--x"], env=env, check=True)
    out = (tmp_path / "fake_server.py.out").read_text()
    assert "ARGV ['--x', '--api-key', 'sk-module-key']" in out


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
    out = subprocess.run([sys.executable, str(LAUNCH), str(script)], env={"SGLANG_API_KEY": "sk-secret-123", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True, timeout=30)
    assert "sk-secret-123" not in out.stdout + out.stderr
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
    env = {"SGLANG_API_KEY": "sk-secret-123", "LEAK": "sk-secret-123", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(LAUNCH), str(script)], env=env, capture_output=True, text=True,
                         check=False, timeout=30)
    assert out.returncode == 1
    assert "ValueError: served_model_name cannot contain a colon, key ***" in out.stdout
    assert "sk-secret-123" not in out.stdout + out.stderr
