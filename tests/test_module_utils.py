"""What the modules ship to hosts: plugins/module_utils is the host package's one home (no link, no copy); a relative
import names a shipped file, no controller code ships, and anything else imported is the standard library."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

from test_layers import HOST_THIRD_PARTY

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "plugins" / "module_utils"


def shipped_files() -> list:
    return sorted(
        Path(d, f)
        for d, _, files in os.walk(SHIPPED, followlinks=True)
        if "__pycache__" not in d
        for f in files
        if f.endswith(".py")
    )


def test_module_utils_is_the_host_package_itself():
    assert not SHIPPED.is_symlink() and not (REPO / "src" / "sglang_deploy" / "host").exists()


def unshipped(rel: Path, node: ast.ImportFrom) -> bool:
    """Whether a relative import of the shipped file ``rel`` names a module that is not shipped."""
    base = (SHIPPED / rel).parent
    for _ in range(node.level - 1):
        base = base.parent
    target = base.joinpath(*(node.module or "").split(".")) if node.module else base
    found = target.with_suffix(".py").exists() or (target / "__init__.py").exists()
    if not found:  # `from . import x`: x is a module
        found = all((target / f"{a.name}.py").exists() for a in node.names)
    return not found


def test_shipped_files_import_only_the_stdlib_and_shipped_siblings():
    problems = []
    for path in shipped_files():
        rel = path.relative_to(SHIPPED)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                if unshipped(rel, node):
                    problems.append(f"{rel}: relative import {node.module!r} is not shipped")
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "__future__" and top not in sys.stdlib_module_names | HOST_THIRD_PARTY.get(path.name, set()):
                    problems.append(f"{rel}: imports {name}, which the host does not have")
    assert problems == []
    assert {p.relative_to(SHIPPED).as_posix() for p in shipped_files()} >= {"bench/sweep.py", "readiness.py"}
