"""Filter sglang_project_path: a path inside this project (the folder that holds filter_plugins/), so that role
defaults name the project's stacks/ and results/ wherever the playbook, the inventory or molecule's copy is."""

from __future__ import annotations

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def project_path(name: str) -> str:
    return str(PROJECT / name)


class FilterModule:
    def filters(self):
        return {"sglang_project_path": project_path}
