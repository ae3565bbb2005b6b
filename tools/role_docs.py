#!/usr/bin/env python3
"""Write each role's variables (from meta/argument_specs.yml) into roles/<role>/README.md between the role-vars
markers.

python tools/role_docs.py          rewrite the role READMEs
python tools/role_docs.py --check  exit 1 when one is out of date or lacks the markers (the test suite runs this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- role-vars:start -->", "<!-- role-vars:end -->"


def role_specs() -> dict[str, dict]:
    """Role name -> its argument_specs (entry point -> spec)."""
    specs = {}
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        specs[path.parents[1].name] = yaml.safe_load(path.read_text())["argument_specs"]
    return specs


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render(entry_points: dict[str, dict]) -> str:
    """One table per entry point; entry points other than main get a heading with their short description."""
    out = []
    for entry, spec in entry_points.items():
        if entry != "main":
            out += [f"Entry point `{entry}`: {_cell(spec['short_description'])}", ""]
        out += ["| variable | default | description |", "|---|---|---|"]
        for name, opt in spec.get("options", {}).items():
            default = f"`{json.dumps(opt['default'])}`" if "default" in opt else "(see description)"
            desc = opt["description"]
            desc = " ".join(desc) if isinstance(desc, list) else desc
            out.append(f"| `{name}` | {_cell(default)} | {_cell(desc)} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    stale = []
    for role, entry_points in role_specs().items():
        readme = REPO / "roles" / role / "README.md"
        text = readme.read_text() if readme.exists() else ""
        if START not in text or END not in text:
            print(f"{readme.relative_to(REPO)} lacks the {START} ... {END} markers: add them", file=sys.stderr)
            return 1
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        new = f"{head}{START}\n{render(entry_points)}{END}{tail}"
        if new != text:
            stale.append(readme)
            if "--check" not in sys.argv:
                readme.write_text(new)
    if stale and "--check" in sys.argv:
        names = ", ".join(str(p.relative_to(REPO)) for p in stale)
        print(f"role variables out of date in {names}: run python tools/role_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
