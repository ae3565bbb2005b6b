"""Start SGLang (or the lab's emulator) with its secrets taken from the environment, never from the command line.

systemd would expand `--api-key ${SGLANG_API_KEY}` into the process's argv, which every user can read in
/proc/PID/cmdline. This launcher, started by the unit, appends the secret flags to sys.argv inside the process
and then runs the server in it. The unit's EnvironmentFile (mode 0600) holds the values.

    launch.py -m sglang.launch_server ARGS...      (real hosts)
    launch.py /opt/sglang-deploy/emulator.py ARGS...  (lab hosts)

Stdlib only: it runs with the stack venv's Python, which has no sglang_deploy package.
"""

from __future__ import annotations

import os
import runpy
import sys

# Environment variable -> SGLang flag. The variable is removed from the environment once read.
SECRET_FLAGS = {"SGLANG_API_KEY": "--api-key", "SGLANG_ADMIN_API_KEY": "--admin-api-key"}


def secret_args(environ: dict) -> list[str]:
    args: list[str] = []
    for name, flag in SECRET_FLAGS.items():
        value = environ.pop(name, "")
        if value:
            args += [flag, value]
    return args


def main(argv: list[str]) -> None:
    if argv[:1] == ["-m"] and len(argv) > 1:
        target, rest = argv[1], argv[2:]
        sys.argv = [target, *rest, *secret_args(os.environ)]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif argv:
        target, rest = argv[0], argv[1:]
        sys.argv = [target, *rest, *secret_args(os.environ)]
        runpy.run_path(target, run_name="__main__")
    else:
        sys.exit("usage: launch.py -m MODULE ARGS... | launch.py SCRIPT ARGS...")


if __name__ == "__main__":
    main(sys.argv[1:])
