"""Start SGLang (or the lab's emulator, or the smg router) with its secrets taken from the environment, never from the command line.

systemd would expand `--api-key ${SGLANG_API_KEY}` into the process's argv, which every user can read in
/proc/PID/cmdline. This launcher, started by the unit, appends the secret flags to sys.argv inside the process
and then runs the server in it. The unit's EnvironmentFile (mode 0600) holds the values.

SGLang logs its server_args (the API key included, as a Python repr: sglang/srt/server_args.py,
ServerArgs.__post_init__ -> logger.info(f"server_args={self}")) at startup, so the launcher also routes the output
of the server and of every worker it spawns through a small forked filter that replaces the secret values, raw and
in their repr and JSON spellings, with *** before they reach the journal.

    launch.py -m sglang.launch_server ARGS...      (real hosts)
    launch.py -m emulator ARGS...                  (lab hosts: the emulator package beside launch.py)
    launch.py -m smg launch ARGS...                (the smg router)

Stdlib only: it runs with the stack venv's Python, which has no sglang_deploy package.
"""

# A program the roles run on hosts: print and exit are its interface.
# pylint: disable=ansible-bad-function
from __future__ import annotations

import json
import os
import re
import runpy
import signal
import sys

# Environment variable -> flag of SGLang, or of the smg router (roles/sglang_router). The variable is removed from
# the environment once read.
SECRET_FLAGS = {
    "SGLANG_API_KEY": "--api-key",
    "SGLANG_ADMIN_API_KEY": "--admin-api-key",
    "SGLANG_SSL_KEYFILE_PASSWORD": "--ssl-keyfile-password",
    "SMG_API_KEY": "--api-key",
    "SMG_CONTROL_PLANE_API_KEYS": "--control-plane-api-keys",
}
API_KEYS = ("SGLANG_API_KEY", "SGLANG_ADMIN_API_KEY", "SMG_API_KEY")
# Shorter API keys are refused: guessable, and masking one would mask ordinary text in the journal. Other secrets
# (a key file's password) must have MIN_SECRET_LENGTH characters for the same reason.
MIN_KEY_LENGTH = 16
MIN_SECRET_LENGTH = 8
MASK = b"***"
# An unfinished line is held back up to this size; past it, all but a possible start of a secret is written.
HOLD = 65536


class LaunchError(Exception):
    pass


def secret_args(environ: dict) -> list[str]:
    args: list[str] = []
    for name, flag in SECRET_FLAGS.items():
        value = environ.pop(name, "")
        if value and name in API_KEYS and len(value) < MIN_KEY_LENGTH:
            raise LaunchError(
                f"{name} has {len(value)} characters; use at least {MIN_KEY_LENGTH} (set sglang_api_key, or the"
                " variable in sglang_server_secret_env, to a longer key and deploy again)"
            )
        if value and len(value) < MIN_SECRET_LENGTH:
            raise LaunchError(
                f"{name} has {len(value)} characters; use at least {MIN_SECRET_LENGTH} (masking a shorter one would"
                " mask ordinary text in the journal): set a longer one in sglang_server_secret_env and deploy again"
            )
        if value:
            args += [flag, value]
    return args


def _repr_inner(secret: str, quote: str | None) -> str:
    """``secret`` as it appears between the quotes of a Python repr whose quote character is ``quote``."""
    escapes = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    if quote:
        escapes[quote] = "\\" + quote
    return "".join(escapes.get(c) or (c if c.isprintable() else repr(c)[1:-1]) for c in secret)


def masked_values(values: list[str]) -> list[str]:
    """The values to mask: each secret, and the key inside a composite one (smg's control-plane keys are
    `id:name:role:KEY`, and the key alone shows wherever smg logs it)."""
    out = list(values)
    for value in values:
        part = value.rsplit(":", 1)[-1]
        if part != value and len(part) >= MIN_KEY_LENGTH:
            out.append(part)
    return out


def spellings(secret: str) -> list[bytes]:
    """The ways a secret appears in output: as is, inside a Python repr (either quote) and inside JSON."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    forms |= {_repr_inner(secret, quote) for quote in ("'", '"', None)}
    return sorted({f.encode("utf-8", "backslashreplace") for f in forms if f}, key=len, reverse=True)


class Masker:
    """Replaces secrets in a byte stream; a secret split across reads, or across a line longer than HOLD, is
    still found because the output is only cut where no spelling of a secret can straddle the cut."""

    def __init__(self, secrets: list[str]):
        forms = sorted({f for s in secrets for f in spellings(s)}, key=len, reverse=True)
        self.pattern = re.compile(b"|".join(map(re.escape, forms)))
        self.longest = max(map(len, forms))
        self.buffer = b""

    def feed(self, chunk: bytes) -> bytes:
        """Masked output that is safe to write now; an empty ``chunk`` (end of input) flushes everything."""
        self.buffer += chunk
        if not chunk:
            cut = len(self.buffer)
        elif len(self.buffer) > HOLD:
            cut = len(self.buffer) - (self.longest - 1)
        else:
            cut = self.buffer.rfind(b"\n") + 1
        for match in self.pattern.finditer(self.buffer, max(0, cut - self.longest)):
            if match.start() < cut < match.end():
                cut = match.start()
                break
        out, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return self.pattern.sub(MASK, out)


def redact_output(secrets: list[str]) -> None:
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
        masker = Masker(secrets)
        while True:
            chunk = os.read(read_end, 65536)
            out = masker.feed(chunk)
            while out:
                out = out[os.write(1, out) :]
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
    try:
        secrets = secret_args(os.environ)
    except LaunchError as exc:
        sys.exit(f"launch.py: {exc}")
    if secrets:
        sys.stdout.flush()
        sys.stderr.flush()
        redact_output(masked_values(secrets[1::2]))
    sys.argv = [target, *rest, *secrets]
    if as_module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
