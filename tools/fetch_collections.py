#!/usr/bin/env python3
"""Put the collections the project needs into ./collections, without Galaxy: this checkout itself as the collection
sglang.deploy (a link, collections/ansible_collections/sglang/deploy -> the checkout, so that site.yml, the CLI and
molecule run the repository's own modules and plugins by their FQCN), and the ones the lab and molecule's docker
driver need.

Those come out of the `ansible` community wheel on PyPI, which bundles them; only the ones named in
WANTED are extracted. Idempotent: re-extracts only when the bundle version changes. `--self-only` makes the link
and nothing else (an offline checkout that needs no other collection: the GPU lab's).
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The ansible bundle that pairs with the ansible-core this Python gets: 14.x <-> 2.21 (Python >= 3.12),
# 12.x <-> 2.19 (Python 3.11).
ANSIBLE_BUNDLE = "ansible==14.5.0" if sys.version_info >= (3, 12) else "ansible==12.3.0"
WANTED = [
    "community.docker",  # the lab connection plugin and container modules; molecule's docker driver
    "ansible.posix",  # required by molecule's docker driver
    "community.library_inventory_filtering_v1",  # dependency of community.docker
]
DEST = Path(__file__).resolve().parent.parent / "collections"


def _manifest(name: str) -> Path:
    return DEST / "ansible_collections" / Path(*name.split(".")) / "MANIFEST.json"


def link_self() -> None:
    """collections/ansible_collections/sglang/deploy -> this checkout (relative, so a moved checkout keeps it)."""
    link = DEST / "ansible_collections" / "sglang" / "deploy"
    if link.is_symlink() and link.resolve() == DEST.parent:
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path("..", "..", ".."), target_is_directory=True)


def main() -> int:
    if sys.argv[1:] == ["--self-only"]:
        link_self()
        return 0
    stamp = DEST / ".bundle"
    if stamp.exists() and stamp.read_text().strip() == ANSIBLE_BUNDLE and all(_manifest(c).exists() for c in WANTED):
        link_self()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                tmp,
                ANSIBLE_BUNDLE,
            ],
            check=True,
        )
        (wheel,) = glob.glob(f"{tmp}/ansible-*.whl")
        shutil.rmtree(DEST / "ansible_collections", ignore_errors=True)
        prefixes = tuple(f"ansible_collections/{c.replace('.', '/')}/" for c in WANTED)
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith(prefixes):
                    archive.extract(name, DEST)
    for name in WANTED:
        version = json.loads(_manifest(name).read_text())["collection_info"]["version"]
        print(f"collection {name} {version} (from {ANSIBLE_BUNDLE})")
    stamp.write_text(ANSIBLE_BUNDLE + "\n")
    link_self()
    return 0


if __name__ == "__main__":
    sys.exit(main())
