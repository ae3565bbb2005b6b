"""Start SGLang (or the lab's emulator) with its secrets taken from the environment, never from the command line.

systemd would expand `--api-key ${SGLANG_API_KEY}` into the process's argv, which every user can read in
/proc/PID/cmdline. This launcher, started by the unit, appends the secret flags to sys.argv inside the process
and then runs the server in it. The unit's EnvironmentFile (mode 0600) holds the values.

SGLang logs its server_args (the API key included) at startup, so the launcher also routes the output of the
server and of every worker it spawns through a small forked filter that replaces the secret values with ***
before they reach the journal.

    launch.py -m sglang.launch_server ARGS...      (real hosts)
    launch.py -m emulator ARGS...                  (lab hosts: the emulator package beside launch.py)

Stdlib only: it runs with the stack venv's Python, which has no sglang_deploy package.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

# Environment variable -> SGLang flag. The variable is removed from the environment once read.
SECRET_FLAGS = {"SGLANG_API_KEY": "--api-key", "SGLANG_ADMIN_API_KEY": "--admin-api-key"}
MASK = b"***"


def secret_args(environ: dict) -> list[str]:
    args: list[str] = []
    for name, flag in SECRET_FLAGS.items():
        value = environ.pop(name, "")
        if value:
            args += [flag, value]
    return args


def redact_output(secrets: list[bytes]) -> None:
    """Send fds 1 and 2 (inherited by worker processes) through a forked filter that masks the secrets.

    The filter is a grandchild, not a child: SGLang ends its launch with kill_process_tree(os.getpid(),
    include_parent=False) (sglang/launch_server.py, __main__), which would kill a child filter before the
    traceback of a startup failure is written. It ignores SIGTERM (a unit's stop) and exits at end of input,
    once the server and every worker are gone."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child:
        os.waitpid(child, 0)
    elif os.fork():
        os._exit(0)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(write_end)
        buffer = b""
        while True:
            chunk = os.read(read_end, 65536)
            buffer += chunk
            # Hold back an unfinished line (up to 64 KiB) so a secret split across reads is still masked.
            cut = len(buffer) if not chunk or len(buffer) > 65536 else buffer.rfind(b"\n") + 1
            out, buffer = buffer[:cut], buffer[cut:]
            for secret in secrets:
                out = out.replace(secret, MASK)
            if out:
                os.write(1, out)
            if not chunk:
                os._exit(0)
    os.close(read_end)
    os.dup2(write_end, 1)
    os.dup2(write_end, 2)
    os.close(write_end)


def main(argv: list[str]) -> None:
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        sys.exit("usage: launch.py -m MODULE ARGS... | launch.py SCRIPT ARGS...")
    as_module = argv[0] == "-m"
    target, rest = (argv[1], argv[2:]) if as_module else (argv[0], argv[1:])
    secrets = secret_args(os.environ)
    if secrets:
        sys.stdout.flush()
        sys.stderr.flush()
        redact_output([value.encode() for value in secrets[1::2]])
    sys.argv = [target, *rest, *secrets]
    if as_module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
