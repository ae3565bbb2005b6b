"""Filters on the controller's folders of the project: sglang_project_path names the project's stacks/, results/ and
models/ wherever the playbook, the inventory or molecule's copy is; sglang_unlinked_dest refuses a file to be
written (a fetched result) through a link.

In this repository (the collection's source) every folder is the checkout's. In a built, installed collection
(MANIFEST.json at its root): stacks/ is the collection's own copy (the stack bundles it ships), and the folders a run
writes or the user keeps (results/, models/) are in the folder the role defaults give, the inventory's
(``inventory_dir``, else ``playbook_dir``), never inside the installed collection nor wherever ansible-playbook
happens to run."""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleFilterError

from ansible_collections.sglang.deploy.plugins.module_utils.files import check_folder

ROOT = Path(__file__).resolve().parents[2]
# An installed collection (Galaxy's tarball, the wheel's copy) has no package source beside it; a checkout has.
INSTALLED = not (ROOT / "src" / "sglang_deploy").is_dir()
SHIPPED = {"stacks"}


def project_path(name: str, base: str | None = None) -> str:
    """The project's folder ``name``: the checkout's; in an installed collection the collection's own (stacks/) or
    the one in ``base`` (the inventory's folder), else in the folder ansible-playbook runs in."""
    if not INSTALLED or name in SHIPPED:
        return str(ROOT / name)
    return str(Path(base or Path.cwd()) / name)


def unlinked_dest(dest: str, folder: str) -> str:
    """``dest``, a file the play writes under ``folder`` on the controller, refused where ``folder``, a folder between
    them or ``dest`` is a link or not what it should be (host/files.check_folder): the write would go where it points."""
    try:
        parts = Path(dest).relative_to(folder).parts
        if not parts:
            raise ValueError(f"{dest} is the folder {folder} itself: give a file in it")
        prefix = Path(folder)
        for part in parts[:-1]:
            check_folder(str(prefix), ())
            prefix = prefix / part
        check_folder(str(prefix), parts[-1:])
    except ValueError as exc:
        raise AnsibleFilterError(f"{exc} (results are written only into real folders, never through a link)") from exc
    return dest


class FilterModule:
    def filters(self):
        return {"sglang_project_path": project_path, "sglang_unlinked_dest": unlinked_dest}
