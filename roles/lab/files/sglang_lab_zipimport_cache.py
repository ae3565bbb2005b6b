"""Lab image only (roles/lab): keep the bytecode that zipimport compiles, keyed by the source's sha256.

Ansible sends each Python module as a zip (AnsiballZ) and Python compiles every file it imports from a zip on every
run: about half of a module's CPU in a lab container (a `ping` took 0.37 s of CPU; with this cache, 0.2 s).
On 2 cores, CI's CPU sets its time. The cached code is what compile() returns for the same bytes under the same
bytecode version and optimisation level, its file names set to the run's own paths, so tracebacks read as without
the cache; a hit skips compile-time warnings (SyntaxWarning), which a host outside the lab still prints. Only root
writes the cache (the folder is root's, 0755; entries 0644, created exclusively, never through a link); an entry
that root does not own or others may write is ignored. Hosts outside the lab never get this file.
"""

import os
import sys
import zipimport

CACHE = "/var/cache/python-zipimport"
_COMPILE_SOURCE = getattr(zipimport, "_compile_source", None)  # private: absent in a Python that changed it


def _renamed(code, filename):
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cached(path, code_type):
    import marshal

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != 0 or info.st_mode & 0o022:
            return None
        try:
            code = marshal.load(handle)
        except (EOFError, ValueError, TypeError):
            return None
    return code if isinstance(code, code_type) else None


def _store(path, code):
    import marshal
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=CACHE)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)
            marshal.dump(code, handle)
        os.replace(tmp, path)
    except Exception:  # a full disk, a code object marshal refuses: the import goes on without the cache
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _compile(pathname, source):
    import hashlib
    import importlib.util

    key = f"{hashlib.sha256(source).hexdigest()}.{importlib.util.MAGIC_NUMBER.hex()}.O{sys.flags.optimize}"
    path = os.path.join(CACHE, key)
    code = _cached(path, type(_compile.__code__))
    if code is not None:
        return _renamed(code, pathname)
    code = _COMPILE_SOURCE(pathname, source)
    if not sys.dont_write_bytecode and os.geteuid() == 0:
        _store(path, code)
    return code


if _COMPILE_SOURCE is not None and os.path.isdir(CACHE):
    zipimport._compile_source = _compile
