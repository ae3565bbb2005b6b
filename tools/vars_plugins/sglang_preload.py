"""Vars plugin sglang_preload (ansible.cfg's vars_plugins; not part of the collection): no variables. Two speed-ups of
ansible-playbook's own process, at a play's first task, before the tasks' workers fork from it:

- It loads the collection's filter plugins, so that each worker finds them and the modules they import already
  loaded. Otherwise every worker whose task uses one of them imports the lot again, through Ansible's collection
  loader, which compiles the sources each time: about 0.1 CPU s a task, 6 of a lab deploy's 17 CPU s on the controller
  (results/history/repository.md).
- It keeps the modules Ansible builds (AnsiballZ: a module with the module_utils it imports, found by parsing each
  source) from one run to the next. Ansible caches a build only for its own run, in its per-run temporary folder, so
  every run parses the same sources again: about 2.4 of a lab no-op deploy's 10.5 CPU s. Here a build is kept under
  ~/.cache/sglang-deploy/ansiballz (used only where no one but the user and root can change it: Ansible's cache holds
  pickles, as its per-run one under ~/.ansible/tmp does), in a folder named by a digest of everything that goes into
  it: the module's source and path, the Python and ansible-core in use, and the name and content of every file under
  each module_utils folder Ansible may take one from. A changed source is a new folder, never a stale build; a folder
  that joins the search mid-run (an included role's) turns the cache off for the rest of the run.
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

KEEP_DAYS, KEEP_FOLDERS = 14, 400  # when a run starts: build folders unused this long, or past the newest 400, go


def _private(path: str) -> bool:
    """Whether only this user (and root) can change what PATH names: every folder from / down to it owned by the
    user or root, none another may write unless it is sticky (where only an entry's owner moves it), PATH the user's
    own with mode 0700. Otherwise another user could swap a folder of the cache for one of theirs, and its pickles
    would run as this user (as root under a sudo that kept a user's HOME)."""
    me = os.geteuid()
    folders = [path]
    while folders[-1] != os.path.dirname(folders[-1]):
        folders.append(os.path.dirname(folders[-1]))
    for folder in folders:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (me, 0):
            return False
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return False
        if folder == path and (st.st_uid != me or st.st_mode & 0o077):
            return False
    return True


def _cache_home() -> str | None:
    """The user's cache folder for the builds (its real path), made 0700; None where it is not private."""
    base = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sglang-deploy", "ansiballz"
    )
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        base = os.path.realpath(base)
        return base if _private(base) else None
    except OSError:
        return None


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


def _sources_digest(roots: list) -> hashlib._Hash:
    """A digest of everything a build reads besides the module: Python, ansible-core's builder, every module_utils
    file's name and content (roots: the legacy module_utils folders, ansible-core's among them)."""
    from ansible.executor import module_common
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    ansible = os.path.dirname(release.__file__)
    roots = [*roots, os.path.join(ansible, "_internal", "_ansiballz")]
    for path in AnsibleCollectionConfig.collection_finder._n_collection_paths:  # noqa: SLF001
        for collection in sorted(glob.glob(os.path.join(path, "ansible_collections", "*", "*"))):
            roots += [os.path.join(collection, "plugins", "module_utils"), os.path.join(collection, "meta")]
    digest = hashlib.sha256(f"{sys.version}\0{release.__version__}\0{ansible}\0".encode())
    files = [module_common.__file__, os.path.join(ansible, "config", "ansible_builtin_runtime.yml")]
    for root in roots:
        for folder, dirs, names in os.walk(root, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            files += [os.path.join(folder, name) for name in sorted(names)]
    for name in files:
        with open(name, "rb") as f:
            digest.update(f"{name}\0".encode() + hashlib.sha256(f.read()).digest())
    return digest


def _keep_builds() -> None:
    from ansible.executor import module_common
    from ansible.plugins.loader import module_utils_loader

    find = module_common._find_module_utils  # noqa: SLF001 - absent in another ansible-core: no cache, as before
    base = _cache_home()
    if base is None:
        return
    _prune(base)
    roots = module_utils_loader._get_paths(subdirs=False)  # noqa: SLF001
    sources = _sources_digest(roots)

    def find_kept(*args, **kwargs):
        if module_utils_loader._get_paths(subdirs=False) != roots:  # noqa: SLF001 - one added since (an included role's)
            return find(*args, **kwargs)
        digest = sources.copy()
        digest.update(f"{kwargs['module_path']}\0".encode() + kwargs["b_module_data"])
        folder = os.path.join(base, digest.hexdigest()[:32])
        real = C.DEFAULT_LOCAL_TMP
        C.DEFAULT_LOCAL_TMP = folder  # only where _find_module_utils looks for its ansiballz_cache
        try:
            if os.path.isdir(folder):
                os.utime(folder)  # in use: pruned by its last use
            return find(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a build cut short (a crash, a prune beside it): built again, in the run
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            C.DEFAULT_LOCAL_TMP = real
        return find(*args, **kwargs)

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
