"""Where the project's files live: the folder holding site.yml, playbooks/, roles/, group_vars/ and stacks/.

Found in this order: the environment variable SGLANG_DEPLOY_HOME; the source checkout this package runs from
(`pip install -e .`, or src/ on the path); the current folder or the nearest parent of it that holds site.yml
and roles/ (a wheel install run from a checkout of the playbooks); the collection the wheel installs beside the package
(ansible_collections/sglang/deploy). `require_project()` says how to fix a miss.
Results go to SGLANG_DEPLOY_RESULTS, else <project>/results (the current folder's results/ for the installed
collection, and its .runner/ too).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

HOME_ENV = "SGLANG_DEPLOY_HOME"
# The collection a wheel installs beside this package.
INSTALLED = Path(__file__).resolve().parents[1] / "ansible_collections" / "sglang" / "deploy"


class ProjectNotFound(RuntimeError):
    """No project folder: the commands that run playbooks or read profiles need one."""


def is_project(path: Path) -> bool:
    return (path / "site.yml").is_file() and (path / "roles").is_dir()


def find_project() -> Path | None:
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[2]
    if is_project(checkout):
        return checkout
    cwd = Path.cwd().resolve()
    return next((p for p in (cwd, *cwd.parents, INSTALLED) if is_project(p)), None)


PROJECT = find_project()
REPO = PROJECT or Path.cwd()  # files under it are missing when no project was found: see require_project()
# The project's group_vars, which reach every inventory through the playbooks/group_vars link: a user's settings.
GROUP_VARS = REPO / "group_vars"
# The settings and launch profiles every role shares: the defaults of the role sglang (below all inventory vars).
SHARED_DEFAULTS = REPO / "roles" / "sglang" / "defaults" / "main"
STACKS = REPO / "stacks"
# Where a run's files go (results/, the runner's .runner/): the project, or the current folder for the installed
# collection (site-packages is no place for them).
WORK = Path.cwd() if REPO == INSTALLED else REPO
RESULTS = Path(os.environ.get("SGLANG_DEPLOY_RESULTS") or WORK / "results")


def require_project() -> Path:
    """The project folder, or ProjectNotFound naming the fix."""
    if PROJECT is None or not is_project(PROJECT):
        where = (
            f"{HOME_ENV}={PROJECT} holds no site.yml and roles/"
            if PROJECT
            else f"no folder holding site.yml and roles/ here ({Path.cwd()}) or above, and {HOME_ENV} is not set"
        )
        raise ProjectNotFound(
            f"sglang-deploy project not found: {where}. Run from a checkout of the project "
            f"(its playbooks, roles and group_vars) or set {HOME_ENV}=/path/to/it"
        )
    return PROJECT


def read_bounded(path: str | Path, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` (``what`` it should be, for the message), at most ``max_bytes``.
    ValueError naming the fix for a device (/dev/zero reads without end), a FIFO (its open waits for a writer)
    or a larger file; OSError as open() raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO's open returns at once
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
            raise ValueError(f"{path} is {kind}, not a regular file: give the path of {what}")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path} is over {max_bytes} bytes, more than {what} holds: check the path")
    return data
