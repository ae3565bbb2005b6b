"""Filter sglang_project_path: a folder of the project, so that role defaults name the project's stacks/, results/ and
models/ wherever the playbook, the inventory or molecule's copy is.

In this repository (the collection's source) every folder is the checkout's. In a built, installed collection
(MANIFEST.json at its root): stacks/ is the collection's own copy (the stack bundles it ships), and the folders a run
writes or the user keeps (results/, models/) are in the folder ansible-playbook runs in, never inside the installed
collection."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = (ROOT / "MANIFEST.json").is_file()
SHIPPED = {"stacks"}


def project_path(name: str) -> str:
    base = Path.cwd() if INSTALLED and name not in SHIPPED else ROOT
    return str(base / name)


class FilterModule:
    def filters(self):
        return {"sglang_project_path": project_path}
