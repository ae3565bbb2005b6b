"""The collection sglang.deploy as plain `ansible-galaxy collection build` makes it at the repository's root (no lab
needed): what the tarball holds, its changelog, and the execution environment's definition (checked with
ansible-builder, which also reads the needs the installed collection declares). Its playbook run from outside the
repository with its declared requirement: tests/test_packaging.py; the lab deploy from the installed tarball:
tests/test_collection_lab.py."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

from sglang_deploy.paths import REPO


BIN = Path(sys.executable).parent


def test_the_tarball_is_the_collection_without_links_or_the_repository(plain_collection):
    tarball, _ = plain_collection
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert not [n for n, m in members.items() if m.issym() or m.islnk()]
    names = set(members)
    for expected in (
        "meta/runtime.yml",
        "playbooks/site.yml",
        "plugins/modules/sglang_bench.py",
        "plugins/module_utils/bench/workload.py",
        "roles/sglang/defaults/main/profiles.yml",
        "plugins/module_utils/launch.py",
        "tests/sanity/ignore-2.19.txt",
        "changelogs/changelog.yaml",
        "requirements.txt",
        "bindep.txt",
        "stacks/README.md",
        "LICENSE",
    ):
        assert expected in names, expected
    assert not [n for n in names if n.startswith(("src/", "results/", "roles/lab/", "tests/output", "collections/"))]
    assert not [n for n in names if n.startswith("tests/") and not n.startswith(("tests/sanity", "tests/unit"))]
    assert "playbooks/lab.yml" not in names


def test_the_licence_the_urls_and_the_sanity_ignores_agree_with_what_galaxy_yml_declares():
    """LICENSE holds the text of galaxy.yml's licence, which pyproject.toml names too; no placeholder URL; an
    ansible-test ignore file for every ansible-core release meta/runtime.yml admits, up to the installed one, with
    the same entries (issue 52, B)."""
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert galaxy["license"] == ["Apache-2.0"] and "license_file" not in galaxy
    assert (REPO / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()
    urls = [galaxy[key] for key in ("repository", "documentation", "homepage", "issues") if galaxy.get(key)]
    assert not [url for url in urls if "example" in url or "invalid" in url], urls
    required = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert required.startswith(">=2.") and "," not in required, required  # one lower bound, as read below
    from ansible.release import __version__ as installed

    low, high = int(required.split(".")[1]), int(installed.split(".")[1])
    entries = {(REPO / f"tests/sanity/ignore-2.{minor}.txt").read_text() for minor in range(low, high + 1)}
    assert len(entries) == 1


def test_the_plugins_need_only_ansible_and_the_declared_package(plain_collection):
    """Every module-level third-party import of the controller plugins is ansible-core's or the sglang_deploy package,
    which requirements.txt names (pip install sglang-deploy), and ansible-builder reads requirements.txt and bindep.txt
    from the installed collection."""
    _, folder = plain_collection
    root = folder / "ansible_collections" / "sglang" / "deploy"
    assert not (root / "vendor").exists() and not (root / "src").exists()
    third = set()
    for path in (root / "plugins").glob("[afl]*/*.py"):
        body = ast.parse(path.read_text()).body
        for node in body + [n for t in body if isinstance(t, ast.Try) for n in t.body]:
            if isinstance(node, ast.Import):
                third |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                third.add((node.module or "").split(".")[0])
    assert third - set(sys.stdlib_module_names) - {"__future__"} == {"ansible", "ansible_collections", "sglang_deploy"}
    required = [line for line in (REPO / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert required == ["sglang-deploy"]
    out = subprocess.run([BIN / "ansible-builder", "introspect", folder], capture_output=True, text=True, check=True)
    needs = yaml.safe_load(out.stdout[out.stdout.index("---") :])
    assert [r.split()[0] for r in needs["python"]] == ["sglang-deploy"]
    assert any(r.startswith("openssh-client") for r in needs["system"])


def test_the_execution_environment_installs_the_collection_and_its_needs(plain_collection, tmp_path):
    tarball, _ = plain_collection
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    (source,) = [f["src"] for f in ee["additional_build_files"] if f["src"].endswith(".tar.gz")]
    assert Path(source).name == tarball.name  # the version galaxy.yml builds
    assert ee["dependencies"]["python"] == "requirements.txt" and ee["dependencies"]["system"] == "bindep.txt"
    assert ee["dependencies"]["ansible_core"]["package_pip"].startswith("ansible-core==")
    (REPO / source).parent.mkdir(parents=True, exist_ok=True)
    if not (REPO / source).exists():
        (REPO / source).write_bytes(tarball.read_bytes())
    subprocess.run(
        [BIN / "ansible-builder", "create", "-f", REPO / "execution-environment.yml", "--context", tmp_path / "ctx"],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    build = tmp_path / "ctx" / "_build"
    assert (build / "collections" / tarball.name).is_file()
    assert (build / "requirements.txt").read_text() == (REPO / "requirements.txt").read_text()
    assert (build / "bindep.txt").read_text() == (REPO / "bindep.txt").read_text()


def test_the_changelog_lints():
    subprocess.run([BIN / "antsibull-changelog", "lint"], cwd=REPO, check=True)


spec = importlib.util.spec_from_file_location("collection_tool", REPO / "tools" / "collection.py")
collection = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collection)


def test_the_get_pip_stand_in_and_each_pip_conf_are_private(tmp_path, monkeypatch):
    """pip's settings (an index's credentials among them) go into 0600 files only (issue 48, R11)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(collection, "_pip_conf", lambda: "[global]\nindex-url = https://u:pw@index.example/simple\n")
    umask = os.umask(0o022)
    try:
        collection._get_pip_stand_in()
        (stand_in,) = (tmp_path / ".ansible" / "test" / "cache").glob("get_pip_*.py")
        venv, fake = tmp_path / "venv", tmp_path / "fake"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        fake.mkdir()
        (fake / "ensurepip.py").write_text("def bootstrap(**kwargs):\n    pass\n")  # no pip: the install fails
        subprocess.run([venv / "bin" / "python", stand_in], env={"PYTHONPATH": str(fake)}, capture_output=True)
    finally:
        os.umask(umask)
    assert stat.S_IMODE(stand_in.stat().st_mode) == 0o600
    assert stat.S_IMODE((venv / "pip.conf").stat().st_mode) == 0o600
    assert "u:pw@index.example" in (venv / "pip.conf").read_text()


def test_readme_says_why_ansible_galaxy_install_inside_the_clone_installs_nothing(tmp_path):
    """Issue 52, item 8: `ansible-galaxy collection install .` inside the clone installed nothing without a word of
    why: the clone's collections path (ansible.cfg) links sglang.deploy to the clone. The README quotes what it says."""
    linked = tmp_path / "collections" / "ansible_collections" / "sglang"
    linked.mkdir(parents=True)
    (linked / "deploy").symlink_to(REPO)  # what tools/fetch_collections.py makes under the clone's collections/
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections")}
    out = subprocess.run(
        [BIN / "ansible-galaxy", "collection", "install", ".", "-p", tmp_path / "elsewhere"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = "Nothing to do. All requested collections are already installed."
    assert said in out.stdout and not (tmp_path / "elsewhere" / "ansible_collections" / "sglang").exists()
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f'`ansible-galaxy collection install .` there answers "{said}"' in readme
    assert "`ansible-galaxy collection build`" in readme


def test_every_modules_documentation_is_yaml_that_names_its_options():
    """A quick form of ansible-test's validate-modules (the collection-sanity part): DOCUMENTATION, EXAMPLES and
    RETURN parse as YAML, and DOCUMENTATION names the module and has options (a ': ' in a plain description line
    once broke one, seen only by sanity)."""
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        docs = {
            node.targets[0].id: node.value.value
            for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.Assign)
            and getattr(node.targets[0], "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        }
        assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, path.name
        parsed = {key: yaml.safe_load(text) for key, text in docs.items()}
        assert parsed["DOCUMENTATION"]["module"] == path.stem and "options" in parsed["DOCUMENTATION"], path.name


def test_the_filters_are_loaded_before_the_workers_fork(tmp_path):
    """tools/vars_plugins/sglang_preload.py (ansible.cfg's vars_plugins) loads the collection's filter plugins in
    ansible-playbook's own process, so a task's worker finds them loaded; without it, each worker imports them again."""
    (tmp_path / "lookup_plugins").mkdir()
    (tmp_path / "lookup_plugins" / "loaded.py").write_text(
        "import sys\nfrom ansible.plugins.lookup import LookupBase\n\n\nclass LookupModule(LookupBase):\n"
        "    def run(self, terms, variables=None, **kwargs):\n        return [','.join(sorted(m.rsplit('.', 1)[1] for m"
        " in sys.modules if m.startswith('ansible_collections.sglang.deploy.plugins.filter.')))]\n"
    )
    play = (
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - debug: {msg: \"LOADED {{ lookup('loaded') }}\"}\n"
    )
    (tmp_path / "play.yml").write_text(play)
    filters = ",".join(sorted(p.stem for p in (REPO / "plugins" / "filter").glob("*.py")))

    def loaded(**env) -> str:
        run = [BIN / "ansible-playbook", "-i", "localhost,", "-c", "local", tmp_path / "play.yml"]
        env = {**os.environ, "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", **env}
        out = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, check=True)
        return next(line for line in out.stdout.splitlines() if "LOADED" in line).split("LOADED ")[1].strip('"')

    assert loaded() == filters
    assert loaded(ANSIBLE_VARS_PLUGINS=str(tmp_path / "none")) == ""


# A module that returns the word of its module_utils file probe_word.py.
PROBE_MODULE = (
    "from ansible.module_utils.basic import AnsibleModule\nfrom ansible.module_utils.probe_word import WORD\n\n"
    "AnsibleModule(argument_spec={}).exit_json(changed=False, word=WORD)\n"
)


def test_a_module_build_is_kept_between_runs_and_never_outlives_its_sources(tmp_path):
    """sglang_preload keeps Ansible's module builds (AnsiballZ) under XDG_CACHE_HOME between runs, in a folder named by
    everything that went in: a second run reads the build back, an edit of a module_utils file (the same size) is a
    new build (never the stale one), a build cut short is built again, and a cache that another user could change (a
    folder others may write above it, a link to their folder) is not used."""
    (tmp_path / "library").mkdir()
    (tmp_path / "module_utils").mkdir()
    (tmp_path / "library" / "probe.py").write_text(PROBE_MODULE)
    word = tmp_path / "module_utils" / "probe_word.py"
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - probe:\n      register: probed\n"
        '    - debug: {msg: "WORD {{ probed.word }}"}\n'
    )
    cache = tmp_path / "cache"
    builds = cache / "sglang-deploy" / "ansiballz"

    def probe() -> str:
        run = [BIN / "ansible-playbook", "-i", "localhost,", "-c", "local", play]
        env = {**os.environ, "XDG_CACHE_HOME": str(cache), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
        out = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, check=True)
        return next(line for line in out.stdout.splitlines() if "WORD" in line).split("WORD ")[1].strip('"')

    def pickles() -> dict:
        return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in builds.glob("*/ansiballz_cache/*probe*none")}

    word.write_text("WORD = 'one'\n")
    assert probe() == "one"
    kept = pickles()
    assert len(kept) == 1
    assert probe() == "one" and pickles() == kept  # read back, not built again
    word.write_text("WORD = 'two'\n")  # the same size
    assert probe() == "two" and len(pickles()) == 2
    for build in pickles():
        build.write_bytes(b"")  # a build cut short
    assert probe() == "two"
    shutil.rmtree(builds)
    (cache / "sglang-deploy").chmod(0o777)  # another user could swap the folder below it
    assert probe() == "two" and list(builds.iterdir()) == []
    (cache / "sglang-deploy").chmod(0o700)
    if os.geteuid() == 0:  # a link to a folder another user owns (as root: the cache root would load their pickles)
        shutil.rmtree(builds)
        (cache / "theirs").mkdir(mode=0o700)
        os.chown(cache / "theirs", 65534, 65534)
        builds.symlink_to(cache / "theirs")
        assert probe() == "two" and list(builds.iterdir()) == []


def test_a_module_of_an_included_role_is_never_a_stale_build(tmp_path):
    """An included role's module_utils folder joins Ansible's search path mid-run, after sglang_preload's digest:
    its modules are built in the run, as without the cache, so an edit of that folder is never met by an older build."""
    role = tmp_path / "roles" / "probe"
    for folder in ("library", "module_utils", "tasks"):
        (role / folder).mkdir(parents=True)
    (role / "library" / "probe.py").write_text(PROBE_MODULE)
    (role / "tasks" / "main.yml").write_text('- probe:\n  register: probed\n- debug: {msg: "WORD {{ probed.word }}"}\n')
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - include_role: {name: probe}\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    env["ANSIBLE_ROLES_PATH"] = str(tmp_path / "roles")
    for word in ("one", "two, edited"):
        (role / "module_utils" / "probe_word.py").write_text(f"WORD = {word!r}\n")
        run = [BIN / "ansible-playbook", "-i", "localhost,", "-c", "local", play]
        out = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
        assert f"WORD {word}" in out, out[-2000:]
