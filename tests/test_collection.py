"""The collection sglang.deploy as tools/collection.py builds it (no lab needed): what the tarball holds, its
changelog, and the execution environment's definition (checked with ansible-builder, which also reads the needs the
installed collection declares). The lab deploy from the installed tarball: tests/test_collection_lab.py."""

from __future__ import annotations

import ast
import importlib.util
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from sglang_deploy.paths import REPO


BIN = Path(sys.executable).parent
# Import name -> the distribution requirements.txt names.
DISTRIBUTIONS = {"yaml": "PyYAML", "packaging": "packaging"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(tarball, installed collection folder), built into a folder of this test's own."""
    tmp = tmp_path_factory.mktemp("collection")
    env = {**os.environ, "SGLANG_DEPLOY_COLLECTION_BUILD": str(tmp / "build")}
    out = subprocess.run(
        [sys.executable, REPO / "tools" / "collection.py", "install", tmp / "c"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()), tmp / "c"


def test_the_tarball_is_the_collection_without_links_or_the_repository(installed):
    tarball, _ = installed
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
        "vendor/sglang_deploy/launch/profiles.py",
        "changelogs/changelog.yaml",
        "requirements.txt",
        "bindep.txt",
        "stacks/README.md",
        "roles/sglang_server/files/launch.py",
        "LICENSE",
    ):
        assert expected in names, expected
    assert not [n for n in names if n.startswith(("src/", "results/", "roles/lab/", "tests/output", "collections/"))]
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


def test_the_vendored_package_is_what_the_plugins_import_and_its_needs_are_declared(installed):
    """Every module-level third-party import of the vendored package and the plugins is ansible-core's or in
    requirements.txt (an import inside a function, e.g. matplotlib for the CLI's plots, is not reached by the
    plugins), and ansible-builder reads requirements.txt and bindep.txt from the installed collection."""
    _, folder = installed
    root = folder / "ansible_collections" / "sglang" / "deploy"
    third = set()
    for path in [*(root / "vendor").rglob("*.py"), *(root / "plugins").glob("[afl]*/*.py")]:
        body = ast.parse(path.read_text()).body
        for node in body + [n for t in body if isinstance(t, ast.Try) for n in t.body]:
            if isinstance(node, ast.Import):
                third |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                third.add((node.module or "").split(".")[0])
    third -= set(sys.stdlib_module_names) | {"ansible", "ansible_collections", "sglang_deploy", "__future__"}
    required = {
        line.split(">")[0].split("=")[0].strip()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {DISTRIBUTIONS.get(name, name) for name in third} <= required, third
    out = subprocess.run([BIN / "ansible-builder", "introspect", folder], capture_output=True, text=True, check=True)
    needs = yaml.safe_load(out.stdout[out.stdout.index("---") :])
    # ansible-builder leaves out what ansible-core itself brings (PyYAML).
    assert {r.split()[0].split(">")[0] for r in needs["python"]} == required - {"PyYAML"}
    assert any(r.startswith("openssh-client") for r in needs["system"])


def test_the_execution_environment_installs_the_collection_and_its_needs(installed, tmp_path):
    tarball, _ = installed
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

GALAXY = "namespace: sglang\nname: deploy\nversion: 1.0.0\n"


@pytest.fixture
def source(tmp_path, monkeypatch):
    """A small git repository as the collection's source (galaxy.yml, a module, a role, an action plugin importing the
    package, one data file), and the stage collection.py builds from it under tmp_path/work."""
    repo = tmp_path / "repo"
    files = {
        "galaxy.yml": GALAXY,
        "plugins/modules/m.py": "",
        "plugins/action/a.py": "from sglang_deploy import x\n",
        "roles/r/tasks/main.yml": "[]\n",
        "src/sglang_deploy/__init__.py": "",
        "src/sglang_deploy/x.py": "",
        "src/sglang_deploy/data/flags.json": "{}\n",
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "plugins/module_utils").symlink_to("../src/sglang_deploy")
    subprocess.run(["git", "init", "-q", repo], check=True)
    monkeypatch.setattr(collection, "REPO", repo)
    monkeypatch.setattr(collection, "PACKAGE", repo / "src" / "sglang_deploy")
    monkeypatch.setattr(collection, "WORK", tmp_path / "work")
    monkeypatch.setattr(collection, "STAGE", tmp_path / "work" / "ansible_collections" / "sglang" / "deploy")
    return repo


def track(repo: Path) -> None:
    subprocess.run(["git", "-C", repo, "add", "galaxy.yml", "plugins", "roles", "src"], check=True)


def test_the_stage_holds_tracked_files_only_with_links_inside_the_repository_resolved(source):
    """An untracked file (a vault password) stays out; a link inside the repository is copied as what it leads to
    (issue 48, R2)."""
    track(source)
    (source / "roles/r/.vault_pass").write_text("secret\n")
    (source / "src/sglang_deploy/data/local.json").write_text("{}\n")
    stage = collection.stage()
    found = {p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()}
    assert found == {
        "galaxy.yml",
        "plugins/modules/m.py",
        "plugins/action/a.py",
        "plugins/module_utils/__init__.py",
        "plugins/module_utils/x.py",
        "plugins/module_utils/data/flags.json",
        "roles/r/tasks/main.yml",
        "vendor/sglang_deploy/__init__.py",
        "vendor/sglang_deploy/x.py",
        "vendor/sglang_deploy/data/flags.json",
    }


def outside_file(repo: Path) -> str:
    (repo.parent / "key").write_text("PRIVATE KEY\n")
    return str(repo.parent / "key")


def outside_folder(repo: Path) -> str:
    (repo.parent / "ssh").mkdir()
    (repo.parent / "ssh" / "id").write_text("PRIVATE KEY\n")
    return str(repo.parent / "ssh")


def untracked(repo: Path) -> str:
    (repo / ".vault_pass").write_text("secret\n")
    return "../../../.vault_pass"


# Where a link in roles/r/files leads: (what makes it, the refusal); /dev/null stands for /dev/zero (endless).
LINKS = {
    "environ": (lambda repo: "/proc/self/environ", "leads to /proc/self/environ, outside the repository"),
    "device": (lambda repo: "/dev/null", "leads to /dev/null, outside the repository"),
    "key": (outside_file, "leads to .*/key, outside the repository"),
    "folder": (outside_folder, "leads to .*/ssh, outside the repository"),
    "untracked": (untracked, "leads to .vault_pass, which git does not track"),
    "loop": (lambda repo: "..", "is a link loop"),
    "self": (lambda repo: "x", "is a link that cannot be followed"),
}


@pytest.mark.parametrize("kind", LINKS)
def test_the_stage_refuses_a_link_out_of_the_repository_or_to_what_git_does_not_track(source, kind):
    make, refusal = LINKS[kind]
    (source / "roles/r/files").mkdir()
    (source / "roles/r/files/x").symlink_to(make(source))
    track(source)
    with pytest.raises(SystemExit, match=f"collection build: roles/r/files/x {refusal}"):
        collection.stage()


def staged(stage: Path) -> dict:
    return {p.relative_to(stage).as_posix(): p.read_bytes() for p in stage.rglob("*") if p.is_file()}


def hard_link(repo: Path, rel: str) -> None:
    (repo.parent / "token").write_text("hf_outsidesecret\n")
    (repo / rel).unlink()
    os.link(repo.parent / "token", repo / rel)


def sparse(repo: Path, rel: str) -> None:
    with (repo / rel).open("r+b") as handle:
        handle.truncate(8 << 20)


def fifo(repo: Path, rel: str) -> None:
    (repo / rel).unlink()
    os.mkfifo(repo / rel)


def relinked(repo: Path, rel: str) -> None:
    """The tracked link plugins/module_utils turned, in the work tree only, towards the build's environment."""
    (repo / "plugins/module_utils").unlink()
    (repo / "plugins/module_utils").symlink_to("/proc/self/environ")


# What becomes of a tracked file in the work tree after git add (issue 48, red-team of R2 and R18).
WORK_TREE = {"hard link": hard_link, "sparse": sparse, "fifo": fifo, "relinked link": relinked}


@pytest.mark.parametrize("kind", WORK_TREE)
def test_the_stage_ships_what_git_holds_not_the_work_tree_and_names_what_differs(source, kind, capsys):
    """A tracked file swapped for a hard link to an outside token, grown into a sparse file or a FIFO, or a tracked
    link turned elsewhere: the stage holds git's content, and the build names the file."""
    track(source)
    before = staged(collection.stage())
    WORK_TREE[kind](source, "roles/r/tasks/main.yml")
    capsys.readouterr()
    after = staged(collection.stage())
    assert after == before
    assert b"hf_outsidesecret" not in b"".join(after.values())
    changed = "plugins/module_utils" if kind == "relinked link" else "roles/r/tasks/main.yml"
    assert f"not as the work tree does: {changed}" in capsys.readouterr().err


def test_the_stage_refuses_a_collection_over_its_size_bound_naming_the_file(source, monkeypatch):
    monkeypatch.setattr(collection, "MAX_BYTES", 1000)
    (source / "roles/r/files").mkdir()
    (source / "roles/r/files/big").write_bytes(b"x" * 1001)
    track(source)
    with pytest.raises(SystemExit, match=r"roles/r/files/big would take the collection over MAX_BYTES \(1000 bytes"):
        collection.stage()


def test_the_stage_refuses_a_submodule(source):
    sub = source.parent / "sub"
    subprocess.run(["git", "init", "-q", sub], check=True)
    subprocess.run(
        ["git", "-C", sub, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
        check=True,
    )
    head = subprocess.run(
        ["git", "-C", sub, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    track(source)
    subprocess.run(
        ["git", "-C", source, "update-index", "--add", "--cacheinfo", f"160000,{head},roles/r/sub"], check=True
    )
    with pytest.raises(SystemExit, match="collection build: roles/r/sub is a link loop or a git submodule"):
        collection.stage()


def test_the_stage_refuses_another_collection_name_and_an_empty_collection(source):
    """galaxy.yml names sglang.deploy; a collection without plugins or roles is no build (issue 48, R18)."""
    (source / "galaxy.yml").write_text(GALAXY.replace("sglang", "other"))
    track(source)
    with pytest.raises(SystemExit, match="galaxy.yml names the collection other.deploy: set namespace: sglang"):
        collection.stage()
    (source / "galaxy.yml").write_text(GALAXY)
    subprocess.run(["git", "-C", source, "add", "galaxy.yml"], check=True)
    subprocess.run(["git", "-C", source, "rm", "-rq", "--cached", "plugins", "roles"], check=True)
    with pytest.raises(SystemExit, match="holds no plugin or role git tracks: git add them"):
        collection.stage()


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


def test_the_build_refuses_a_work_folder_that_is_a_link_or_tracked(source, tmp_path):
    """Red team: build/collection committed as a link to an outside folder made the build empty and write there."""
    outside = tmp_path / "outside" / "ansible_collections"
    outside.mkdir(parents=True)
    (outside / "keep").write_text("x")
    collection.WORK.symlink_to(outside.parent)
    with pytest.raises(SystemExit, match="is a link"):
        collection.stage()
    assert (outside / "keep").read_text() == "x"


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
    assert "install with `tools/collection.py install PATH`" in readme
