"""The environment of a user outside the checkout, for the tests that run the installed wheel and collection."""

from __future__ import annotations

import os
from pathlib import Path


def outside_env(venv: Path | None = None, **extra: str) -> dict:
    """The environment of a user outside the checkout: no PYTHONPATH, ANSIBLE_* or SGLANG_DEPLOY_* of this run; the
    venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SGLANG_DEPLOY_", "PYTHONPATH"))}
    if venv:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env | extra
