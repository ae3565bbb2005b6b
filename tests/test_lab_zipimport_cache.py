"""roles/lab/files/sglang_lab_zipimport_cache.py: the lab image's cache of zip-imported bytecode."""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import zipfile
from pathlib import Path

import pytest

FILE = Path(__file__).resolve().parents[1] / "roles" / "lab" / "files" / "sglang_lab_zipimport_cache.py"
SOURCE = b"def boom():\n    def inner():\n        raise ValueError('boom')\n    inner()\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("lab_cache_under_test", FILE)
    module = importlib.util.module_from_spec(spec)
    with monkeypatch.context() as patch:  # it patches zipimport where its folder exists: not here
        patch.setattr(os.path, "isdir", lambda _: False)
        spec.loader.exec_module(module)
    monkeypatch.setattr(module, "CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # the writer is root in the lab image
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as Ansible's modules run there
    os.mkdir(module.CACHE)
    return module


def test_a_second_compile_comes_from_the_cache_with_the_new_runs_file_names(cache):
    first = cache._compile("/tmp/run1/payload.zip/m.py", SOURCE)
    assert len(os.listdir(cache.CACHE)) == 1
    # A cached entry that is not what compile() wrote would be used: plant one to show the second call reads it.
    (entry,) = Path(cache.CACHE).iterdir()
    planted = compile("def boom():\n    return 'from the cache'\n", "planted", "exec")
    entry.write_bytes(marshal.dumps(planted))
    second = cache._compile("/tmp/run2/payload.zip/m.py", SOURCE)
    space: dict = {}
    exec(second, space)
    assert space["boom"]() == "from the cache"
    assert second.co_filename == "/tmp/run2/payload.zip/m.py"
    assert space["boom"].__code__.co_filename == "/tmp/run2/payload.zip/m.py"
    assert first.co_filename == "/tmp/run1/payload.zip/m.py"


def test_tracebacks_name_the_zip_the_code_was_imported_from(cache, tmp_path, monkeypatch):
    cache._compile("/elsewhere.zip/m.py", SOURCE)  # cached under another run's path
    monkeypatch.setattr(cache, "_COMPILE_SOURCE", None)  # so the import below can only be served by the cache
    archive = tmp_path / "payload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("lab_cache_probe.py", SOURCE)
    original = sys.modules["zipimport"]._compile_source
    sys.modules["zipimport"]._compile_source = cache._compile
    sys.path.insert(0, str(archive))
    try:
        import lab_cache_probe

        with pytest.raises(ValueError) as caught:
            lab_cache_probe.boom()
    finally:
        sys.path.remove(str(archive))
        sys.modules.pop("lab_cache_probe", None)
        sys.modules["zipimport"]._compile_source = original
    assert str(caught.traceback[-1].path) == f"{archive}/lab_cache_probe.py"


def test_a_reader_that_may_not_write_or_a_broken_entry_only_costs_a_compile(cache, monkeypatch):
    for user, no_bytecode in ((1000, False), (0, True)):  # not root; python -B or PYTHONDONTWRITEBYTECODE
        with monkeypatch.context() as patch:
            patch.setattr(os, "geteuid", lambda user=user: user)
            patch.setattr(sys, "dont_write_bytecode", no_bytecode)
            code = cache._compile("/a.zip/m.py", SOURCE)
    assert os.listdir(cache.CACHE) == []
    cache._compile("/a.zip/m.py", SOURCE)
    (entry,) = Path(cache.CACHE).iterdir()
    for broken in (b"not marshal data", marshal.dumps(None), marshal.dumps({"a": 1})):
        entry.write_bytes(broken)
        again = cache._compile("/b.zip/m.py", SOURCE)
        space: dict = {}
        exec(again, space)
        assert "boom" in space and code.co_filename == "/a.zip/m.py"


def test_an_entry_others_may_write_is_ignored_and_entries_are_written_0644(cache, tmp_path):
    os.umask(old := os.umask(0))
    try:
        cache._compile("/a.zip/m.py", SOURCE)
    finally:
        os.umask(old)
    (entry,) = Path(cache.CACHE).iterdir()
    assert entry.stat().st_mode & 0o777 == 0o644
    entry.write_bytes(marshal.dumps(compile("def boom():\n    return 'planted'\n", "p", "exec")))
    entry.chmod(0o666)
    space: dict = {}
    exec(cache._compile("/b.zip/m.py", SOURCE), space)
    with pytest.raises(ValueError):
        space["boom"]()  # compiled from the source: the writable entry was not used


def test_the_key_holds_the_bytecode_version_and_the_optimisation_level(cache, monkeypatch):
    cache._compile("/a.zip/m.py", SOURCE)
    monkeypatch.setattr(sys, "flags", type("Flags", (), {"optimize": 2})())
    cache._compile("/a.zip/m.py", SOURCE)
    names = sorted(p.name for p in Path(cache.CACHE).iterdir())
    magic = importlib.util.MAGIC_NUMBER.hex()
    assert [n.split(".", 1)[1] for n in names] == [f"{magic}.O0", f"{magic}.O2"]
