"""Lookup sglang_emulator_sources: the files the sglang_server role installs on a lab host as the emulated SGLang
server's package, from the sglang_deploy package the collection requires (its emulator/) and the collection's
module_utils/sglang_defaults.py, which the emulator imports from beside its modules there."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_emulator_sources
short_description: The emulated SGLang server's source files, for a lab host
description:
  - Returns the paths on the controller of the emulated SGLang server's modules (the sglang_deploy package's
    C(emulator/*.py)) and of the collection's C(module_utils/sglang_defaults.py), sorted by name.
"""

RETURN = r"""
_raw:
  description: Paths of the files, sorted by name.
  type: list
  elements: str
"""

from pathlib import Path

from ansible.plugins.lookup import LookupBase

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy import emulator
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)

DEFAULTS = Path(__file__).resolve().parents[1] / "module_utils" / "sglang_defaults.py"


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        package.require()
        sources = [*Path(emulator.__file__).parent.glob("*.py"), DEFAULTS]
        return sorted((str(p) for p in sources), key=lambda p: Path(p).name)
