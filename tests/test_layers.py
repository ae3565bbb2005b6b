"""Imports run one way: command line (sglang_deploy.cli) -> API (sglang_deploy.api) -> domain. Only the command
line writes to the terminal; the programs that run on their own (host-side scripts, the emulated server) print
their own output."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sglang_deploy"
# Programs whose stdout/stderr is their interface: run by the roles on hosts, or the emulated server package.
PROGRAMS = {"check_argv.py", "launch.py", "emulator"}


def part_of(path: Path) -> str:
    """The top-level module or package (cli, emulator, bench, api.py, ...) a file belongs to."""
    return path.relative_to(PACKAGE).parts[0]


def imported(tree: ast.AST) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y
                base = "sglang_deploy" + ("." + base if base else "")
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def terminal_writes(tree: ast.AST) -> list:
    """Lines that call print() or write to sys.stdout/sys.stderr."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                lines.append(node.lineno)
    return lines


def modules(folder: Path, recursive: bool = False):
    for path in sorted(folder.rglob("*.py") if recursive else folder.glob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def layer_of(name: str) -> str | None:
    for layer in ("sglang_deploy.cli", "sglang_deploy.api"):
        if name == layer or name.startswith(layer + "."):
            return layer
    return None


def test_the_domain_imports_neither_the_api_nor_the_command_line():
    bad = [
        f"{p.relative_to(PACKAGE)} imports {n}"
        for p, tree in modules(PACKAGE, recursive=True)
        if part_of(p) not in ("api.py", "cli")
        for n in imported(tree)
        if layer_of(n)
    ]
    assert bad == []


def test_the_api_does_not_import_the_command_line():
    tree = ast.parse((PACKAGE / "api.py").read_text(encoding="utf-8"))
    assert [n for n in imported(tree) if layer_of(n) == "sglang_deploy.cli"] == []


def test_only_the_command_line_and_the_programs_print():
    bad = {
        str(p.relative_to(PACKAGE)): lines
        for p, tree in modules(PACKAGE, recursive=True)
        if part_of(p) not in PROGRAMS | {"cli"}
        for lines in [terminal_writes(tree)]
        if lines
    }
    assert bad == {}


def test_the_scan_sees_what_it_forbids():
    tree = ast.parse(
        "from sglang_deploy.cli import runs\nfrom .api import deploy\nimport sys\nprint(1)\nsys.stderr.write('x')\n"
    )
    assert {layer_of(n) for n in imported(tree)} >= {"sglang_deploy.cli", "sglang_deploy.api"}
    assert terminal_writes(tree) == [4, 5]


def top_level_calls(tree: ast.Module) -> list:
    """Lines of statements that call something when the module is imported (outside `if __name__ == ...`)."""
    return [node.lineno for node in tree.body if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]


def test_importing_a_module_runs_nothing():
    bad = {
        str(p.relative_to(PACKAGE)): lines
        for p, tree in modules(PACKAGE, recursive=True)
        if p.name != "__main__.py"
        for lines in [top_level_calls(tree)]
        if lines
    }
    assert bad == {}
    assert top_level_calls(ast.parse("def main():\n    pass\n\n\nmain()\n")) == [5]
