"""The launcher passes secrets from the environment to the server without putting them on the command line."""

import subprocess
import sys
from pathlib import Path

LAUNCH = Path(__file__).resolve().parents[1] / "src" / "sglang_deploy" / "launch.py"

SERVER = """
import os, sys
cmdline = open('/proc/self/cmdline', 'rb').read().replace(b'\\0', b' ').decode()
print('ARGV', sys.argv[1:])
print('CMDLINE', cmdline)
print('ENV', os.environ.get('SGLANG_API_KEY'))
"""


def test_api_key_reaches_the_server_but_not_its_command_line(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {"SGLANG_API_KEY": "sk-secret-123", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(LAUNCH), str(script), "--port", "30000"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "ARGV ['--port', '30000', '--api-key', 'sk-secret-123']" in out
    cmdline = next(line for line in out.splitlines() if line.startswith("CMDLINE"))
    assert "--port 30000" in cmdline and "sk-secret-123" not in cmdline
    assert "ENV None" in out  # removed from the environment the server (and its workers) inherit


def test_without_a_key_argv_is_unchanged(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    out = subprocess.run([sys.executable, str(LAUNCH), str(script), "--tp", "8"], env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    assert "ARGV ['--tp', '8']" in out


def test_module_form_runs_a_module(tmp_path):
    (tmp_path / "fake_server.py").write_text(SERVER)
    env = {"SGLANG_API_KEY": "k", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, str(LAUNCH), "-m", "fake_server", "--x"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "ARGV ['--x', '--api-key', 'k']" in out
