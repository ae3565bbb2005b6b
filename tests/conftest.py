"""Test tiers, one marker each: `unit` (this machine only: Python, ansible-playbook on localhost, local processes),
`lab` (deploys to the lab container sglang-lab-1; skipped, with the reason, without it), `standin` (the GPU lab's
phases on a CPU stand-in, tests/test_gpu_lab_standin.py) and `gpu` (tests/gpu, its own conftest). `./lab test` runs
`-m "not lab and not standin"` and `-m standin` beside `-m lab` in two lanes (tests/lab_host.py: SGLANG_DEPLOY_LAB_LANE
picks a lane's share of the lab tests and its container, sglang-lab-1 or sglang-lab-2)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from lab_host import LAB_HOST, LAB_INVENTORY, LAB_LOCK, LANE, LANE_FILES, lab_missing, lane_of

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STANDIN = "tests/test_gpu_lab_standin.py"


def pytest_configure(config):
    config.addinivalue_line("markers", "unit: needs neither the lab container nor a GPU")
    config.addinivalue_line("markers", "lab: deploys to the lab container sglang-lab-1 (./lab setup creates it)")
    config.addinivalue_line("markers", "standin: boots the GPU lab on this machine and runs its phases (needs root)")
    if LANE:
        # This lane's container is the default target: of the api (sglang_deploy.api.runner) and of ansible-playbook
        # run without -i (ansible.cfg names inventory/lab.yml) in this process and its children.
        from sglang_deploy.api import runner

        runner.DEFAULT_INVENTORY = LAB_INVENTORY
        os.environ["ANSIBLE_INVENTORY"] = str(LAB_INVENTORY)


def pytest_report_header(config):
    if LANE:
        return f"lab lane {LANE}: its share of the lab tests (tests/lab_host.py), on {LAB_HOST} ({LAB_INVENTORY.name})"
    return None


def pytest_ignore_collect(collection_path, config):
    """A lane of ./lab test collects only its own test files (tests/lab_host.py's LANE_FILES)."""
    if LANE and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return collection_path.relative_to(REPO).as_posix() not in LANE_FILES[LANE]
    return None


def _files(items, marker: str) -> set:
    """The test files of the items that carry MARKER."""
    return {item.nodeid.partition("::")[0] for item in items if item.get_closest_marker(marker)}


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a whole run (the unit lane of ./lab test) sees every test
def pytest_collection_modifyitems(config, items):
    strays = _files(items, "lab") - {path for files in LANE_FILES.values() for path in files}
    if strays:
        raise pytest.UsageError(
            f"lab tests in {', '.join(sorted(strays))}, a file of neither lane: add it to LANE_FILES in tests/lab_host.py"
        )
    strays = _files(items, "standin") - {STANDIN}  # ./lab test runs the standin tier as `pytest -m standin STANDIN`
    if strays:
        raise pytest.UsageError(
            f"standin tests in {', '.join(sorted(strays))}: ./lab test runs only {STANDIN}'s; move them there"
        )
    if LANE:  # a lane of ./lab test: the other lane's lab tests are not this process's
        other = [item for item in items if item.get_closest_marker("lab") and lane_of(item.nodeid) != LANE]
        if other:
            config.hook.pytest_deselected(items=other)
            gone = {id(item) for item in other}
            items[:] = [item for item in items if id(item) not in gone]
    for item in items:
        if item.get_closest_marker("lab"):
            if lab_missing():
                item.add_marker(pytest.mark.skip(reason=lab_missing()))
        elif not item.get_closest_marker("gpu") and not item.get_closest_marker("standin"):
            item.add_marker(pytest.mark.unit)


@pytest.fixture(scope="module")
def lab_lock():
    """Hold the lab container for the rest of a module: two test runs deploying to sglang-lab-1 (or, in lane 2 of
    ./lab test, sglang-lab-2) at once fail each other, and a module's lab tests build on each other's deploys."""
    with open(LAB_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(autouse=True)
def lab_exclusive(request):
    """Lab tests take the lab lock (from their module's first lab test to its end); the other tests never wait
    for it (the unit lane of ./lab test runs beside the lab lane)."""
    if request.node.get_closest_marker("lab"):
        request.getfixturevalue("lab_lock")


@pytest.fixture(autouse=True)
def unit_results(request, monkeypatch):
    """A unit test's controller results (sglang_deploy.paths.RESULTS) are a folder of its own: a stand-in deploy's
    deploys.json or a compare's report never lands in the checkout's results/, and no estimate reads them there."""
    if request.node.get_closest_marker("unit"):
        from sglang_deploy import paths

        monkeypatch.setattr(paths, "RESULTS", request.getfixturevalue("tmp_path") / "results")


def _checkout_copy(dest: Path) -> Path:
    """The tree's files as git sees them (tracked and new, not ignored): no build/, egg-info or results of this one."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file() or (REPO / name).is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name, follow_symlinks=False)
    return dest


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel of this tree (built offline, --no-build-isolation) and nothing of the checkout;
    the dependencies come from this venv's site-packages by a .pth (no index), as `pip install` would bring them."""
    pytest.importorskip("setuptools")
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    tree = _checkout_copy(tmp / "tree")
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", tmp / "dist", tree],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp / "dist").glob("sglang_deploy-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # ansible-core's console script, as pip writes it when it installs the dependency.
    script = venv / "bin" / "ansible-playbook"
    script.write_text(f"#!{python}\nfrom ansible.cli.playbook import main\nmain()\n")
    script.chmod(0o755)
    return venv


@pytest.fixture(scope="session")
def plain_collection(tmp_path_factory) -> tuple[Path, Path]:
    """(tarball, collections folder): plain `ansible-galaxy collection build` at the root, the tarball installed from
    outside the checkout (its ansible.cfg's collections_path would find sglang.deploy already there). --force: a
    sglang.deploy of the same version in ~/.ansible/collections (a plain `ansible-galaxy collection install` of the
    tarball puts it there) would make the install do nothing."""
    tmp = tmp_path_factory.mktemp("collection")
    galaxy = [BIN / "ansible-galaxy", "collection"]
    subprocess.run([*galaxy, "build", "--output-path", tmp], cwd=REPO, capture_output=True, check=True, timeout=300)
    (tarball,) = tmp.glob("sglang-deploy-*.tar.gz")
    subprocess.run(
        [*galaxy, "install", "--offline", "--force", "-p", tmp / "c", tarball],
        cwd=tmp,
        capture_output=True,
        check=True,
        timeout=300,
    )
    return tarball, tmp / "c"


@pytest.fixture(scope="session")
def smg_python(tmp_path_factory) -> tuple[str, dict | None]:
    """A Python with the role's pinned smg: SGLANG_SMG_PYTHON, else this one with smg installed from PyPI into a
    folder of its own (the wheel carries the Rust core, about 10 MB)."""
    if os.environ.get("SGLANG_SMG_PYTHON"):
        return os.environ["SGLANG_SMG_PYTHON"], None
    version = yaml.safe_load((REPO / "roles/sglang_router/defaults/main.yml").read_text())["sglang_router_version"]
    target = tmp_path_factory.mktemp("smg")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--only-binary=:all:", "--target", str(target)]
    done = subprocess.run([*pip, f"smg=={version}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"pip could not install smg=={version} (set SGLANG_SMG_PYTHON): {done.stderr[-2000:]}"
    return sys.executable, {**os.environ, "PYTHONPATH": str(target)}
