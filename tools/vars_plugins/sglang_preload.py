"""Vars plugin sglang_preload (ansible.cfg's vars_plugins; not part of the collection): no variables. Two speed-ups of
ansible-playbook's own process, at a play's first task, before the tasks' workers fork from it:

- It loads the collection's filter plugins, so that each worker finds them and the modules they import already
  loaded. Otherwise every worker whose task uses one of them imports the lot again, through Ansible's collection
  loader, which compiles the sources each time: about 0.1 CPU s a task, 6 of a lab deploy's 17 CPU s on the controller
  (results/history/repository.md).
- It keeps the modules Ansible builds (AnsiballZ: a module with the module_utils it imports, found by parsing each
  source) from one run to the next. Ansible caches a build only for its own run, in its per-run temporary folder, so
  every run parses the same sources again: about 2.4 of a lab no-op deploy's 10.5 CPU s. Here a build is kept under
  ~/.cache/sglang-deploy/ansiballz (the user's own folder, mode 0700: Ansible's cache holds pickles, as its per-run
  one under ~/.ansible/tmp does), in a folder named by a digest of everything that goes into it: the module's source
  and path, the Python and ansible-core in use, and the name, size and time of every file under each module_utils
  folder Ansible may take one from. A changed source is a new folder, never a stale build.
Both fail safe: where they cannot (another ansible-core, a folder that is not the user's), Ansible runs as without them.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import stat
import sys
import time

from ansible import constants as C
from ansible import release
from ansible.plugins.loader import filter_loader
from ansible.plugins.vars import BaseVarsPlugin

KEEP_DAYS, KEEP_FOLDERS = 14, 400  # when a run starts: build folders older than this, or past the newest 400, go


def _cache_home() -> str | None:
    """The user's cache folder for the builds, made 0700; None where it is not a folder of the user's alone."""
    base = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang-deploy", "ansiballz"
    )
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def _prune(base: str) -> None:
    folders = sorted(
        (
            (entry.stat(follow_symlinks=False).st_mtime, entry.path)
            for entry in os.scandir(base)
            if entry.is_dir(follow_symlinks=False)
        ),
        reverse=True,
    )
    old = time.time() - KEEP_DAYS * 86400
    for i, (mtime, path) in enumerate(folders):
        if i >= KEEP_FOLDERS or mtime < old:
            shutil.rmtree(path, ignore_errors=True)


def _sources_digest() -> hashlib._Hash:
    """A digest of what a build may read besides the module: Python, ansible-core, every module_utils file."""
    from ansible.plugins.loader import module_utils_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    roots = module_utils_loader._get_paths()  # noqa: SLF001 - ansible-core's and the legacy module_utils folders
    for path in AnsibleCollectionConfig.collection_finder._n_collection_paths:  # noqa: SLF001
        for collection in sorted(glob.glob(os.path.join(path, "ansible_collections", "*", "*"))):
            roots += [os.path.join(collection, "plugins", "module_utils"), os.path.join(collection, "meta")]
    digest = hashlib.sha256(f"{sys.version}\0{release.__version__}\0{release.__file__}\0".encode())
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                st = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest


def _keep_builds() -> None:
    from ansible.executor import module_common

    find = module_common._find_module_utils  # noqa: SLF001 - absent in another ansible-core: no cache, as before
    base = _cache_home()
    if base is None:
        return
    _prune(base)
    sources = _sources_digest()

    def find_kept(*args, **kwargs):
        digest = sources.copy()
        digest.update(f"{kwargs['module_path']}\0".encode() + kwargs["b_module_data"])
        folder = os.path.join(base, digest.hexdigest()[:32])
        real = C.DEFAULT_LOCAL_TMP
        C.DEFAULT_LOCAL_TMP = folder  # only where _find_module_utils looks for its ansiballz_cache
        try:
            return find(*args, **kwargs)
        finally:
            C.DEFAULT_LOCAL_TMP = real

    module_common._find_module_utils = find_kept  # noqa: SLF001


class VarsModule(BaseVarsPlugin):
    loaded = False

    def get_vars(self, loader, path, entities, cache=True):
        if not VarsModule.loaded:
            VarsModule.loaded = True
            try:
                filter_loader.get("sglang.deploy.sglang_escaped")  # loads every filter file of the collection
            except Exception:  # noqa: BLE001 - only a speed-up: a play without the collection (no collections/ yet) runs on
                pass
            try:
                _keep_builds()
            except Exception:  # noqa: BLE001 - only a speed-up: Ansible builds each module in its run, as without it
                pass
        return {}
