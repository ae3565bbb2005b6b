"""Where the collection's controller plugins (plugins/action, plugins/filter, plugins/lookup) find the sglang_deploy
package, the one place the logic lives: the copy built into the collection (vendor/, written by
tools/collection.py), else the repository checkout this file is part of (src/), else one installed in Python.
Importing this module puts that source first on sys.path. A plugin imports the package's modules in a try block and
hands an ImportError to missing(); require(), first thing when the plugin runs, then fails naming the fix (a plugin
still loads without them: ansible-doc and ansible-test's import check need no more than ansible-core)."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.errors import AnsibleError

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parents[1]  # the collection's root (this repository's, in a checkout)
# The built collection's copy; the repository's source folder.
SOURCES = (ROOT / "vendor", ROOT / "src")
IMPORT_ERRORS: list = []

for _source in SOURCES:
    if (_source / "sglang_deploy" / "__init__.py").is_file():
        if str(_source) not in sys.path:
            sys.path.insert(0, str(_source))
        break


def missing(exc: ImportError) -> None:
    """Record a failed import of the package or of one of its Python needs."""
    IMPORT_ERRORS.append(exc)


def require() -> None:
    """Fail, naming the fix, when an import was missing."""
    if IMPORT_ERRORS:
        exc = IMPORT_ERRORS[0]
        raise AnsibleError(
            f"the sglang.deploy collection's plugins cannot import {exc.name or exc}: install the collection's Python "
            f"requirements on the controller (pip install -r {ROOT / 'requirements.txt'}); the sglang_deploy package "
            "itself is built into the collection (vendor/): reinstall it from a tarball that "
            "tools/collection.py built"
        )
