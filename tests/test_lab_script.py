"""The ./lab entry script: a machine where Docker cannot start gets one clear paragraph and a non-zero exit."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_docker_that_cannot_start_is_explained(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake(bin_dir, "docker", "exit 1")
    _fake(bin_dir, "dockerd", "echo 'failed to start daemon: operation not permitted' >&2; exit 1")
    _fake(bin_dir, "debootstrap", "exit 0")
    _fake(bin_dir, "systemctl", "exit 1")
    _fake(bin_dir, "sudo", 'exec "$@"')
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        SGLANG_DEPLOY_DOCKER_WAIT="2",
        SGLANG_DEPLOY_LOGDIR=str(tmp_path / "log"),
    )
    proc = subprocess.run([str(REPO / "lab"), "run", "baseline"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Docker engine is not running and could not be started" in proc.stderr
    assert "operation not permitted" in proc.stderr  # what dockerd said
    assert "apt-get install docker.io" in proc.stderr  # the fix


def test_unknown_command_is_a_usage_error():
    proc = subprocess.run([str(REPO / "lab"), "deploy"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "usage: ./lab run [PROFILE] | ./lab test" in proc.stderr


def test_a_test_part_that_never_finishes_counts_as_failed(tmp_path):
    """./lab test runs parts at once in the background, and its summary reads what each part wrote when it ended: a
    part whose shell died first (killed, a full disk) left nothing, and the summary said "all tests passed"."""
    script = (REPO / "lab").read_text()
    start = script.index("cgroup_join() {")  # part() and the helper it calls
    part = script[start : script.index("\n}\n", script.index("part() {")) + 3]
    run = f"""{part}
set -euo pipefail
part good true
( part victim sleep 30 ) & victim=$!
sleep 0.5; kill -9 $victim; wait || true
cat "$TESTLOG"/*.result
"""
    out = subprocess.run(
        ["bash", "-c", run],
        env={**{k: v for k, v in os.environ.items() if k != "SGLANG_DEPLOY_CGROUP_DIR"}, "TESTLOG": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "good               passed" in out.stdout, out.stderr
    assert "victim             FAILED (did not finish)" in out.stdout, out.stdout


def test_a_docker_engine_the_script_starts_is_not_one_of_its_jobs(tmp_path):
    """On a fresh CI machine ./lab test started dockerd itself, as a background job of the script, and its final
    `wait` for the test parts waited for dockerd too: every test passed and the run never ended."""
    script = (REPO / "lab").read_text()
    start = script.index("ensure_docker() {")
    ensure_docker = script[start : script.index("\n}\n", start) + 3]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    up = tmp_path / "up"
    _fake(bin_dir, "docker", f'test -f "{up}"')
    _fake(bin_dir, "dockerd", f'echo $$ > "{up}"; exec sleep 120')
    _fake(bin_dir, "systemctl", "exit 1")  # a host with systemd would start its own docker instead
    run = f"""say() {{ :; }}; die() {{ echo "$*" >&2; exit 1; }}
SUDO=""; LOGDIR="{tmp_path}"
{ensure_docker}
ensure_docker
wait
echo waited
"""
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    try:
        out = subprocess.run(["bash", "-c", run], env=env, capture_output=True, text=True, timeout=30)
    finally:
        if up.exists():
            subprocess.run(["kill", up.read_text().strip()], check=False)
    assert out.stdout == "waited\n", out.stderr


def _ensure_venv(tmp_path: Path, venv_python: str | None) -> subprocess.CompletedProcess:
    """./lab's ensure_venv on a venv whose bin/python prints `venv_python`'s version (None: no venv yet), with a
    python3.12 on PATH that records being asked to make a venv."""
    script = (REPO / "lab").read_text()
    funcs = "".join(script[script.index(f"{n}() {{") : script.index("\n}\n", script.index(f"{n}() {{")) + 3]
                    for n in ("pick_python", "ensure_venv"))  # fmt: skip
    bin_dir, venv = tmp_path / "bin", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    _fake(bin_dir, "python3.12", f'echo "python3.12 $*" >> "{tmp_path}/calls"; exit 0')
    _fake(bin_dir, "python", "exit 0")  # tools/fetch_collections.py
    _fake(venv / "bin", "pip", f'echo "pip $*" >> "{tmp_path}/calls"')
    (venv / "bin" / "activate").write_text("")
    if venv_python is not None:
        _fake(venv / "bin", "python", f"echo {venv_python}")
    run = f"""say() {{ echo "$*"; }}; die() {{ echo "$*" >&2; exit 1; }}
VENV="{venv}"; LOGDIR="{tmp_path}"
{funcs}
ensure_venv
"""
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", run], cwd=REPO, env=env, capture_output=True, text=True, timeout=30)


def test_a_venv_made_as_the_readme_says_is_kept_with_its_python(tmp_path):
    """Issue 52, item 8: `python3 -m venv .venv` (3.11) as the README says, then ./lab made it again with 3.12 on
    top (59 s, two interpreters in one venv)."""
    out = _ensure_venv(tmp_path, "3.11")
    calls = (tmp_path / "calls").read_text()
    assert out.returncode == 0, out.stderr
    assert "python3.12" not in calls and "pip install -q -c constraints.txt -e .[test]" in calls
    assert "its Python 3.11, kept" in out.stdout


def test_a_venv_of_an_unsupported_python_is_refused_with_the_fix(tmp_path):
    out = _ensure_venv(tmp_path, "3.10")
    assert out.returncode == 1 and not (tmp_path / "calls").exists()
    assert "runs Python 3.10, not 3.11 or later" in out.stderr and "rm -rf" in out.stderr


def test_no_venv_yet_is_created_with_the_python_picked(tmp_path):
    out = _ensure_venv(tmp_path, None)
    assert out.returncode == 0, out.stderr
    assert "python3.12 -m venv" in (tmp_path / "calls").read_text()


def _lab_run(tmp_path: Path, recorded: str | None) -> tuple[subprocess.CompletedProcess, str, str]:
    """./lab run's deploy (lab_run) against a lab container whose record names `recorded` (None: no record), with
    docker and sglang-deploy stood in for. Returns the run, sglang-deploy's arguments, the record after it."""
    script = (REPO / "lab").read_text()
    start = script.index("LAB_HOST=")
    funcs = script[start : script.index("\n}\n", start) + 3]
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    if recorded is not None:
        record.write_text(recorded + "\n")
    # docker exec [-e NAME=VALUE] HOST cat FILE | sh -c WRITER FILE: the record file stands in for the container's
    _fake(bin_dir, "docker", f"""case "$*" in
  *" cat "*) cat "{record}" 2>/dev/null || exit 1 ;;
  *" sh -c "*) printf '%s\\n' "${{3#SGLANG_LAB_CHECKOUT=}}" > "{record}" ;;
  *) exit 9 ;;
esac""")  # fmt: skip
    _fake(bin_dir, "sglang-deploy", f'echo "$*" > "{tmp_path}/args"')
    run = f"""set -euo pipefail
say() {{ echo "$*"; }}
{funcs}
lab_run nextn
"""
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", run], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    return out, (tmp_path / "args").read_text().strip(), record.read_text().strip()


def test_a_clone_s_first_lab_run_restarts_what_another_clone_deployed(tmp_path):
    """Issue 52, item 8: one sglang-lab-1 serves every clone on a machine, so a fresh clone's first run reported
    changed=0 against another clone's deploy."""
    here = str(tmp_path.resolve())
    out, args, record = _lab_run(tmp_path, "/other/clone")
    assert out.returncode == 0, out.stderr
    assert "the lab was last deployed from /other/clone: this run restarts its server" in out.stdout
    assert args == "deploy nextn -e sglang_fleet_force_restart=true" and record == here


def test_a_lab_run_from_the_checkout_that_deployed_it_restarts_nothing(tmp_path):
    out, args, record = _lab_run(tmp_path, str(tmp_path.resolve()))
    assert out.returncode == 0 and args == "deploy nextn" and "restarts" not in out.stdout


def test_a_lab_without_a_record_is_restarted_and_then_recorded(tmp_path):
    out, args, record = _lab_run(tmp_path, None)
    assert "keeps no record of the checkout" in out.stdout and args.endswith("sglang_fleet_force_restart=true")
    assert record == str(tmp_path.resolve())


def test_the_lab_lanes_name_lab_tests_that_exist_and_each_has_its_own_container(tmp_path):
    """Issue 52, item 5: ./lab test runs the lab tests in two lanes (tests/lab_host.py's LANE_FILES), each on a
    container of its own, collecting only its own files; an entry that names no file of lab tests would be a lane's
    dead weight, and a lab test in a file of neither lane stops the run with the fix."""
    import lab_host

    for lane, files in lab_host.LANE_FILES.items():
        for entry in files:
            text = (REPO / entry).read_text()
            assert "pytest.mark.lab" in text or "\npytestmark = lab\n" in text, entry  # lab = pytest.mark.lab
            assert lab_host.lane_of(f"{entry}::test_x[a]") == lane
    assert lab_host.lane_of("tests/test_api.pyc::test_x") is None
    stray = tmp_path / "test_stray.py"  # a new lab test file, in no lane yet; tests/conftest.py loaded as a plugin
    stray.write_text("import pytest\n\n\n@pytest.mark.lab\ndef test_x():\n    pass\n")
    run = [BIN / "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "conftest", "-m", "not lab", stray]
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    done = subprocess.run(run, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 4 and "test_stray.py, a file of neither lane: add it to LANE_FILES" in done.stderr, done
    second = yaml.safe_load((REPO / "inventory" / "lab-2.yml").read_text())["all"]["children"]["lab"]["hosts"]
    assert second == {"sglang-lab-2": {"lab_network": "sglang-lab-2"}}
    script = (REPO / "lab").read_text()
    assert "LAB_INVENTORIES=(-i inventory/lab.yml -i inventory/lab-2.yml)" in script
    assert 'part "pytest-lab-$lane" env SGLANG_DEPLOY_LAB_LANE="$lane" pytest -m lab' in script
