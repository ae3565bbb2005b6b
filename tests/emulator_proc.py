"""Test helpers: the emulated SGLang server as a subprocess on 127.0.0.1 (benchmarks/local_emulator.py's, which the
benchmark scripts share), and running a library module in-process with patch_module_args."""

from __future__ import annotations

import json
from pathlib import Path

from ansible.module_utils import _internal
from ansible.module_utils.testing import patch_module_args
from local_emulator import Emulator, free_port, stop_process  # noqa: F401  the tests import them from here

REPO = Path(__file__).resolve().parents[1]


def run_module(module, args: dict, capsys) -> tuple:
    """Run module.main() with args; (failed, result dict)."""
    capsys.readouterr()
    # As on a host: once controller code was imported in this process (any ansible.errors import), the
    # module_utils would hand warnings to the controller's display instead of returning them.
    controller, _internal.is_controller = _internal.is_controller, False
    with patch_module_args(args):
        try:
            module.main()
        except SystemExit:
            pass
        finally:
            _internal.is_controller = controller
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{") :])
    return bool(result.get("failed")), result
