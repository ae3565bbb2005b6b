"""Locking and fetching (src/sglang_deploy/locks/stack_lock.py): wheel choice, bundle checks, downloads checked against
the lock. The whole path (uv resolving a stand-in nightly index, git build, role install) is molecule/lock."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading

import pytest
import yaml

from sglang_deploy.locks import stack_files, stack_lock
from ansible_collections.sglang.deploy.plugins.module_utils import stack
from sglang_deploy.cli import main
from sglang_deploy.paths import STACKS

BASE = "https://files.pythonhosted.org/x/"


def test_pick_wheel_takes_the_best_tag_for_the_target():
    wheels = [
        {"url": BASE + "charset_normalizer-3.5.3-py3-none-any.whl"},
        {"url": BASE + "charset_normalizer-3.5.3-cp37-abi3-manylinux1_x86_64.manylinux_2_28_x86_64.whl"},
        {"url": BASE + "charset_normalizer-3.5.3-cp311-cp311-manylinux1_x86_64.manylinux_2_28_x86_64.whl"},
        {"url": BASE + "charset_normalizer-3.5.3-cp312-cp312-manylinux_2_28_x86_64.whl"},
    ]
    ranked = stack_lock._target_tags("3.11", "x86_64-manylinux_2_35")
    assert stack_lock.pick_wheel(wheels, ranked)["file"].startswith("charset_normalizer-3.5.3-cp311-cp311-")
    # a wheel for a newer glibc than the target's is never chosen
    newer = [{"url": BASE + "torch-2.14.1-cp311-cp311-manylinux_2_39_x86_64.whl"}]
    assert stack_lock.pick_wheel(newer, ranked) is None
    assert stack_lock.pick_wheel(newer, stack_lock._target_tags("3.11", "x86_64-manylinux_2_39")) is not None
    quoted = [{"url": BASE + "torch-2.15.0.dev20261130%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl"}]
    assert (
        stack_lock.pick_wheel(quoted, ranked)["file"]
        == "torch-2.15.0.dev20261130+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"
    )


def test_floating_bundles_may_name_a_branch_and_version_ranges():
    operator = yaml.safe_load((STACKS / "operator-2026-03.yml").read_text())
    assert stack_lock.floating_errors(operator) == ["sglang: a git source needs ref (branch or tag) or commit to lock"]
    nightly = yaml.safe_load((STACKS / "nightly.yml").read_text())
    assert stack_lock.floating_errors(nightly) == []
    assert nightly["sglang"]["ref"] == "main" and nightly["torch"]["version"].startswith(">=")
    locked = yaml.safe_load((STACKS / "stable-0.5.23-2026-11-30.yml").read_text())
    assert "already locked" in stack_lock.floating_errors(locked)[0]


def test_cli_refuses_an_unknown_or_locked_bundle(capsys):
    assert main(["stack", "lock", "no-such-bundle"]) == 2
    assert "bundles there: " in capsys.readouterr().err
    assert main(["stack", "lock", "stable-0.5.23-2026-11-30"]) == 2
    assert "already locked" in capsys.readouterr().err
    assert main(["stack", "fetch", "stable-0.5.23"]) == 2
    assert "is not locked: run sglang-deploy stack lock stable-0.5.23" in capsys.readouterr().err


@pytest.fixture
def served(tmp_path):
    """A local HTTP server over tmp_path/served (a stand-in for an index's file host)."""
    root = tmp_path / "served"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def entry(root, url, name, body, sha=None):
    (root / name).write_bytes(body)
    return {
        "name": name.split("-")[0],
        "version": "1",
        "file": name,
        "url": url + name,
        "sha256": sha or hashlib.sha256(body).hexdigest(),
    }


def test_fetch_checks_every_download_and_keeps_intact_wheels(served, tmp_path):
    root, url = served
    lock = {
        "packages": [entry(root, url, "a-1-py3-none-any.whl", b"a"), entry(root, url, "b-1-py3-none-any.whl", b"b")],
        "installer": [entry(root, url, "uv-1-py3-none-any.whl", b"uv")],
    }
    house = tmp_path / "house"
    result = stack_files.fetch(lock, house)
    assert (result.files, result.downloaded, result.bytes_downloaded) == (3, 3, 4)
    (house / "b-1-py3-none-any.whl").write_bytes(b"altered")
    result = stack_files.fetch(lock, house)
    assert (result.downloaded, (house / "b-1-py3-none-any.whl").read_bytes()) == (1, b"b")


def test_fetch_refuses_a_download_that_does_not_match(served, tmp_path):
    root, url = served
    lock = {"packages": [entry(root, url, "a-1-py3-none-any.whl", b"a", sha="0" * 64)]}
    with pytest.raises(stack_lock.LockError, match="a-1-py3-none-any.whl: sha256 .* the lock says 0{64}"):
        stack_files.fetch(lock, tmp_path / "house")
    assert not (tmp_path / "house" / "a-1-py3-none-any.whl").exists()


def test_fetch_names_a_built_wheel_it_cannot_download(tmp_path):
    lock = {
        "packages": [
            {
                "name": "sglang",
                "version": "0.6",
                "file": "sglang-abc/sglang-0.6-py3-none-any.whl",
                "url": None,
                "sha256": "0" * 64,
            }
        ]
    }
    with pytest.raises(
        stack_lock.LockError, match="sglang-abc/sglang-0.6-py3-none-any.whl: built when the bundle was locked"
    ):
        stack_files.fetch(lock, tmp_path)


def test_lock_hashes_what_it_downloads_from_an_extra_index(served, tmp_path):
    """The PyTorch-index trap: wheels of an extra index published with a wrong hash or none."""
    root, url = served
    (root / "torch-2.15.0.dev1-py3-none-any.whl").write_bytes(b"torch")
    (root / "fi-1-py3-none-any.whl").write_bytes(b"fi")
    pylock = {
        "packages": [
            {
                "name": "torch",
                "version": "2.15.0.dev1",
                "wheels": [{"url": url + "torch-2.15.0.dev1-py3-none-any.whl", "hashes": {"sha256": "0" * 64}}],
            },
            {"name": "fi", "version": "1", "wheels": [{"url": url + "fi-1-py3-none-any.whl"}]},
            {
                "name": "idna",
                "version": "3.20",
                "wheels": [
                    {
                        "url": "https://files.pythonhosted.org/x/idna-3.20-py3-none-any.whl",
                        "hashes": {"sha256": "a" * 64},
                    }
                ],
            },
        ]
    }
    notes = []
    entries = stack_lock._entries(pylock, {"python": "3.11"}, tmp_path, None, notes)
    by_name = {entry["name"]: entry for entry in entries}
    assert (
        by_name["torch"]["sha256"] == hashlib.sha256(b"torch").hexdigest()
        and by_name["torch"]["sha256_from"] == "download"
    )
    assert by_name["fi"]["sha256"] == hashlib.sha256(b"fi").hexdigest()
    assert by_name["idna"] == {**by_name["idna"], "sha256": "a" * 64, "sha256_from": "index"}  # PyPI: as published
    assert sorted(notes) == [
        "fi-1-py3-none-any.whl: the index published no sha256; locked the hash of the download",
        f"torch-2.15.0.dev1-py3-none-any.whl: the index published sha256 {'0' * 64}, the download has "
        f"{hashlib.sha256(b'torch').hexdigest()}; locked the download's",
    ]
    assert (tmp_path / "torch-2.15.0.dev1-py3-none-any.whl").read_bytes() == b"torch"  # kept in the wheelhouse


@pytest.mark.parametrize(
    "name, url",
    [
        ("../victim", "file:///etc/hostname"),
        ("/tmp/x-1-py3-none-any.whl", "file:///etc/hostname"),
        ("a/../../x-1-py3-none-any.whl", "file:///etc/hostname"),
        ("x-1-py3-none-any.whl", "ftp://example.invalid/x-1-py3-none-any.whl"),
    ],
)
def test_fetch_refuses_entries_that_reach_outside_the_wheelhouse(tmp_path, name, url):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    lock = {"packages": [{"name": "x", "version": "1", "file": name, "url": url, "sha256": "0" * 64}]}
    with pytest.raises(stack_lock.LockError, match="lock the bundle again"):
        stack_files.fetch(lock, tmp_path / "house")
    assert victim.read_text() == "keep" and list((tmp_path / "house").iterdir()) == []


def test_check_lock_refuses_a_consistent_lock_with_a_bad_entry():
    lock = {"bundle": "b", "packages": [{"file": "../victim", "url": "file:///etc/hostname", "sha256": "0" * 64}]}
    bundle = {"name": "b", "lock": {"file": "b.lock.yml", "id": stack.lock_id(lock)}}
    assert stack.check_lock(bundle, lock) == [
        "lock b.lock.yml: file '../victim' is not a wheel's file name (lock the bundle again)"
    ]


def test_prune_lists_then_deletes_the_wheels_no_lock_names(tmp_path, capsys):
    stacks, other, house = tmp_path / "stacks", tmp_path / "mine", tmp_path / "house"
    named = ["a-1-py3-none-any.whl", "sglang-abc000000000/sglang-1-py3-none-any.whl", "uv-1-py3-none-any.whl"]
    for folder, lock in [
        (stacks, {"packages": [{"file": named[0]}, {"file": named[1]}], "installer": [{"file": named[2]}]}),
        (other, {"packages": [{"file": "b-1-py3-none-any.whl"}, {"file": "gone-1-py3-none-any.whl"}]}),
    ]:
        folder.mkdir()
        (folder / "x.lock.yml").write_text(yaml.safe_dump(lock))
    stale = ["old-1-py3-none-any.whl", ".x1y2.part", "sglang-def000000000/sglang-0-py3-none-any.whl"]
    for name in named + stale + ["b-1-py3-none-any.whl", "notes.txt"]:
        (house / name).parent.mkdir(parents=True, exist_ok=True)
        (house / name).write_bytes(b"12")
    args = ["stack", "prune", "--wheelhouse", str(house), "--stacks-dir", str(stacks)]
    assert main(args + ["--stacks-dir", str(other)]) == 0
    out = capsys.readouterr().out
    assert "2 locks in " in out and "name 4 wheels" in out and "1 named wheels are not there" in out
    assert all(f"  {name}  " in out for name in stale) and "nothing deleted: run again with --delete" in out
    assert all((house / name).exists() for name in stale)
    # without the second folder its lock's wheel is no longer named; with --delete they go, and the empty folder
    assert main(args + ["--delete"]) == 0
    assert "deleted these 4 wheels" in capsys.readouterr().out
    left = sorted(str(p.relative_to(house)) for p in house.rglob("*") if p.is_file())
    assert left == sorted(named + ["notes.txt"]) and not (house / "sglang-def000000000").exists()
    assert main(args) == 0 and "nothing to prune" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["packages: [unclosed\n", "packages: []\npackages: []\n"])
def test_prune_stops_at_a_lock_it_cannot_read_before_deleting(tmp_path, capsys, content):
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "bad.lock.yml").write_text(content)
    (tmp_path / "house").mkdir()
    (tmp_path / "house" / "a-1-py3-none-any.whl").write_bytes(b"a")
    argv = [
        "stack",
        "prune",
        "--delete",
        "--wheelhouse",
        str(tmp_path / "house"),
        "--stacks-dir",
        str(tmp_path / "stacks"),
    ]
    assert main(argv) == 2
    assert "bad.lock.yml: not a readable lock" in capsys.readouterr().err
    assert (tmp_path / "house" / "a-1-py3-none-any.whl").exists()


def test_prune_deletes_no_wheel_when_it_finds_no_lock(tmp_path, capsys):
    """A mistyped --stacks-dir (or a wheel install without the project's stacks/) names no wheel: --delete emptied the
    wheelhouse, SGLang wheels built from git included, which nothing can fetch again."""
    (tmp_path / "typo").mkdir()
    house = tmp_path / "house"
    (house / "sglang-abc").mkdir(parents=True)
    (house / "sglang-abc" / "sglang-1-py3-none-any.whl").write_bytes(b"built from git")
    argv = ["stack", "prune", "--delete", "--wheelhouse", str(house), "--stacks-dir", str(tmp_path / "typo")]
    assert main(argv) == 2
    assert "no lock (*.lock.yml) in " in capsys.readouterr().err
    assert (house / "sglang-abc" / "sglang-1-py3-none-any.whl").exists()


def test_prune_in_a_folder_that_is_not_a_wheelhouse_touches_only_wheels_and_its_own_downloads(tmp_path, capsys):
    """--wheelhouse ~ by mistake: only *.whl and the .NAME.part files `stack fetch` leaves are candidates, and only the
    sglang-<commit>/ folders the prune emptied are removed (it removed every empty folder: ~/Desktop, ~/Music)."""
    stacks, home = tmp_path / "stacks", tmp_path / "home"
    stacks.mkdir()
    (stacks / "x.lock.yml").write_text(yaml.safe_dump({"packages": [{"file": "a-1-py3-none-any.whl"}]}))
    for folder in ("Desktop", "Music", "sglang-0123456789ab", "router-wheels"):
        (home / folder).mkdir(parents=True)
    (home / "sglang-0123456789ab" / "sglang-0-py3-none-any.whl").write_bytes(b"w")
    (home / "router-wheels" / "smg-1.13.0-cp38-abi3-linux_x86_64.whl").write_bytes(b"another wheelhouse's")
    (home / "film.mkv.part").write_bytes(b"a browser's download")
    (home / ".a1b2.part").write_bytes(b"stack fetch's")
    assert main(["stack", "prune", "--delete", "--wheelhouse", str(home), "--stacks-dir", str(stacks)]) == 0
    capsys.readouterr()
    assert (home / "Desktop").is_dir() and (home / "Music").is_dir() and (home / "film.mkv.part").exists()
    assert (home / "router-wheels" / "smg-1.13.0-cp38-abi3-linux_x86_64.whl").exists()
    assert not (home / "sglang-0123456789ab").exists() and not (home / ".a1b2.part").exists()
