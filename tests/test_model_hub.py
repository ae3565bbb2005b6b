"""Hub locks and downloads (model_lock.hub_entries, hub_download, `sglang-deploy model lock --repo` and `fetch`)
against olah (a self-hosted Hugging Face mirror from PyPI) serving a local git repository of a checkpoint made by
tools/make_models.py. Opt-in: skipped unless olah imports, which the project's environment does not install, e.g.
`pip install --target /tmp/olahpkgs olah` then `PYTHONPATH=/tmp/olahpkgs pytest tests/test_model_hub.py`.

What olah's local mirror does not cover: LFS metadata (its files are plain git blobs, so every sha256 is computed
here), branch names (it resolves only commits), tokens (it checks none), the Xet transfer backend."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sglang_deploy.locks import model_lock
from ansible_collections.sglang.deploy.plugins.module_utils import model
from sglang_deploy.cli import main

pytest.importorskip("olah")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import make_models  # noqa: E402

SHARD = "model-00002-of-00003.safetensors"


def _git(folder: Path, *args: str) -> str:
    run = subprocess.run(
        ["git", "-c", "user.email=lab@example.invalid", "-c", "user.name=lab", *args],
        cwd=folder,
        check=True,
        capture_output=True,
        text=True,
    )
    return run.stdout.strip()


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """olah on a free port serving lab/dense: commit 1 the checkpoint, commit 2 with SHARD changed."""
    root = tmp_path_factory.mktemp("olah")
    repo = root / "mirrors" / "models" / "lab" / "dense"
    made = make_models.make_models(root / "src", shards=3, shard_bytes=1 << 16, tokenizer=False)["dense"]
    shutil.copytree(made, repo)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "checkpoint")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / SHARD).write_bytes(b"\0" * (1 << 16))
    _git(repo, "commit", "-qam", "another shard")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "config.toml").write_text(
        f'[basic]\nhost = "127.0.0.1"\nport = {port}\nrepos-path = "{root}/repos"\n'
        f'mirrors-path = ["{root}/mirrors"]\n[accessibility]\noffline = true\n'
    )
    code = f"import sys; sys.argv = ['olah-cli', '-c', '{root}/config.toml']; from olah.server import cli; cli()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.2)
    yield {"endpoint": f"http://127.0.0.1:{port}", "first": first, "made": made}
    proc.terminate()
    proc.wait(10)


def test_a_hub_lock_at_a_commit_matches_the_folder_and_fetch_gets_those_bytes(mirror, tmp_path, capsys):
    models, cache = tmp_path / "models", tmp_path / "cache"
    argv = ["--models-dir", str(models), "--endpoint", mirror["endpoint"]]
    assert main(["model", "lock", "hub", "--repo", "lab/dense", "--revision", mirror["first"], *argv]) == 0
    lock = model_lock.load("hub", models)
    assert (lock["repository"], lock["revision"]) == ("lab/dense", mirror["first"])
    assert lock["files"] == model_lock.folder_entries(mirror["made"])  # commit 1's bytes, not the newer commit's
    assert main(["model", "fetch", "hub", "--cache", str(cache), *argv]) == 0
    folder = cache / f"hub-{model.lock_id(lock)}"
    assert "5 files downloaded and checked" in capsys.readouterr().out
    assert model.file_problems(str(folder), lock["files"], full=True) == []
    assert main(["model", "fetch", "hub", "--cache", str(cache), *argv]) == 0
    assert "already there and matching the lock" in capsys.readouterr().out


def test_a_download_that_does_not_match_the_lock_is_named_and_deleted(mirror, tmp_path):
    lock = model_lock.lock_hub(
        "hub", "lab/dense", mirror["first"], tmp_path / "models", endpoint=mirror["endpoint"]
    ).lock
    altered = {**lock, "files": [{**f, "sha256": "0" * 64} if f["path"] == SHARD else f for f in lock["files"]]}
    folder = tmp_path / "cache"
    with pytest.raises(model_lock.ModelLockError, match=f"{SHARD}: sha256 [0-9a-f]{{64}}, the lock says 0{{64}}"):
        model_lock.hub_download(altered, str(folder), endpoint=mirror["endpoint"])
    assert not (folder / SHARD).exists() and (folder / "config.json").exists()


def test_an_unknown_revision_or_repository_is_an_error_without_the_token(mirror, tmp_path):
    token = "hf_secret_token_value"
    for repo, revision in (("lab/dense", "f" * 40), ("lab/ghost", mirror["first"])):
        with pytest.raises(model_lock.ModelLockError, match=f"{repo} at {revision}") as caught:
            model_lock.hub_entries(repo, revision, token=token, endpoint=mirror["endpoint"])
        assert token not in str(caught.value)
