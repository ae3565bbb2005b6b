"""A stack bundle layered on an image's preinstalled torch (`base`, issue 26 item 2): validation, the lock from a
folder of wheels, the offline install's arguments, and the sglang_stack role's real run on this machine with a
stand-in image (a venv holding torch and a tool) and stand-in sglang and flashinfer wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from ansible_json import REPO, needs_playbook, run_playbook

from sglang_deploy.locks import stack_lock
from ansible_collections.sglang.deploy.plugins.module_utils import stack, wheel_fetch

LAYERED = yaml.safe_load((REPO / "stacks" / "h200-image-torch-0.5.16.yml").read_text())


def layered(**changes) -> dict:
    return {**LAYERED, **changes}


@pytest.mark.parametrize(
    "base",
    [
        {"python": "python3"},  # not absolute: PATH decides
        {"python": "/opt/../tmp/x"},
        {"python": "/opt/-x/python"},
        {"python": "/opt/torch/bin/python\n"},
        {"python": "/opt/torch python"},
        "/opt/torch/.venv/bin/python",  # not a mapping
        {},
    ],
)
def test_a_base_that_is_not_an_absolute_interpreter_path_is_refused(base):
    assert stack.validate(layered(base=base)) == [
        "base.python: the absolute path of the image's interpreter, such as /opt/torch/.venv/bin/python"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="changes owners: run as root (CI does)")
def test_a_base_interpreter_another_user_can_change_is_refused(tmp_path):
    """The role runs base.python as root: it, its link target and every folder above them must be root's alone (a
    sticky folder such as /tmp excepted)."""
    from ansible_collections.sglang.deploy.plugins.module_utils import stack as host_stack

    image = tmp_path / "image" / "bin"
    image.mkdir(parents=True)
    python = image / "python"
    python.symlink_to(sys.executable)
    os.chmod(tmp_path / "image", 0o755)
    assert host_stack.base_python_problems(str(python)) == []
    os.chmod(image, 0o777)
    [problem] = host_stack.base_python_problems(str(python))
    assert (
        problem.startswith(f"base.python: {python} is not root's alone") and f"{image} (uid 0, mode 0o777)" in problem
    )
    os.chmod(image, 0o755)
    os.chown(tmp_path / "image", 65534, -1)
    assert "(uid 65534," in host_stack.base_python_problems(str(python))[0]
    assert host_stack.base_python_problems(str(tmp_path / "none")) == [
        f"base.python: {tmp_path / 'none'} is not on this host"
    ]


def test_the_shipped_layered_bundle_is_valid_and_installs_only_from_a_lock():
    assert stack.validate(LAYERED) == []
    assert stack.layered_lock_problems(LAYERED) == [
        "base: a bundle layered on an image's Python installs only from a lock; lock it from the folder of the wheels "
        "the image lacks: sglang-deploy stack lock h200-image-torch-0.5.16 --wheels DIR"
    ]
    assert stack.layered_lock_problems({**LAYERED, "lock": {"file": "x.lock.yml", "id": "0"}}) == []


def test_a_layered_install_uses_the_images_pip_and_ignores_what_the_image_holds():
    argv = stack.install_argv("uv", "/opt/sglang/venvs/v", "/opt/sglang/venvs/v/req.txt", "/uv", layered=True)
    assert argv[:3] == ["/opt/sglang/venvs/v/bin/python", "-m", "pip"]
    assert argv[-6:] == [
        "--no-index",
        "--no-deps",
        "--require-hashes",
        "-r",
        "/opt/sglang/venvs/v/req.txt",
        "--ignore-installed",
    ]
    assert "--ignore-installed" not in stack.install_argv("pip", "/v", "/r")


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel pip installs (no RECORD hashes needed)."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for rel, text in files.items():
            whl.writestr(rel, text)
        whl.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(
            f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        whl.writestr(f"{dist}.dist-info/RECORD", "")
    return path


@pytest.fixture
def wheels(tmp_path) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_wheel(folder, "sglang", "0.5.16", {"sglang/__init__.py": "WHERE = __file__\n"})
    make_wheel(folder, "flashinfer-python", "0.6.14", {"flashinfer/__init__.py": ""})
    return folder


def test_lock_wheels_hashes_every_wheel_and_the_lock_checks(wheels, tmp_path):
    result = stack_lock.lock_wheels(LAYERED, wheels, tmp_path, name="h200-image-torch-0.5.16-2026-12-01")
    assert [(e["name"], e["sha256_from"], e["url"]) for e in result.lock["packages"]] == [
        ("flashinfer-python", "wheelhouse", None),
        ("sglang", "wheelhouse", None),
    ]
    assert result.bundle["base"] == LAYERED["base"] and result.lock["installer"] == []
    loaded = yaml.safe_load(result.bundle_file.read_text())
    assert stack.validate(loaded) == [] and stack.check_lock(loaded, yaml.safe_load(result.lock_file.read_text())) == []
    assert wheel_fetch.wheelhouse_problems(str(wheels), result.lock["packages"]) == []


def test_lock_wheels_refuses_another_sglang_a_torch_and_a_bundle_without_base(wheels, tmp_path):
    make_wheel(wheels, "torch", "2.11.0", {"torch/__init__.py": ""})
    with pytest.raises(stack_lock.LockError, match="take torch out of"):
        stack_lock.lock_wheels(LAYERED, wheels, tmp_path)
    with pytest.raises(stack_lock.LockError, match="sglang: the bundle wants 0.5.17, .* holds 0.5.16"):
        stack_lock.lock_wheels(layered(sglang={"version": "0.5.17"}), wheels, tmp_path)
    bundle = {key: value for key, value in LAYERED.items() if key != "base"}
    with pytest.raises(stack_lock.LockError, match="has no base"):
        stack_lock.lock_wheels(bundle, wheels, tmp_path)


def test_lock_wheels_refuses_a_link_and_a_name_that_is_no_wheels(wheels, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = x\n")
    (wheels / "foo-1.0-py3-none-any.whl").symlink_to(secret)
    with pytest.raises(stack_lock.LockError, match="foo-1.0-py3-none-any.whl is not a plain file"):
        stack_lock.lock_wheels(LAYERED, wheels, tmp_path)
    (wheels / "foo-1.0-py3-none-any.whl").unlink()
    (wheels / "not-a-wheel.whl").write_bytes(b"x")
    with pytest.raises(stack_lock.LockError, match="not-a-wheel.whl is not a wheel's file name"):
        stack_lock.lock_wheels(LAYERED, wheels, tmp_path)


@pytest.fixture
def image(tmp_path) -> Path:
    """A stand-in image: a venv (with pip) that holds torch and a tool in its bin/, as /opt/torch/.venv does."""
    base = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", str(base)], check=True)
    site = subprocess.run(
        [base / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "torch").mkdir()
    (Path(site) / "torch" / "__init__.py").write_text("from . import version\n__version__ = '2.11.0+cu130'\n")
    (Path(site) / "torch" / "version.py").write_text("cuda = '13.0'\n")
    ninja = base / "bin" / "ninja"
    ninja.write_text("#!/bin/sh\necho 1.13.2\n")
    ninja.chmod(0o755)
    return base


@needs_playbook
def test_the_role_layers_a_venv_on_the_image_and_a_rerun_changes_nothing(wheels, image, tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    bundle = layered(base={"python": str(image / "bin" / "python")})
    result = stack_lock.lock_wheels(bundle, wheels, stacks, name="layered-test")
    root = tmp_path / "opt-sglang"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"ansible.builtin.include_role": {"name": "sglang_stack"}}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    args = ["-i", "localhost,", "-c", "local", "play.yml", "-e", f"ansible_python_interpreter={sys.executable}"]
    for key, value in {
        "sglang_stack_bundles_dir": stacks,
        "sglang_stack_bundle": "layered-test",
        "sglang_stack_root": root,
        "sglang_stack_wheelhouse": wheels,
        "sglang_stack_host_wheelhouse": tmp_path / "host-wheelhouse",
        "_sglang_stack_fact_file": tmp_path / "facts.d" / "sglang_stack.fact",
    }.items():
        args += ["-e", f"{key}={value}"]
    env = {"ANSIBLE_ROLES_PATH": str(REPO / "roles")}
    out, doc = run_playbook(args, tmp_path, env)
    assert doc["stats"]["localhost"]["failures"] == 0, out.stdout[-4000:]
    venv = root / "venv"
    assert os.path.realpath(venv) == str(root / "venvs" / stack.venv_name(result.bundle))
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import sglang, torch; print(sglang.WHERE); print(torch.__file__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert where[0].startswith(f"{venv}/lib/") and where[1].startswith(f"{image}/lib/")
    assert os.readlink(venv / "bin" / "ninja") == str(image / "bin" / "ninja")
    assert not (venv / "bin" / "pip").exists()  # the image's pip would install into the image
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["versions"]["torch"] == "2.11.0+cu130" and manifest["base"] == bundle["base"]
    assert sorted(manifest["packages"]) == ["flashinfer-python", "sglang"] and manifest["installed_with"] == "pip"
    out, doc = run_playbook(args, tmp_path, env)
    assert doc["stats"]["localhost"]["changed"] == 0, out.stdout[-4000:]


def test_stack_lock_takes_wheels_only_for_a_layered_bundle(wheels, tmp_path, capsys):
    from sglang_deploy.cli import main

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("h200-image-torch-0.5.16", "stable-0.5.23"):
        (stacks / f"{name}.yml").write_text((REPO / "stacks" / f"{name}.yml").read_text())
    assert main(["stack", "lock", "stable-0.5.23", "--stacks-dir", str(stacks), "--wheels", str(wheels)]) == 2
    assert "leave --wheels out" in capsys.readouterr().err
    assert main(["stack", "lock", "h200-image-torch-0.5.16", "--stacks-dir", str(stacks)]) == 2
    assert "give the folder of the wheels the image lacks" in capsys.readouterr().err
    lock = ["stack", "lock", "h200-image-torch-0.5.16", "--stacks-dir", str(stacks), "--wheels", str(wheels)]
    assert main(lock + ["--name", "layered-x"]) == 0
    printed = capsys.readouterr().out
    assert "from the wheel folder 2" in printed and f"-e sglang_stack_wheelhouse={wheels}" in printed
    assert (stacks / "layered-x.lock.yml").is_file()
