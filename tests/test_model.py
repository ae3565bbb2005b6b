"""Model locks (model.py, model_lock.py, `sglang-deploy model`) and the checks before a launch, on checkpoints made
by tools/make_models.py; the host modules sglang_model_plan and sglang_model_install run with patch_module_args."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from ansible_json import needs_playbook, run_playbook
from emulator_proc import run_module  # first: puts the repo's module_utils on the import path

from sglang_deploy.fleet import model_fanout
from sglang_deploy.locks import model_lock
from ansible_collections.sglang.deploy.plugins.module_utils import model
from sglang_deploy.cli import main

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "plugins" / "modules"))
import make_models  # noqa: E402
import sglang_model_install  # noqa: E402
import sglang_model_plan  # noqa: E402
import sglang_model_warm  # noqa: E402

SHARD = "model-00002-of-00003.safetensors"
SHARD_BYTES = 1 << 16


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return make_models.make_models(tmp_path / "src", shards=3, shard_bytes=SHARD_BYTES, tokenizer=False)["dense"]


@pytest.fixture
def locked(checkpoint: Path, tmp_path: Path) -> dict:
    return model_lock.lock_folder("lab-dense", checkpoint, tmp_path / "models").lock


def test_a_lock_lists_every_file_with_size_and_sha256(checkpoint, locked, tmp_path):
    assert [f["path"] for f in locked["files"]] == [
        "config.json",
        "model-00001-of-00003.safetensors",
        SHARD,
        "model-00003-of-00003.safetensors",
        "model.safetensors.index.json",
    ]
    shard = next(f for f in locked["files"] if f["path"] == SHARD)
    assert shard["size"] == (checkpoint / SHARD).stat().st_size
    assert shard["sha256"] == model.sha256_file(str(checkpoint / SHARD))
    assert (locked["repository"], locked["revision"]) == ("", "")
    assert yaml.safe_load((tmp_path / "models" / "lab-dense.lock.yml").read_text()) == locked
    assert model.drift(str(checkpoint), locked) == []
    assert model.launch_problems(str(checkpoint), locked["files"]) == []


def test_truncated_altered_missing_and_extra_files_are_named(checkpoint, locked):
    with open(checkpoint / SHARD, "r+b") as handle:
        handle.seek(100)
        handle.write(b"XXXX")
    os.truncate(checkpoint / "model-00003-of-00003.safetensors", 10)
    (checkpoint / "model-00001-of-00003.safetensors").unlink()
    (checkpoint / "stray.bin").write_bytes(b"x")
    lines = model.drift(str(checkpoint), locked)
    assert lines[0] == f"model-00001-of-00003.safetensors: missing from {checkpoint}"
    assert lines[1].startswith(f"{SHARD}: sha256 ") and lines[1].endswith("(altered)")
    assert lines[2] == f"model-00003-of-00003.safetensors: 10 bytes, the lock says {SHARD_BYTES + 96} (truncated)"
    assert lines[3] == "stray.bin: not in lock lab-dense"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"revision": "main", "repository": "Qwen/Qwen3-0.6B"}, "revision 'main' is not a commit"),
        ({"repository": "Qwen/Qwen3-0.6B", "revision": "A" * 40}, "is not a commit"),
        ({"repository": "../x", "revision": "a" * 40}, "a Hub repository id"),
        ({"revision": "a" * 40}, "revision without a repository"),
        ({"name": "../etc"}, "name '../etc'"),
        ({"files": []}, "files: the list"),
        ({"files": [{"path": "../config.json", "size": 1, "sha256": "a" * 64}]}, "must be relative"),
        ({"files": [{"path": "/etc/passwd", "size": 1, "sha256": "a" * 64}]}, "must be relative"),
        ({"files": [{"path": ".cache/x", "size": 1, "sha256": "a" * 64}]}, "without hidden parts"),
        ({"files": [{"path": "config.json", "size": "1", "sha256": "a" * 64}]}, "size '1' is not"),
        ({"files": [{"path": "config.json", "size": 1, "sha256": "xyz"}]}, "is not 64 lower-case hex"),
        ({"files": [{"path": "w.safetensors", "size": 1, "sha256": "a" * 64}]}, "config.json is not listed"),
        ({"files": [{"path": "{{ lookup('pipe', 'id') }}", "size": 1, "sha256": "a" * 64}]}, "Ansible's templates"),
        ({"files": [{"path": "model-*.safetensors", "size": 1, "sha256": "a" * 64}]}, "a glob pattern"),
        ({"files": [{"path": "config.json", "size": 1, "sha256": "a" * 64, "url": "x"}]}, "unknown key 'url'"),
        ({"notes": "{{ 6 * 7 }}"}, "unknown key 'notes'"),
    ],
)
def test_bad_locks_are_refused_naming_the_key(locked, change, problem):
    assert any(problem in p for p in model.validate({**locked, **change})), model.validate({**locked, **change})


def test_a_commit_revision_is_accepted(locked):
    assert (
        model.validate({**locked, "repository": "Qwen/Qwen3-0.6B", "revision": "0123456789abcdef" * 2 + "01234567"})
        == []
    )


def test_launch_checks_read_the_index_and_the_shards(checkpoint, locked):
    assert model.launch_problems(str(checkpoint), locked["files"]) == []
    os.truncate(checkpoint / SHARD, 5)
    assert model.launch_problems(str(checkpoint), locked["files"]) == [
        f"{SHARD}: 5 bytes, the lock says {SHARD_BYTES + 96}"
    ]
    (checkpoint / SHARD).unlink()
    assert model.launch_problems(str(checkpoint)) == [
        f"{SHARD}: named by model.safetensors.index.json, missing from {checkpoint}"
    ]
    index = json.loads((checkpoint / model.INDEX).read_text())
    index["weight_map"]["extra"] = "../outside.safetensors"
    (checkpoint / model.INDEX).write_text(json.dumps(index))
    assert any("must be relative" in p for p in model.launch_problems(str(checkpoint)))
    (checkpoint / model.INDEX).unlink()
    (checkpoint / "config.json").write_text("[1]")
    for name in os.listdir(checkpoint):
        if name.endswith(".safetensors"):
            (checkpoint / name).unlink()
    assert model.launch_problems(str(checkpoint)) == [
        "config.json: not a JSON object",
        f"no model.safetensors.index.json and no *.safetensors file in {checkpoint}: no weights to load",
    ]


def test_the_stamp_spares_hashing_until_size_or_mtime_change(checkpoint, locked, monkeypatch):
    model.write_stamp(str(checkpoint), locked)
    hashed = []
    real = model.sha256_file
    monkeypatch.setattr(model, "sha256_file", lambda path: hashed.append(path) or real(path))
    assert model.file_problems(str(checkpoint), locked["files"]) == [] and hashed == []
    with open(checkpoint / SHARD, "r+b") as handle:  # same size, new mtime
        handle.write(b"Z")
    problems = model.file_problems(str(checkpoint), locked["files"])
    assert hashed == [str(checkpoint / SHARD)] and problems[0].startswith(f"{SHARD}: sha256 ")
    assert len(model.file_problems(str(checkpoint), locked["files"], full=True)) == 1 and len(hashed) == 6


def test_finish_refuses_a_bad_partial_and_leaves_the_serving_folder(checkpoint, locked, tmp_path):
    dest = tmp_path / "data" / "lab"
    dest.mkdir(parents=True)
    (dest / "config.json").write_text("old")  # a checkpoint the role did not install: replaced
    partial = Path(str(dest) + model.PARTIAL)
    partial.parent.mkdir(exist_ok=True)
    os.system(f"cp -r {checkpoint} {partial}")
    with open(partial / SHARD, "r+b") as handle:
        handle.write(b"Z")
    result = model.finish(str(partial), str(dest), locked)
    assert len(result["problems"]) == 1 and result["problems"][0].startswith(f"{SHARD}: sha256 ")
    assert not (partial / SHARD).exists()  # the next run copies it again
    assert (dest / "config.json").read_text() == "old"
    os.system(f"cp {checkpoint / SHARD} {partial / SHARD}")
    (partial / "stray.txt").write_text("x")
    assert model.finish(str(partial), str(dest), locked) == {"problems": [], "removed": ["stray.txt"]}
    assert not partial.exists() and (Path(str(dest) + model.PREVIOUS) / "config.json").read_text() == "old"
    assert model.read_stamp(str(dest))["lock_id"] == model.lock_id(locked)
    assert model.plan(str(dest), locked)["installed"]


def test_finish_replaces_a_folder_that_cannot_be_renamed(checkpoint, locked, tmp_path, monkeypatch):
    """A serving folder of a container image's lower layer: overlayfs refuses to rename it (EXDEV), as the lab's
    stand-in model folder did in molecule/fleet; it is removed (copying it would need its size free again) and the
    new checkpoint goes in place."""
    dest = tmp_path / "lab"
    dest.mkdir()
    (dest / "config.json").write_text("image")
    partial = Path(str(dest) + model.PARTIAL)
    os.system(f"cp -r {checkpoint} {partial}")
    real = os.replace

    def image_layer(src, dst):
        if str(src) == str(dest):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real(src, dst)

    monkeypatch.setattr(model.os, "replace", image_layer)
    assert model.finish(str(partial), str(dest), locked) == {"problems": [], "removed": []}
    assert not Path(str(dest) + model.PREVIOUS).exists() and not (dest / "config.json").read_text() == "image"
    assert model.plan(str(dest), locked)["installed"] and not partial.exists()


def test_plan_lists_what_the_partial_folder_lacks(checkpoint, locked, tmp_path):
    dest = tmp_path / "lab"
    partial = Path(str(dest) + model.PARTIAL)
    partial.mkdir()
    (partial / "config.json").write_bytes((checkpoint / "config.json").read_bytes())
    (partial / SHARD).write_bytes(b"short")
    planned = model.plan(str(dest), locked)
    assert not planned["installed"] and "config.json" not in planned["to_copy"] and SHARD in planned["to_copy"]
    assert planned["bytes_needed"] == sum(f["size"] for f in locked["files"] if f["path"] != "config.json")


def test_plan_module_refuses_a_branch_revision_and_a_full_disk(capsys, locked, tmp_path):
    dest = str(tmp_path / "lab")
    failed, result = run_module(
        sglang_model_plan, {"lock": {**locked, "repository": "o/n", "revision": "main"}, "dest": dest}, capsys
    )
    assert failed and "revision 'main' is not a commit" in result["msg"] and "pin a commit" in result["msg"]
    failed, result = run_module(sglang_model_plan, {"lock": locked, "dest": dest, "reserve_gb": 1e9}, capsys)
    assert failed and "needs 0.00 GB more" in result["msg"] and "nothing was copied" in result["msg"]
    assert not os.path.exists(dest + model.PARTIAL)


def test_modules_install_then_report_no_drift(capsys, checkpoint, locked, tmp_path):
    dest = str(tmp_path / "lab")
    failed, planned = run_module(sglang_model_plan, {"lock": locked, "dest": dest, "_ansible_diff": True}, capsys)
    assert not failed and planned["changed"] and len(planned["to_copy"]) == 5
    assert planned["diff"]["before"] == f"{dest}: no checkpoint there (lock lab-dense not installed)\n"
    os.system(f"cp -r {checkpoint} {dest}{model.PARTIAL}")
    failed, result = run_module(sglang_model_install, {"lock": locked, "dest": dest}, capsys)
    assert not failed and result["changed"], result
    failed, planned = run_module(sglang_model_plan, {"lock": locked, "dest": dest}, capsys)
    assert not failed and not planned["changed"] and planned["installed"] and planned["to_copy"] == []


@pytest.mark.parametrize("which", ["", model.PREVIOUS])
def test_a_folder_that_holds_no_checkpoint_is_refused_and_left_as_it_is(capsys, checkpoint, locked, tmp_path, which):
    """sglang_model_dir set to a folder of other things (say the models folder itself): the first install moved it to
    <dir>.previous and the next deleted it, without a word (issue 48, R10)."""
    dest = str(tmp_path / "lab")
    mine = Path(dest + which)
    (mine / "other").mkdir(parents=True)
    (mine / "other" / "config.json").write_text("{}")  # a checkpoint below it does not make it one
    (mine / "notes.txt").write_text("mine")
    os.system(f"cp -r {checkpoint} {dest}{model.PARTIAL}")
    fate = f"moves it to {dest}{model.PREVIOUS} and deletes that at the next install" if not which else "deletes it"
    refusal = (
        f"{mine} is a folder that holds no checkpoint (no config.json or {model.STAMP} at its top), which the role "
        f"{fate}: it was left as it is; move it away, or set sglang_model_dir (or sglang_model_path) to a folder of "
        "its own, e.g. /data/models/NAME, and run again"
    )
    for module in (sglang_model_plan, sglang_model_install):
        failed, result = run_module(module, {"lock": locked, "dest": dest}, capsys)
        assert failed and refusal in result["msg"], result["msg"]
    assert model.finish(dest + model.PARTIAL, dest, locked)["problems"] == [refusal]
    assert sorted(p.name for p in mine.rglob("*")) == ["config.json", "notes.txt", "other"]
    (mine / "other" / "config.json").unlink()
    (mine / "other").rmdir()
    (mine / "notes.txt").rename(tmp_path / "notes.txt")  # moved away: an empty folder is replaced
    failed, result = run_module(sglang_model_install, {"lock": locked, "dest": dest}, capsys)
    assert not failed and model.plan(dest, locked)["installed"], result


def test_cli_lock_and_check(checkpoint, tmp_path, capsys):
    models = str(tmp_path / "locks")
    assert main(["model", "lock", "lab", "--path", str(checkpoint), "--models-dir", models]) == 0
    assert "5 files" in capsys.readouterr().out
    assert main(["model", "check", "lab", str(checkpoint), "--models-dir", models]) == 0
    os.truncate(checkpoint / SHARD, 7)
    assert main(["model", "check", "lab", str(checkpoint), "--models-dir", models]) == 1
    assert f"{SHARD}: 7 bytes, the lock says {SHARD_BYTES + 96} (truncated)" in capsys.readouterr().out
    assert main(["model", "lock", "x", "--repo", "o/n", "--models-dir", models]) == 2
    assert main(["model", "check", "ghost", str(checkpoint), "--models-dir", models]) == 2
    assert "locks there: lab" in capsys.readouterr().err


def test_an_edited_lock_is_refused(locked, tmp_path):
    path = tmp_path / "models" / "lab-dense.lock.yml"
    path.write_text(path.read_text().replace("revision: ''", "revision: main"))
    with pytest.raises(model_lock.ModelLockError, match="revision without a repository"):
        model_lock.load("lab-dense", tmp_path / "models")


def test_a_link_in_a_checkpoint_is_refused(checkpoint, tmp_path):
    (checkpoint / "link.json").symlink_to("/etc/hostname")
    with pytest.raises(model_lock.ModelLockError, match="link.json: a link"):
        model_lock.lock_folder("lab", checkpoint, tmp_path / "models")


@pytest.mark.parametrize("dest", ["/", "", "relative/lab", "/data/../etc", "/data/./lab", "/data/la\nb"])
def test_a_model_folder_that_is_not_an_absolute_normalized_path_is_refused(capsys, locked, dest):
    for module in (sglang_model_plan, sglang_model_install):
        failed, result = run_module(module, {"lock": locked, "dest": dest}, capsys)
        assert failed and "an absolute, normalized path below /" in result["msg"], result


def test_warm_reads_every_locked_file_and_changes_nothing(capsys, checkpoint, locked):
    before = {p.name: p.stat().st_mtime_ns for p in checkpoint.iterdir()}
    failed, result = run_module(sglang_model_warm, {"lock": locked, "dest": str(checkpoint)}, capsys)
    assert not failed and not result["changed"] and result["bytes"] == sum(f["size"] for f in locked["files"])
    assert {p.name: p.stat().st_mtime_ns for p in checkpoint.iterdir()} == before
    failed, result = run_module(sglang_model_warm, {"lock": locked, "dest": str(checkpoint.parent / "ghost")}, capsys)
    assert failed and "reading" in result["msg"] and "config.json" in result["msg"]


def test_fanout_rounds_double_the_holders_and_use_the_source_once():
    hosts = [f"h{i}" for i in range(1, 9)]
    rounds = model_fanout.fanout_rounds(hosts, [False] * 8)
    assert rounds == [
        {"h1": ""},
        {"h2": "h1"},
        {"h3": "h1", "h4": "h2"},
        {"h5": "h1", "h6": "h2", "h7": "h3", "h8": "h4"},
    ]
    assert len(model_fanout.fanout_rounds([f"h{i}" for i in range(64)], [False] * 64)) == 7  # log2(64) + 1
    assert model_fanout.fanout_rounds(["a", "b", "c"], [False, True, False]) == [{"a": "b"}, {"c": "b"}]
    assert model_fanout.fanout_rounds(["a", "b"], [True, True]) == []


@needs_playbook
def test_the_model_role_reads_no_lock_that_links_out_of_the_locks_folder(tmp_path):
    """A lock that was a link to a file outside models/ (git keeps links) was loaded, and the load task showed its
    values (the json callback, -v)."""
    models = tmp_path / "models"
    models.mkdir()
    secret = tmp_path / "credentials.yml"
    secret.write_text("token: hunter2-SECRET-LINE\n")
    (models / "linked.lock.yml").symlink_to(secret)
    role = {"name": "sglang_model"}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [{"ansible.builtin.include_role": role}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    out, _ = run_playbook(
        ["-i", "localhost,", "-c", "local", "--check", "play.yml", "-e", f"sglang_model_locks_dir={models}"]
        + ["-e", "sglang_model_lock=linked", "-e", "sglang_model_path=/srv/models/linked"],
        tmp_path,
        {"ANSIBLE_ROLES_PATH": str(REPO / "roles")},
    )
    assert "hunter2-SECRET-LINE" not in out.stdout + out.stderr
    assert "is a link to a file outside it: model locks are read only there" in out.stdout


def test_a_new_checkpoint_is_a_reason_for_the_server_to_restart():
    """The server role's restart check (apply and the fleet's decision) reads the stamp the model role writes with a
    checkpoint it put in place: a new checkpoint under a running server restarts it (issue 24)."""
    server_vars = yaml.safe_load((REPO / "roles/sglang_server/vars/main.yml").read_text())
    assert "{{ sglang_model_path }}/" + model.STAMP in server_vars["__sglang_server_restart_paths"]
    for tasks in ("apply.yml", "fleet_due.yml"):
        due = [
            t
            for t in yaml.safe_load((REPO / "roles/sglang_server/tasks" / tasks).read_text())
            if "sglang.deploy.sglang_restart_due" in t
        ]
        assert [t["sglang.deploy.sglang_restart_due"]["paths"] for t in due] == [
            "{{ __sglang_server_restart_paths }}"
        ], tasks
