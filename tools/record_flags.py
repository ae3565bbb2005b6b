#!/usr/bin/env python3
"""Record the launch-flag surface of one SGLang release as JSON (src/sglang_deploy/data/flags-<version>.json).

Run it with the Python of a scratch venv that has that sglang release installed (outside the repo):

    /var/tmp/sgl-0.5.23/bin/python tools/record_flags.py --out src/sglang_deploy/data

Preferred source: the real parser (``ServerArgs.add_cli_args`` on a fresh ``argparse.ArgumentParser``,
exactly what ``prepare_server_args`` builds). When the parser cannot be imported (missing heavy
dependencies), ``--from-source`` reads ``sglang/srt/server_args.py`` with ``ast`` instead and marks the
file ``"source": "server_args.py (ast fallback)"``: literal option names, store_true/false, literal choices
and choices that name module-level lists are recovered; anything else is recorded without choices.

Stdlib only, so it runs inside any venv.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import json
import re
import sys
from pathlib import Path


def _entry(takes_value: bool, nargs, choices, type_name: str | None, dest: str, canonical: str) -> dict:
    return {
        "takes_value": takes_value,
        "nargs": nargs,
        "choices": sorted({str(c) for c in choices}) if choices else None,
        "type": type_name,
        "dest": dest,
        "canonical": canonical,
    }


def from_parser() -> tuple[dict, bool]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    flags = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if not longs or isinstance(action, argparse._HelpAction):
            continue
        takes_value = action.nargs != 0
        type_name = getattr(action.type, "__name__", None) if action.type else None
        canonical = longs[0][2:]
        for opt in longs:
            flags[opt[2:]] = _entry(takes_value, action.nargs, action.choices, type_name, action.dest, canonical)
    return flags, parser.allow_abbrev


def _module_lists(tree: ast.Module) -> dict[str, list]:
    """Module-level NAME = [literal, ...] assignments (choice lists)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, (list, tuple)):
                out[node.targets[0].id] = list(value)
    return out


def from_source(path: Path) -> tuple[dict, bool]:
    tree = ast.parse(path.read_text())
    lists = _module_lists(tree)
    flags = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
            continue
        opts = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
        if not opts:
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        action = kw.get("action")
        action_name = action.value if isinstance(action, ast.Constant) else None
        nargs = kw["nargs"].value if isinstance(kw.get("nargs"), ast.Constant) else None
        takes_value = action_name not in ("store_true", "store_false") and nargs != 0
        choices = None
        if "choices" in kw:
            node_c = kw["choices"]
            if isinstance(node_c, ast.Name):
                choices = lists.get(node_c.id)
            else:
                try:
                    choices = ast.literal_eval(node_c)
                except ValueError:
                    choices = None
        type_node = kw.get("type")
        type_name = type_node.id if isinstance(type_node, ast.Name) else None
        dest = kw["dest"].value if isinstance(kw.get("dest"), ast.Constant) else opts[0][2:].replace("-", "_")
        for opt in opts:
            flags[opt[2:]] = _entry(takes_value, nargs, choices, type_name, dest, opts[0][2:])
    return flags, True


def env_names(pkg_dir: Path) -> list[str]:
    """Environment variables declared in sglang/srt/environ.py (``NAME = EnvBool(...)`` and friends)."""
    path = pkg_dir / "srt" / "environ.py"
    if not path.exists():
        return []
    return sorted(set(re.findall(r"^\s+((?:SGLANG|SGL)_\w+)\s*=\s*Env\w*\(", path.read_text(), re.M)))


def _dump(doc: dict) -> str:
    """JSON with one flag per line (readable diffs between releases)."""
    head = {k: v for k, v in doc.items() if k not in ("flags", "env")}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "flags": {')
    items = list(doc["flags"].items())
    lines += [
        f"  {json.dumps(k)}: {json.dumps(v)}{',' if i < len(items) - 1 else ''}" for i, (k, v) in enumerate(items)
    ]
    lines.append(" },")
    lines.append(f' "env": {json.dumps(doc["env"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for flags-<version>.json")
    ap.add_argument("--from-source", action="store_true", help="read server_args.py with ast (fallback)")
    args = ap.parse_args(argv)

    version = importlib.metadata.version("sglang")
    pkg_dir = Path(importlib.util.find_spec("sglang").origin).parent
    if args.from_source:
        flags, allow_abbrev = from_source(pkg_dir / "srt" / "server_args.py")
        source = "server_args.py (ast fallback)"
    else:
        flags, allow_abbrev = from_parser()
        source = "ServerArgs.add_cli_args (argparse)"
    doc = {
        "sglang_version": version,
        "source": source,
        "python": sys.version.split()[0],
        "allow_abbrev": allow_abbrev,
        "flags": dict(sorted(flags.items())),
        "env": env_names(pkg_dir),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"flags-{version}.json"
    target.write_text(_dump(doc))
    print(f"{target}: {len(flags)} option strings from {source}, {len(doc['env'])} env vars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
