"""The collection as users get it: the tarball plain `ansible-galaxy collection build` makes, installed into a fresh
collections folder, with its declared requirement (requirements.txt: sglang-deploy, the wheel in a fresh venv),
deploys on the lab from a playbook and an inventory outside this repository (its roles by FQCN, and the collection's
playbook sglang.deploy.site), with none of the repository's files, ansible.cfg or group_vars in reach."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from outside import outside_env

from lab_host import LAB_HOST, lab_missing
from sglang_deploy.paths import REPO

pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_missing() is not None, reason=str(lab_missing()))]

INVENTORY = f"""all:
  children:
    gpu:
      hosts:
        {LAB_HOST}:
      vars:
        ansible_connection: community.docker.docker
        ansible_python_interpreter: /usr/bin/python3
        sglang_install_stack: false
"""
PLAYBOOK = """- name: Serve a launch profile with the collection's role
  hosts: gpu
  become: true
  roles:
    - role: sglang.deploy.sglang_server
      vars:
        sglang_server_profile: nextn
"""


def test_the_installed_tarball_deploys_from_a_playbook_outside_the_repository(plain_collection, wheel_venv, tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    collections = user / "collections"
    shutil.copytree(plain_collection[1], collections, symlinks=True)
    installed = collections / "ansible_collections" / "sglang" / "deploy"
    assert (installed / "MANIFEST.json").is_file() and not [p for p in installed.rglob("*") if p.is_symlink()]
    # The lab's connection plugin (community.docker) from the repository's third-party collections, not sglang.deploy.
    for namespace in ("community", "ansible"):
        (collections / "ansible_collections" / namespace).symlink_to(
            REPO / "collections" / "ansible_collections" / namespace
        )
    (user / "inventory.yml").write_text(INVENTORY)
    (user / "play.yml").write_text(PLAYBOOK)
    run_env = outside_env(
        wheel_venv, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_HOST_KEY_CHECKING="false", PY_COLORS="0"
    )

    def playbook(*args):
        r = subprocess.run(
            [wheel_venv / "bin" / "ansible-playbook", "-i", "inventory.yml", *args],
            cwd=user,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
        return r.stdout

    out = playbook("play.yml")
    assert "sglang.deploy.sglang_server : " in out
    out = playbook("sglang.deploy.site", "-e", "profile=nextn")
    # The benchmark's result lands where the user runs ansible-playbook, not inside the installed collection.
    (result,) = (user / "results" / LAB_HOST).glob("*-nextn.json")
    assert json.loads(result.read_text())["context"]["deployed"]["profile"] == "nextn"
    assert not (installed / "results").exists()
