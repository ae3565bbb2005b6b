"""Where the collection's controller plugins (plugins/action, plugins/filter) find the sglang_deploy package, the one
place the logic lives: the copy built into the collection (plugins/plugin_utils/_vendor, written by
tools/collection.py), else the repository checkout this file is part of (src/), else one installed in Python.
Importing this module puts that source first on sys.path; a missing package is an error that names the fix."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.errors import AnsibleError

_HERE = Path(__file__).resolve().parent
# The built collection's copy; the repository's source folder (plugins/plugin_utils -> the repository root).
SOURCES = (_HERE / "_vendor", _HERE.parents[1] / "src")

for _source in SOURCES:
    if (_source / "sglang_deploy" / "__init__.py").is_file():
        if str(_source) not in sys.path:
            sys.path.insert(0, str(_source))
        break

try:
    import sglang_deploy  # noqa: F401  (the check; the plugins import its modules themselves)
except ImportError as exc:
    raise AnsibleError(
        f"the sglang.deploy collection's plugins need the sglang_deploy Python package ({exc}): it is built into the "
        "collection's plugins/plugin_utils/_vendor; reinstall the collection from a tarball built by "
        "tools/collection.py build, or run from the sglang-deploy repository"
    ) from exc
