"""Role variables: defaults and argument_specs agree, and each role's README documents them as generated."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_json import run_playbook

REPO = Path(__file__).resolve().parents[1]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists())


def default_files(role: str) -> list[Path]:
    """The role's defaults: defaults/main.yml, or every file of the folder defaults/main/ (Ansible reads either)."""
    folder = REPO / "roles" / role / "defaults"
    return [folder / "main.yml"] if (folder / "main.yml").exists() else sorted((folder / "main").glob("*.yml"))


def role_defaults(role: str) -> dict:
    return {k: v for path in default_files(role) for k, v in (yaml.safe_load(path.read_text()) or {}).items()}


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_specified(role):
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"].get("main", {}).get("options", {})  # a role of entry points only has no main
    defaults = role_defaults(role)
    assert sorted(set(defaults) - set(options)) == [], "defaults without an argument spec"
    for name, value in defaults.items():
        assert name.startswith(f"{role}_"), f"{name} lacks the role prefix"
        if "default" in options[name] and not (isinstance(value, str) and "{{" in value):
            assert options[name]["default"] == value, f"{name}: spec default differs from defaults/main.yml"


def test_every_role_readme_has_its_variables_generated_from_the_specs():
    """tools/role_docs.py --check: every role has a README whose variable tables match meta/argument_specs.yml."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "role_docs.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("role", ROLES)
def test_role_defaults_do_not_reach_outside_the_role_by_relative_path(role):
    text = "".join(path.read_text() for path in default_files(role))
    assert not re.search(r"(role_path|playbook_dir)\W+[^\n]*\.\./", text)


def test_role_defaults_name_the_project_folders_wherever_the_playbook_is(tmp_path):
    """sglang_project_path (plugins/filter/sglang_project.py) points the defaults at the project, not at paths
    relative to the playbook: a playbook outside the project gets the project's stacks/ and results/."""
    playbook = tmp_path / "elsewhere.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.debug": {
                                "msg": "{{ sglang_stack_bundles_dir }} {{ sglang_benchmark_results_dir }}"
                            }
                        },
                        {"ansible.builtin.import_role": {"name": "sglang_stack"}, "when": False},
                        {"ansible.builtin.import_role": {"name": "sglang_benchmark"}, "when": False},
                    ],
                }
            ]
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DEPLOY_RESULTS"}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    playbook_bin = Path(sys.executable).parent / "ansible-playbook"
    out = subprocess.run(
        [str(playbook_bin), "-i", "localhost,", "-c", "local", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-2000:]
    msg = json.loads(out.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert msg == f"{REPO / 'stacks'} {REPO / 'results'}"


def test_an_installed_collection_names_the_inventorys_folder_and_never_writes_through_a_link(tmp_path, monkeypatch):
    """Issue 48, R17: an installed collection read model locks and wrote results relative to the folder
    ansible-playbook ran from; now the defaults pass the inventory's folder (else the playbook's), and a fetched
    result is refused where the results folder, the host's folder or the file is a link."""
    from ansible.errors import AnsibleFilterError
    from ansible_collections.sglang.deploy.plugins.filter import sglang_project

    monkeypatch.setattr(sglang_project, "INSTALLED", True)
    monkeypatch.chdir(tmp_path)
    inventory = tmp_path / "project"
    assert sglang_project.project_path("results", str(inventory)) == str(inventory / "results")
    assert sglang_project.project_path("models", str(inventory)) == str(inventory / "models")
    assert sglang_project.project_path("stacks", str(inventory)) == str(sglang_project.ROOT / "stacks")
    base = "inventory_dir | default(playbook_dir)"
    for role, name, folder in (
        ("sglang_benchmark", "sglang_benchmark_results_dir", "results"),
        ("sglang_model", "sglang_model_locks_dir", "models"),
    ):
        assert f"'{folder}' | sglang.deploy.sglang_project_path({base})" in role_defaults(role)[name]
    sweep = (REPO / "roles" / "sglang_benchmark" / "tasks" / "sweep.yml").read_text()
    assert "| sglang.deploy.sglang_unlinked_dest(sglang_benchmark_results_dir) }}" in sweep

    results, elsewhere = tmp_path / "results", tmp_path / "elsewhere"
    elsewhere.mkdir()
    dest = str(results / "gpu-1" / "20261206-nextn.json")
    assert sglang_project.unlinked_dest(dest, str(results)) == dest  # nothing there yet: the fetch makes it
    (results / "gpu-1").mkdir(parents=True)
    (results / "gpu-1" / "20261206-nextn.json").symlink_to(elsewhere / "victim.json")
    with pytest.raises(AnsibleFilterError, match="20261206-nextn.json exists and is not a regular file"):
        sglang_project.unlinked_dest(dest, str(results))
    (results / "gpu-1" / "20261206-nextn.json").unlink()
    (results / "gpu-1").rmdir()
    (results / "gpu-1").symlink_to(elsewhere)
    with pytest.raises(AnsibleFilterError, match="gpu-1 is a link or not a folder.*never through a link"):
        sglang_project.unlinked_dest(dest, str(results))
    (results / "gpu-1").unlink()
    results.rmdir()
    results.symlink_to(elsewhere)
    with pytest.raises(AnsibleFilterError, match="results is a link or not a folder"):
        sglang_project.unlinked_dest(dest, str(results))
    assert list(elsewhere.iterdir()) == []


def test_the_stack_play_renders_the_profile_the_server_role_deploys(tmp_path):
    """playbooks/stack.yml checks the launch of sglang_server_profile (the role's default, or a host's own), not a
    default of its own. The host's facts say 1 GPU, so both possible renders fail at that task, before any change."""
    inventory = tmp_path / "hosts.yml"
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
        "sglang_server_profile": "no-such-profile",
        "sglang_profile_facts": {"gpu_count": 1},
    }
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": host}}}))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    playbook_bin = Path(sys.executable).parent / "ansible-playbook"
    out = subprocess.run(
        [str(playbook_bin), "-i", str(inventory), str(REPO / "playbooks" / "stack.yml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
    )
    assert out.returncode != 0
    assert "Render the profile's launch" in out.stdout
    assert "unknown profile 'no-such-profile'" in out.stdout, out.stdout[-3000:]


SHARED = sorted(role_defaults("sglang"))  # the settings and profiles every role shares (roles/sglang)


@pytest.mark.parametrize("role", [r for r in ROLES if r != "sglang"])
def test_a_role_that_reads_the_shared_settings_depends_on_the_sglang_role(role):
    """Its defaults reach a play only through the roles it runs: a role that reads one without the dependency breaks
    in a playbook of a user's (no project group_vars there)."""
    folder = REPO / "roles" / role
    text = "".join(
        p.read_text()
        for sub in ("tasks", "vars", "defaults", "templates", "handlers")
        for p in sorted((folder / sub).rglob("*"))
        if p.is_file()
    )
    # A variable, not a local fact of that name (ansible_local.sglang_host, facts.d/sglang_host.fact).
    reads = [name for name in SHARED if re.search(rf"(?<![\w./]){name}\b(?!\.fact)", text)]
    depends = yaml.safe_load((folder / "meta" / "main.yml").read_text())["dependencies"]
    assert ("sglang" in depends) == bool(reads), f"{role} reads {reads}, depends on {depends}"


def test_the_shared_settings_reach_a_users_playbook_below_the_inventory_and_extra_vars(tmp_path):
    """A playbook outside the project that runs a role of the collection (sglang.deploy.sglang_server, found through
    the checkout's collections/ link, not roles/) gets the sglang role's defaults, and every inventory level beats
    them: the inventory file's group vars, group_vars/all.yml beside it, a host's variables; -e beats all."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("sglang_port: 31000\n")
    inventory = {
        "all": {
            "vars": {"sglang_served_model_name": "from-the-inventory-file"},
            "hosts": {"localhost": {"ansible_connection": "local", "sglang_tp": 4}},
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    names = ["sglang_served_model_name", "sglang_port", "sglang_tp", "sglang_model_path", "sglang_dist_timeout"]
    play = {
        "hosts": "localhost",
        "gather_facts": False,
        "roles": [{"role": "sglang.deploy.sglang_server", "when": False}],
        "tasks": [{"ansible.builtin.debug": {"msg": {n: f"{{{{ {n} }}}}" for n in names + ["sglang_profiles"]}}}],
    }
    (tmp_path / "play.yml").write_text(yaml.safe_dump([play]))
    args = ["-i", "inventory.yml", "play.yml", "-e", "sglang_model_path=/from/extra-vars"]
    out, doc = run_playbook(args, tmp_path, {"ANSIBLE_ROLES_PATH": str(tmp_path / "no-roles")})
    assert out.returncode == 0, out.stdout[-3000:]
    msg = doc["plays"][0]["tasks"][-1]["hosts"]["localhost"]["msg"]
    assert [msg[n] for n in names] == ["from-the-inventory-file", 31000, 4, "/from/extra-vars", 600]
    assert msg["sglang_profiles"] == role_defaults("sglang")["sglang_profiles"]
