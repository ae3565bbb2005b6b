"""Imports run one way: command line (sglang_deploy.cli) -> API (sglang_deploy.api) -> tune -> controller domain ->
host package (plugins/module_utils, imported as the collection's module_utils: what runs on hosts). Within the domain, rules/, locks/, fleet/ and compare/ build
on launch/, and all on paths and secret_names (DOMAIN). The host package imports only itself and the standard
library; nothing imports the emulator (a test double). Only the command line writes to the terminal; the programs
that run on their own (host-side scripts, the emulated server) print their own output."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "sglang_deploy"
# The host package: the collection's module_utils, its one home.
HOST = REPO / "plugins" / "module_utils"
HOST_NAME = "ansible_collections.sglang.deploy.plugins.module_utils"
# Programs whose stdout/stderr is their interface: run by the roles on hosts, or the emulated server package.
PROGRAMS = {
    "host/check_argv.py",
    "host/launch.py",
    "host/model_share.py",
    "host/watchdog.py",
    "host/gpu_exporter.py",
    "emulator",
}
# check_argv runs with the stack venv's Python and imports SGLang's (or smg's) own argument parser; the GPU exporter
# reads NVML through nvidia-ml-py where that Python has it (else nvidia-smi).
HOST_THIRD_PARTY = {"check_argv.py": {"sglang", "smg"}, "gpu_exporter.py": {"pynvml"}}
# The controller's domain: each part (a subpackage or a root module) and the other parts it may import. None of them
# imports api, cli, tune or the emulator.
BASE = {"host", "paths", "secret_names"}
DOMAIN = {
    "paths": set(),
    "secret_names": set(),
    "launch": BASE,
    "rules": BASE | {"launch"},
    "locks": BASE | {"launch"},
    "fleet": BASE | {"launch"},
    "compare": BASE,
    "fingerprints": BASE,
    "monitor": BASE | {"launch"},
    "traffic": BASE,
}
# The other parts: the layers above the domain, what runs on hosts, the test double, the package data.
OTHER_PARTS = {"__init__", "api", "cli", "tune", "emulator", "data"}


def part_of(path: Path) -> str:
    """The top-level module or package (cli, emulator, host, api, ...) a file belongs to; host/launch.py and
    host/check_argv.py are named as such."""
    rel = (
        f"host/{path.relative_to(HOST).as_posix()}"
        if path.is_relative_to(HOST)
        else path.relative_to(PACKAGE).as_posix()
    )
    return rel if rel in PROGRAMS else rel.split("/")[0]


def imported(tree: ast.AST, path_parts: tuple = (), root: str = "sglang_deploy") -> set:
    """Absolute names a module imports; ``path_parts``: the file's folders under the package ``root`` (("bench",))."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .x import y, resolved against the file's package
                package = ".".join([root, *path_parts][: len(path_parts) + 2 - node.level])
                base = package + ("." + base if base else "")
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


def imports_of(path: Path, tree: ast.AST) -> set:
    if path.is_relative_to(HOST):
        return imported(tree, path.relative_to(HOST).parent.parts, HOST_NAME)
    return imported(tree, path.relative_to(PACKAGE).parent.parts)


def layer_of(name: str) -> str | None:
    for layer in ("sglang_deploy.cli", "sglang_deploy.api"):
        if name == layer or name.startswith(layer + "."):
            return layer
    return None


def test_the_domain_imports_neither_the_api_nor_the_command_line():
    bad = [
        f"{p.relative_to(PACKAGE)} imports {n}"
        for p, tree in modules(PACKAGE, recursive=True)
        if part_of(p) not in ("api", "cli")
        for n in imports_of(p, tree)
        if layer_of(n)
    ]
    assert bad == []


def part_named(name: str) -> str | None:
    """The part of the package an imported name is in: sglang_deploy.launch.flags -> launch (None: the package)."""
    if inside(name, HOST_NAME):
        return "host"
    parts = name.split(".")
    return parts[1] if parts[0] == "sglang_deploy" and len(parts) > 1 else None


def domain_problems(part: str, names: set) -> list:
    return sorted(f"{part} imports {n}" for n in names if part_named(n) not in (None, part, *DOMAIN[part]))


def test_each_domain_part_imports_only_the_parts_it_builds_on():
    problems = []
    for p, tree in modules(PACKAGE, recursive=True):
        part = p.relative_to(PACKAGE).parts[0].removesuffix(".py")
        if part in DOMAIN:
            problems += [f"{p.relative_to(PACKAGE)}: {x}" for x in domain_problems(part, imports_of(p, tree))]
    assert problems == []


def test_every_part_of_the_package_has_its_place_in_the_layers():
    parts = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert parts - DOMAIN.keys() - OTHER_PARTS == set()


def test_the_domain_scan_sees_what_it_forbids():
    tree = ast.parse("from ..fleet import fleet\nfrom sglang_deploy.tune import store\nfrom .. import launch, paths\n")
    flagged = domain_problems("rules", imported(tree, ("rules",)))
    assert {part_named(x.split()[-1]) for x in flagged} == {"fleet", "tune"}


def test_the_api_does_not_import_the_command_line():
    names = {n for p, tree in modules(PACKAGE / "api") for n in imports_of(p, tree)}
    assert "sglang_deploy.api.runner" in names and {n for n in names if layer_of(n) == "sglang_deploy.cli"} == set()


def test_only_the_command_line_and_the_programs_print():
    bad = {
        part_of(p): lines
        for p, tree in [*modules(PACKAGE, recursive=True), *modules(HOST, recursive=True)]
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


def sglang_deploy_imports(path: Path, tree: ast.AST) -> set:
    return {n for n in imports_of(path, tree) if inside(n, "sglang_deploy") or inside(n, HOST_NAME)}


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_host_package_imports_only_itself_and_the_standard_library():
    bad = []
    for p, tree in modules(HOST, recursive=True):
        allowed = HOST_THIRD_PARTY.get(p.name, set())
        for n in imports_of(p, tree):
            top = n.split(".")[0]
            if top in ("sglang_deploy", "ansible_collections"):
                # `from ansible_collections...module_utils import x` also yields the packages above module_utils
                if not inside(n, HOST_NAME) and not HOST_NAME.startswith(n + "."):
                    bad.append(f"{part_of(p)} imports {n}")
            elif top != "__future__" and top not in sys.stdlib_module_names and top not in allowed:
                bad.append(f"{part_of(p)} imports {n}, which hosts do not have")
    assert bad == []


def test_nothing_imports_the_emulator():
    bad = [
        f"{p.relative_to(PACKAGE)} imports {n}"
        for p, tree in modules(PACKAGE, recursive=True)
        if part_of(p) != "emulator"
        for n in sglang_deploy_imports(p, tree)
        if inside(n, "sglang_deploy.emulator")
    ]
    assert bad == []


def test_the_emulator_imports_only_itself_and_sglang_defaults():
    """It ships to lab hosts as a package of its own, the host package's sglang_defaults.py beside its modules
    (the lookup sglang_emulator_sources)."""
    defaults = f"{HOST_NAME}.sglang_defaults"
    bad = [
        f"{p.relative_to(PACKAGE)} imports {n}"
        for p, tree in modules(PACKAGE / "emulator", recursive=True)
        for n in sglang_deploy_imports(p, tree)
        if not inside(n, "sglang_deploy.emulator")
        and n != "sglang_deploy"
        and not (inside(n, defaults) or inside(defaults, n))
    ]
    assert bad == []


def test_the_controller_uses_only_public_names_of_the_host_package():
    bad = []
    for p, tree in modules(PACKAGE, recursive=True):
        if part_of(p) in ("host", "emulator"):
            continue
        for n in sglang_deploy_imports(p, tree):
            if inside(n, HOST_NAME) and any(part.startswith("_") for part in n.split(".")[5:]):
                bad.append(f"{p.relative_to(PACKAGE)} imports {n}")
    assert bad == []


def test_the_layer_scans_see_what_they_forbid():
    tree = ast.parse(
        "from ..files import write_file\nfrom ..emulator import config\nfrom .server_http import request\n"
    )
    names = imported(tree, ("bench",), HOST_NAME)
    assert {
        f"{HOST_NAME}.files",
        f"{HOST_NAME}.bench.server_http",
    } <= names
    assert "sglang_deploy.emulator.config" in imported(tree, ("host",))
    assert part_named(f"{HOST_NAME}.files") == "host"


def test_the_roles_hold_no_links():
    """The roles copy the host programs from plugins/module_utils by path (role_path), not through links."""
    assert [p for p in REPO.glob("roles/*/files/**/*") if p.is_symlink()] == []
