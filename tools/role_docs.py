#!/usr/bin/env python3
"""Write each role's variables (from meta/argument_specs.yml) into README.md between the role-vars markers.

python tools/role_docs.py          rewrite README.md
python tools/role_docs.py --check  exit 1 when README.md is out of date (the test suite runs this)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
START, END = "<!-- role-vars:start -->", "<!-- role-vars:end -->"


def role_specs() -> dict[str, dict]:
    specs = {}
    for path in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
        specs[path.parents[1].name] = yaml.safe_load(path.read_text())["argument_specs"]["main"]
    return specs


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render() -> str:
    out = []
    for role, spec in role_specs().items():
        out += [
            f"#### `{role}`: {_cell(spec['short_description'])}",
            "",
            "| variable | default | description |",
            "|---|---|---|",
        ]
        for name, opt in spec.get("options", {}).items():
            default = f"`{json.dumps(opt['default'])}`" if "default" in opt else "(see description)"
            desc = opt["description"]
            desc = " ".join(desc) if isinstance(desc, list) else desc
            out.append(f"| `{name}` | {_cell(default)} | {_cell(desc)} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    text = README.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{render()}{END}{tail}"
    if "--check" in sys.argv:
        if new != text:
            print("README.md role variables are out of date: run python tools/role_docs.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
