"""roles/lab/files/sglang_lab_zipimport_cache.py: the lab image's cache of zip-imported bytecode."""

from __future__ import annotations

import importlib.util
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
    spec.loader.exec_module(module)  # patches zipimport only where its folder exists: not on this machine
    monkeypatch.setattr(module, "CACHE", str(tmp_path / "cache"))
    os.mkdir(module.CACHE)
    return module


def test_a_second_compile_comes_from_the_cache_with_the_new_runs_file_names(cache):
    first = cache._compile("/tmp/run1/payload.zip/m.py", SOURCE)
    assert len(os.listdir(cache.CACHE)) == 1
    # A cached entry that is not what compile() wrote would be used: plant one to show the second call reads it.
    (entry,) = Path(cache.CACHE).iterdir()
    planted = compile("def boom():\n    return 'from the cache'\n", "planted", "exec")
    entry.write_bytes(__import__("marshal").dumps(planted))
    second = cache._compile("/tmp/run2/payload.zip/m.py", SOURCE)
    space: dict = {}
    exec(second, space)
    assert space["boom"]() == "from the cache"
    assert second.co_filename == "/tmp/run2/payload.zip/m.py"
    assert space["boom"].__code__.co_filename == "/tmp/run2/payload.zip/m.py"
    assert first.co_filename == "/tmp/run1/payload.zip/m.py"


def test_tracebacks_name_the_zip_the_code_was_imported_from(cache, tmp_path):
    cache._compile("/elsewhere.zip/m.py", SOURCE)  # cached under another run's path
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


def test_a_folder_it_cannot_write_or_a_broken_entry_only_costs_a_compile(cache, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(os, "access", lambda *_: False)
        code = cache._compile("/a.zip/m.py", SOURCE)
    assert os.listdir(cache.CACHE) == []
    cache._compile("/a.zip/m.py", SOURCE)
    (entry,) = Path(cache.CACHE).iterdir()
    entry.write_bytes(b"not marshal data")
    again = cache._compile("/b.zip/m.py", SOURCE)
    space: dict = {}
    exec(again, space)
    assert "boom" in space and code.co_filename == "/a.zip/m.py"
