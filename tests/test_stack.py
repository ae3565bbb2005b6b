"""Stack bundle rules (plugins/module_utils/stack.py) on the shipped bundles and on made-up wheelhouses; the prune of old
venvs (plugins/modules/sglang_stack_prune.py) against real processes that hold a venv's files."""

from __future__ import annotations  # noqa: I001 (emulator_proc must come before the modules)

import copy
import hashlib
import os
import subprocess
import sys
import time

import pytest
import yaml
from emulator_proc import run_module  # first: puts the repo's module_utils on the import path

import sglang_stack_prune
from ansible_collections.sglang.deploy.plugins.module_utils import stack, stack_prune, wheel_fetch
from sglang_deploy.paths import STACKS


def load(name: str) -> dict:
    return yaml.safe_load((STACKS / f"{name}.yml").read_text())


def test_stable_bundle_is_complete():
    assert stack.validate(load("stable-0.5.23")) == []
    assert load("stable-0.5.23-2026-11-30")["locked_from"] == "stable-0.5.23"


def test_operator_bundle_needs_its_unknown_commit():
    bundle = load("operator-2026-03")
    errors = stack.validate(bundle)
    assert len(errors) == 1 and errors[0].startswith("sglang.commit")
    bundle["sglang"]["commit"] = "a" * 40
    assert stack.validate(bundle) == []
    assert (
        stack.sglang_requirement(bundle)
        == f"sglang @ git+https://github.com/sgl-project/sglang@{'a' * 40}#subdirectory=python"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "Bad Name"}, "name"),
        ({"sglang": {}}, "exactly one"),
        ({"sglang": {"version": "1", "git": "x"}}, "exactly one"),
        ({"torch": {}}, "torch.version"),
        ({"extra_packages": "x"}, "extra_packages"),
    ],
)
def test_validate_names_the_problem(change, message):
    bundle = {**load("stable-0.5.23"), **change}
    assert any(message in error for error in stack.validate(bundle))


def test_bundle_id_follows_content_not_order_or_description():
    bundle = load("stable-0.5.23")
    reordered = dict(reversed(list(bundle.items())))
    assert stack.bundle_id(bundle) == stack.bundle_id(reordered)
    assert stack.bundle_id({**bundle, "description": "other"}) == stack.bundle_id(bundle)
    changed = copy.deepcopy(bundle)
    changed["torch"]["version"] = "2.14.0"
    assert stack.bundle_id(changed) != stack.bundle_id(bundle)
    assert stack.venv_name(bundle) == f"stable-0.5.23-{stack.bundle_id(bundle)}"
    assert len(stack.bundle_id(bundle)) == stack.HASH_LENGTH


def test_stable_bundle_resolves_in_one_pip_run():
    (step,) = stack.pip_steps(load("stable-0.5.23"))
    assert step[0] == "install" and "--extra-index-url" not in step
    assert {"torch==2.14.1", "flashinfer-python==0.7.2", "sglang==0.5.23"} <= set(step)


def test_override_pins_installs_torch_and_flashinfer_after_sglang():
    bundle = load("operator-2026-03")
    bundle["sglang"]["commit"] = "b" * 40
    first, second = stack.pip_steps(bundle)
    assert any(arg.startswith("sglang @ git+") for arg in first) and "torch==2.12.0.dev20260307+cu130" not in first
    assert "torch==2.12.0.dev20260307+cu130" in second and "flashinfer-python==0.6.5" in second
    assert second[second.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/nightly/cu130"
    assert second.count("--extra-index-url") == 1


def test_the_default_bundle_is_locked_and_its_lock_matches():
    bundle = load("stable-0.5.23-2026-11-30")
    lock = yaml.safe_load((STACKS / bundle["lock"]["file"]).read_text())
    assert stack.validate(bundle) == [] and stack.check_lock(bundle, lock) == []
    assert len(lock["packages"]) > 150 and all(
        len(entry["sha256"]) == 64 and entry["file"].endswith(".whl") for entry in lock["packages"]
    )
    versions = {entry["name"]: entry["version"] for entry in lock["packages"]}
    assert (versions["torch"], versions["flashinfer-python"], versions["sglang"]) == ("2.14.1", "0.7.2", "0.5.23")
    assert [entry["name"] for entry in lock["installer"]] == ["uv"]


def test_an_edited_lock_or_another_bundles_lock_is_refused():
    bundle = load("stable-0.5.23-2026-11-30")
    lock = yaml.safe_load((STACKS / bundle["lock"]["file"]).read_text())
    edited = copy.deepcopy(lock)
    edited["packages"][0]["sha256"] = "0" * 64
    assert "does not match the id" in stack.check_lock(bundle, edited)[0]
    assert "missing or not a lock" in stack.check_lock(bundle, None)[0]
    assert stack.check_lock(load("stable-0.5.23"), None) == []  # no lock key: nothing to check


def wheel(folder, name: str, body: bytes = b"x") -> dict:
    (folder / name).write_bytes(body)
    return {
        "name": name.split("-")[0],
        "version": name.split("-")[1],
        "file": name,
        "sha256": hashlib.sha256(body).hexdigest(),
    }


def test_wheelhouse_problems_name_missing_and_altered_files(tmp_path):
    good = wheel(tmp_path, "idna-3.20-py3-none-any.whl", b"idna")
    altered = wheel(tmp_path, "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl", b"torch")
    (tmp_path / altered["file"]).write_bytes(b"torch!")
    missing = {**good, "file": "six-1.17.0-py2.py3-none-any.whl"}
    problems = wheel_fetch.wheelhouse_problems(str(tmp_path), [good, altered, missing])
    assert len(problems) == 2
    assert problems[0].startswith(altered["file"] + ": sha256 ") and "altered" in problems[0]
    assert problems[1] == f"six-1.17.0-py2.py3-none-any.whl: missing from {tmp_path}"


def test_the_offline_install_needs_every_hash_and_no_index(tmp_path):
    entry = wheel(tmp_path, "idna-3.20-py3-none-any.whl", b"idna")
    text = stack.requirements_text({"packages": [entry]}, "/var/cache/w")
    assert text == f"/var/cache/w/idna-3.20-py3-none-any.whl --hash=sha256:{entry['sha256']}\n"
    for installer in ("uv", "pip"):
        argv = stack.install_argv(installer, "/opt/sglang/venvs/x", "/r.txt", "/opt/uv/bin/uv")
        assert {"--no-index", "--no-deps", "--require-hashes"} <= set(argv) and argv[-2:] == ["-r", "/r.txt"]
    assert stack.install_argv("uv", "/v", "/r", "/uv")[:5] == ["/uv", "pip", "install", "--no-config", "--python"]
    assert stack.INSTALL_ENV == {"PIP_CONFIG_FILE": os.devnull}


def test_package_drift_per_package():
    lock = {
        "packages": [
            {"name": "torch", "version": "2.14.1"},
            {"name": "Flashinfer_Python", "version": "0.7.2"},
            {"name": "idna", "version": "3.20"},
        ]
    }
    installed = {"torch": "2.14.0", "flashinfer-python": "0.7.2", "six": "1.17.0", "pip": "25.0"}
    assert stack.package_drift(lock, installed) == [
        "idna: not installed, lock 3.20",
        "six: installed 1.17.0, not in the lock",
        "torch: installed 2.14.0, lock 2.14.1",
    ]


def test_drift_names_each_difference():
    bundle = load("stable-0.5.23")
    manifest = {
        "bundle": "stable-0.5.23",
        "bundle_id": stack.bundle_id(bundle),
        "versions": {"torch": "2.14.1+cu130", "flashinfer": "0.7.2", "sglang": "0.5.23"},
    }
    assert stack.drift(bundle, manifest) == []  # torch.__version__ carries the +cu130 local tag
    manifest["versions"]["torch"] = "2.13.0"
    manifest["bundle_id"] = "0" * 12
    found = stack.drift(bundle, manifest)
    assert len(found) == 2 and found[1] == "torch: installed 2.13.0, bundle 2.14.1"
    assert stack.drift(bundle, {})[0].startswith("no stack installed")


@pytest.mark.parametrize(
    ("installed", "pin", "ok"),
    [
        ("2.14.1+cu130", "2.14.1", True),
        ("2.14.1", "2.14.1", True),
        ("2.12.0.dev20260307+cu130", "2.12.0.dev20260307+cu130", True),
        ("2.12.0.dev20260307+cu129", "2.12.0.dev20260307+cu130", False),
        ("2.14.10", "2.14.1", False),
        (None, "2.14.1", False),
    ],
)
def test_version_matches_like_a_pip_pin(installed, pin, ok):
    assert stack.version_matches(installed, pin) is ok


def venvs(root, *names):
    """Venv folders under root/venvs, oldest first (mtimes 100 s apart), each with one file."""
    folder = root / "venvs"
    for age, name in enumerate(reversed(names)):
        (folder / name).mkdir(parents=True)
        (folder / name / "pyvenv.cfg").write_text("home = /usr/bin\n")
        os.utime(folder / name, (time.time() - age * 100, time.time() - age * 100))
    return folder


def test_prune_keeps_serving_rollback_newest_others_and_held_venvs(tmp_path):
    folder = venvs(tmp_path, "old3", "old2", "old1", "previous", "lastgood", "new", ".old0.removing")
    (folder / "stray-file").write_text("")
    plan = stack_prune.prune_plan(str(folder), "new", ["lastgood", "previous"], 2, {})
    assert plan["kept"] == {"new": "serving", "lastgood": "rollback"}
    assert plan["remove"] == sorted(str(folder / n) for n in [".old0.removing", "old1", "old2", "old3", "previous"])
    # keep 4: the two newest others; a hidden leftover never counts
    plan = stack_prune.prune_plan(str(folder), "new", ["lastgood"], 4, {})
    assert list(plan["kept"]) == ["new", "lastgood", "previous", "old1"]
    # the last good venv is gone or is the serving one: the previous link target is the rollback
    assert stack_prune.prune_plan(str(folder), "new", ["gone", "previous"], 2, {})["kept"] == {
        "new": "serving",
        "previous": "rollback",
    }
    assert list(stack_prune.prune_plan(str(folder), "lastgood", ["lastgood", "previous"], 2, {})["kept"]) == [
        "lastgood",
        "previous",
    ]
    # not built yet (check mode): the serving venv still takes its place
    assert list(stack_prune.prune_plan(str(folder), "newer", ["new"], 2, {})["kept"]) == ["new"]
    # a venv a process holds is kept whatever keep says, hidden or not
    held = {"old3": "pid 7 (python)", ".old0.removing": "pid 8 (sh)"}
    plan = stack_prune.prune_plan(str(folder), "new", ["lastgood"], 2, held)
    assert plan["kept"]["old3"] == "in use by pid 7 (python)" and ".old0.removing" in plan["kept"]
    assert plan["remove"] == sorted(str(folder / n) for n in ["old1", "old2", "previous"])
    assert stack_prune.prune_plan(str(tmp_path / "absent"), "new", [], 2, {}) == {"kept": {}, "remove": []}


@pytest.fixture
def holders(tmp_path):
    """Real processes that hold a venv file: one maps it (as a server maps torch's libraries), one keeps it open."""
    folder = venvs(tmp_path, "mapped", "opened", "idle")
    (folder / "mapped" / "libtorch.so").write_bytes(b"\0" * 4096)
    # 600 s: the hold outlasts the test however slow the machine (the fixture kills them at its end)
    hold = "import mmap, sys, time; f = open(sys.argv[1], 'rb'); {} print('ok', flush=True); time.sleep(600)"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", hold.format(code), str(folder / name / file)], stdout=subprocess.PIPE, text=True
        )
        for name, file, code in [
            ("mapped", "libtorch.so", "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); f.close();"),
            ("opened", "pyvenv.cfg", ""),
        ]
    ]
    for proc in procs:
        assert proc.stdout.readline() == "ok\n"
    yield folder, procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_venvs_in_use_reads_every_process_maps_and_open_files(holders):
    folder, procs = holders
    held = stack_prune.venvs_in_use(str(folder))
    assert set(held) == {"mapped", "opened"}
    assert held["mapped"].startswith(f"pid {procs[0].pid} (") and held["opened"].startswith(f"pid {procs[1].pid} (")


def test_prune_module_lists_in_check_mode_then_removes_and_keeps_held_venvs(holders, tmp_path, capsys):
    folder, procs = holders
    root = folder.parent
    venvs(root, "previous", "serving")
    house = tmp_path / "wheelhouse"
    (house / "sglang-abc").mkdir(parents=True)
    names = ["a-1-py3-none-any.whl", "sglang-abc/sglang-1-py3-none-any.whl", "old-1-py3-none-any.whl"]
    for name in names:
        (house / name).write_bytes(b"w")
    lock = {"packages": [{"file": name, "sha256": "0" * 64} for name in names[:1]]}
    (folder / "serving" / "requirements.lock.txt").write_text(stack.requirements_text(lock, str(house)))
    (folder / "previous" / "requirements.lock.txt").write_text(
        stack.requirements_text({"packages": [{"file": names[1], "sha256": "1" * 64}]}, str(house))
    )
    args = {"root": str(root), "serving": str(folder / "serving"), "rollback": ["", "venvs/previous"]}
    args["wheelhouse"] = str(house)
    failed, res = run_module(sglang_stack_prune, args | {"_ansible_check_mode": True, "_ansible_diff": True}, capsys)
    assert not failed and res["changed"]
    assert [os.path.basename(item["path"]) for item in res["removed"]] == ["idle"]
    assert res["wheels_removed"] == [str(house / names[2])]
    assert res["kept"]["serving"] == "serving" and res["kept"]["previous"] == "rollback"
    assert res["kept"]["mapped"].startswith(f"in use by pid {procs[0].pid} ")
    assert "idle\n" in res["diff"]["before"] and "idle" not in res["diff"]["after"]
    assert (folder / "idle").is_dir() and (house / names[2]).is_file()

    failed, res = run_module(sglang_stack_prune, args, capsys)
    assert not failed and res["changed"] and res["bytes_freed"] == len("home = /usr/bin\n") + 1
    assert sorted(os.listdir(folder)) == ["mapped", "opened", "previous", "serving"]
    assert sorted(p.name for p in house.rglob("*.whl")) == ["a-1-py3-none-any.whl", "sglang-1-py3-none-any.whl"]
    failed, res = run_module(sglang_stack_prune, args, capsys)
    assert not failed and not res["changed"]
    # the server stopped: its venv goes; keep below 1 is refused
    for proc in procs:
        proc.kill()
        proc.wait()
    failed, res = run_module(sglang_stack_prune, args, capsys)
    assert sorted(os.listdir(folder)) == ["previous", "serving"]
    failed, res = run_module(sglang_stack_prune, args | {"keep": 0}, capsys)
    assert failed and "set sglang_stack_keep >= 1" in res["msg"]


def test_requirements_name_the_wheels_a_venv_was_installed_from(tmp_path):
    lock = {
        "packages": [
            {"file": "a-1-py3-none-any.whl", "sha256": "0" * 64},
            {"file": "s-c/s-1-py3-none-any.whl", "sha256": "1" * 64},
        ]
    }
    req = tmp_path / "requirements.lock.txt"
    req.write_text(stack.requirements_text(lock, "/var/cache/w"))
    assert stack_prune.requirements_wheels([str(req), str(tmp_path / "none.txt")], "/var/cache/w") == {
        "a-1-py3-none-any.whl",
        "s-c/s-1-py3-none-any.whl",
    }
