"""Where an SGLang start went (ansible_collections.sglang.deploy.plugins.module_utils.startup): SGLang's own log lines as recorded from 0.5.16 on an H200
and as 0.5.23's source writes them, the journal's form of them, the emulator's lines through the sglang_ready module,
and the environment that keeps a restart's caches warm."""

from __future__ import annotations

import importlib.util
import json
import os
import pwd
import re
import sys

import pytest
import yaml
from emulator_proc import REPO, Emulator, run_module  # first: puts the repo's module_utils on the import path

import sglang_ready
from ansible_collections.sglang.deploy.plugins.module_utils import readiness, stack, startup
from sglang_deploy import api
from sglang_deploy.cli import runs

FIXTURES = REPO / "tests" / "fixtures"
ORDER = [name for name, _ in startup.MILESTONES]


def from_log(path) -> dict:
    return startup.parse(startup.log_entries(path.read_text()))


def test_a_dense_start_recorded_from_sglang_0_5_16():
    r = from_log(FIXTURES / "sglang-0.5.16-h200" / "startup_log.txt")
    m, p = r["milestones"], r["phases"]
    assert list(m) == ORDER
    # Seconds after the first line (23:29:06): the scheduler's first line 23:29:29, the graphs captured 23:30:30,
    # ready 23:30:37; the weights' and the graphs' figures are SGLang's own elapsed= values.
    assert (m["first_model_line"], m["cuda_graphs_captured"], m["ready"]) == (23.0, 84.0, 91.0)
    assert (p["weights"], p["cuda_graphs"], p["warmup"], p["total"]) == (0.17, 58.06, 7.0, 91.0)
    assert "imports" not in p  # the process start is not in a log file
    assert r["clock"] == "log" and not r["emulated"] and r["jit_builds"]["count"] == 0
    assert r["summary"].startswith("ready 91.0 s after its first log line: weights 0.2 s, KV cache 0.0 s, CUDA graphs")


def test_a_speculative_start_recorded_from_sglang_0_5_16_counts_the_draft_model():
    """NEXTN on the hybrid model: the draft model loads after the target and captures its graphs after the target's."""
    r = from_log(FIXTURES / "sglang-0.5.16-h200" / "startup_nextn_log.txt")
    m, p = r["milestones"], r["phases"]
    assert list(m) == ORDER
    assert m["kv_cache_allocated"] == 25.0  # `Mamba Cache is allocated.` comes first on a hybrid model
    assert m["cuda_graphs_captured"] == 68.0  # the draft's capture end (12:32:45), not the target's (12:32:38)
    assert p["weights"] == 0.08 and p["cuda_graphs"] == round(35.24 + 6.55, 3)
    assert p["warmup"] == 21.0 and p["total"] == 89.0


def test_sglang_0_5_23_lines_of_a_tp2_start_count_rank_0_only():
    r = from_log(FIXTURES / "sglang-0.5.23-source" / "startup_tp2.log")
    m, p = r["milestones"], r["phases"]
    assert list(m) == ORDER
    assert (m["server_args"], m["first_model_line"], m["weights_loaded"]) == (0.0, 21.15, 24.9)
    assert (m["cuda_graphs_captured"], m["http_up"], m["ready"]) == (87.8, 88.02, 95.9)
    assert (p["weights"], p["cuda_graphs"]) == (2.0, 62.5)  # TP1's 1.49 s and 54.59 s are left out
    assert r["jit_builds"]["count"] == 1 and r["jit_builds"]["lines"][0]["line"].startswith("Try DeepGEMM JIT")
    assert "1 JIT build lines" in r["summary"]


def test_a_line_it_cannot_read_never_fails_a_ready_server(tmp_path, monkeypatch):
    """A rank-0 line with a malformed elapsed= figure: the report leaves it out; any other parse error comes back as
    the report's error, never as the module's failure (which would roll back a server that is ready)."""
    text = (FIXTURES / "sglang-0.5.23-source" / "startup_tp2.log").read_text()
    odd = text.replace("Load weight end. elapsed=", "Load weight end. elapsed=1.2.", 1)
    assert odd != text
    assert startup.parse(startup.log_entries(odd))["milestones"]["ready"] == 95.9

    def broken(unit, ready_at=None):
        raise ValueError("could not convert string to float: '1.2.3'")

    monkeypatch.setattr(startup, "read_journal", broken)
    assert startup.unit_report("sglang")["error"].endswith("could not convert string to float: '1.2.3'")


def test_an_elapsed_figure_of_400_digits_never_reaches_the_json_as_infinity():
    """float() of 400 digits is inf, which json writes as Infinity (not JSON): such a figure is left out, the span
    between the milestones stands in; a journal stamp of 400 digits is a line left out too."""
    lines = [
        "[2026-12-01 10:00:00] Load weight begin.",
        f"[2026-12-01 10:00:03] Load weight end. elapsed={'9' * 400} s",
    ]
    r = startup.parse(startup.log_entries("\n".join(lines)))
    assert r["phases"]["weights"] == 3.0
    json.dumps(r, allow_nan=False)
    huge = json.dumps({"__MONOTONIC_TIMESTAMP": "9" * 400, "MESSAGE": "x"})
    assert startup.journal_entries([huge, *journal([(1.0, "y")])]) == [(1.0, "y")]


def test_a_bad_date_in_the_line_prefix_takes_the_time_before_it():
    """2026-13-45 is no date: that record keeps the time of the record before it (none before: it is left out)."""
    lines = [
        "[2026-13-45 10:00:00] Init parallel begin.",
        "[2026-12-01 10:00:00] Load weight begin.",
        "[2026-12-01 10:00:99] Load weight end.",
        f"[2026-12-01 10:00:05] {startup.READY_LINE}",
    ]
    r = startup.parse(startup.log_entries("\n".join(lines)))
    assert r["milestones"] == {"first_model_line": 0.0, "weights_begin": 0.0, "weights_loaded": 0.0, "ready": 5.0}


def journal(entries: list, binary: bool = False) -> list:
    """`journalctl -o json` lines of (monotonic seconds, message); journald keeps a message with a control
    character as an array of bytes."""
    out = []
    for t, msg in entries:
        field = list(msg.encode()) if binary and "\r" in msg else msg
        out.append(json.dumps({"__MONOTONIC_TIMESTAMP": str(int(t * 1e6)), "MESSAGE": field, "__CURSOR": "c"}))
    return out


def test_the_journal_times_count_from_the_process_start():
    lines = (FIXTURES / "sglang-0.5.16-h200" / "startup_log.txt").read_text().splitlines()
    # A second of monotonic time per line from 1000.0; the process started at 990.0.
    entries = startup.journal_entries(journal([(1000.0 + i, line) for i, line in enumerate(lines)], binary=True))
    assert len(entries) == next(i for i, line in enumerate(lines) if startup.READY_LINE in line) + 1
    r = startup.parse(entries, started=990.0)
    first = next(i for i, line in enumerate(lines) if "Init torch distributed begin." in line)
    assert r["clock"] == "journal" and r["milestones"]["process_start"] == 0.0
    assert r["phases"]["imports"] == r["milestones"]["first_model_line"] == 10.0 + first
    assert r["summary"].startswith(f"ready {r['phases']['total']:.1f} s after its start: imports")


def test_the_journal_is_read_up_to_the_ready_line_or_a_bound(monkeypatch):
    monkeypatch.setattr(startup, "MAX_ENTRIES", 3)
    lines = journal([(float(i), f"[2026-12-01 10:00:0{i}] line {i}") for i in range(6)])
    assert [m for _, m in startup.journal_entries(["not json", *lines])] == [
        "[2026-12-01 10:00:00] line 0",
        "[2026-12-01 10:00:01] line 1",
        "[2026-12-01 10:00:02] line 2",
    ]


def test_ready_comes_from_the_wait_when_the_log_has_no_ready_line():
    """A rank >= 1 of a multi-node group logs no ready line: the moment /health answered 200 stands in."""
    entries = [(5.0, "[2026-12-01 10:00:00] Init parallel begin."), (9.0, "[2026-12-01 10:00:04] Load weight begin.")]
    r = startup.parse(entries, started=1.0, ready_at=20.0)
    assert r["milestones"]["ready"] == 19.0 and r["phases"]["imports"] == 4.0
    assert startup.parse(entries, started=1.0)["summary"].startswith("not ready in the log: imports 4.0 s")
    assert startup.parse([])["summary"] == "no SGLang log lines"


def test_the_emulator_logs_every_milestone_as_emulated(tmp_path):
    emu = Emulator(tmp_path, load_s=0.6, warmup_s=0.2).wait_ready()
    try:
        r = startup.parse(startup.log_entries("\n".join(emu.log_lines())))
    finally:
        emu.stop()
    assert list(r["milestones"]) == ORDER
    assert r["emulated"] and r["summary"].endswith("(EMULATED server: synthetic timing)")
    # The phases are the emulator's elapsed= figures: half its load time each (0.3 s), as it measured the sleep. Not
    # bounded above: a loaded machine wakes it late.
    logged = "\n".join(emu.log_lines())
    weights = float(re.search(r"Load weight end\. elapsed=([0-9.]+) s", logged).group(1))
    graphs = float(re.search(r"CUDA graph end\. .*elapsed=([0-9.]+) s", logged).group(1))
    assert (r["phases"]["weights"], r["phases"]["cuda_graphs"]) == (weights, graphs)
    assert weights >= 0.3 and graphs >= 0.3


def test_sglang_ready_reports_the_start_from_the_units_journal(tmp_path, monkeypatch, capsys):
    """The module with a unit: the wait as before, then the start of the unit's process from its journal (here the
    recorded 0.5.16 start, a second a line from 1.5 s after the process start)."""
    emu = Emulator(tmp_path)
    lines = (FIXTURES / "sglang-0.5.16-h200" / "startup_log.txt").read_text().splitlines()
    running = {"ActiveState": "active", "SubState": "running", "MainPID": str(emu.proc.pid), "NRestarts": "0"}
    monkeypatch.setattr(readiness, "run_systemctl_show", lambda unit: dict(running, LoadState="loaded"))
    monkeypatch.setattr(startup, "run_unit_start", lambda unit: ("0" * 32, 100.0))
    monkeypatch.setattr(startup, "run_journal", lambda invocation: [(101.5 + i, s) for i, s in enumerate(lines)])
    try:
        failed, res = run_module(sglang_ready, {"url": emu.url, "unit": "sglang", "sleep": 0.1}, capsys)
    finally:
        emu.stop()
    assert not failed, res
    assert res["startup"]["clock"] == "journal" and not res["startup"]["emulated"]
    assert list(res["startup"]["milestones"]) == ["process_start", *ORDER]
    first = next(i for i, line in enumerate(lines) if "Init torch distributed begin." in line)
    assert res["startup"]["phases"]["imports"] == 1.5 + first


def test_the_modules_documentation_of_startup_is_what_parse_returns():
    """ansible-doc reads each description line as a string (a line holding ': ' was read as a mapping and
    ansible-doc refused the module); the sample has parse()'s keys."""
    doc = yaml.safe_load(sglang_ready.RETURN)["startup"]
    assert all(isinstance(line, str) for line in doc["description"])
    assert set(doc["sample"]) == set(from_log(FIXTURES / "sglang-0.5.16-h200" / "startup_log.txt"))


def test_an_unreadable_journal_leaves_the_wait_standing(monkeypatch):
    def no_systemd(unit):
        raise FileNotFoundError("systemctl")

    monkeypatch.setattr(startup, "run_unit_start", no_systemd)
    assert startup.unit_report("sglang") == {"error": "where the start of sglang went is unknown: systemctl"}


def test_a_deploy_outcome_carries_the_start_of_a_server_it_restarted():
    """The deploy's per-host rows (filter sglang_fleet_summary, from sglang_server_deployed) and the command line's
    lines: a host the run restarted says where its start went; an unchanged one started in an earlier run."""
    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "plugins" / "filter" / "sglang.py")
    filters = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(filters)
    report = from_log(FIXTURES / "sglang-0.5.16-h200" / "startup_log.txt")
    hostvars = {
        host: {
            "sglang_fleet_done": True,
            "sglang_fleet_restarted": restarted,
            "sglang_server_deployed": {"startup": report},
        }
        for host, restarted in (("a", True), ("b", False))
    }
    rows = filters.fleet_summary(["a", "b"], hostvars, "baseline", False)
    assert rows[0]["startup"] == report and "startup" not in rows[1]
    result = api.RunResult("site.yml", "successful", 0, data={"sglang_fleet": rows})
    assert runs._outcomes(result) == [
        f"a: deployed (serves baseline); {report['summary']}",
        "b: unchanged (serves baseline)",
    ]


# --------------------------------------------------------------------------------------------------
# The environment the role gives the server


@pytest.mark.parametrize(
    "stack, folder",
    [
        ({"venv": "/opt/sglang/venvs/dense-0123abcd"}, "/var/lib/sglang/cache/dense-0123abcd"),
        ({"venv": "/opt/sglang/venvs/nextn-fedc9876/"}, "/var/lib/sglang/cache/nextn-fedc9876"),
        ({}, "/var/lib/sglang/cache/no-stack"),
        (None, "/var/lib/sglang/cache/no-stack"),
    ],
)
def test_each_stack_has_its_own_cache_folder(stack, folder):
    assert startup.cache_dir("/var/lib/sglang/cache", stack) == folder


def test_a_venv_name_that_cannot_name_a_folder_is_refused():
    with pytest.raises(ValueError, match="re-run the stack role"):
        startup.cache_dir("/var/lib/sglang/cache", {"venv": "/opt/sglang/venvs/a b"})


def test_every_cache_is_in_the_stacks_folder_and_none_under_tmp():
    cache = "/var/lib/sglang/cache/dense-0123abcd"
    env = startup.run_env(cache, "/var/lib/sglang", "/opt/sglang/venv/bin")
    for name in startup.CACHE_ENV:
        assert env[name] == cache or env[name].startswith(cache + "/"), name
    assert env["TORCHINDUCTOR_CACHE_DIR"] == cache + "/inductor"  # its default is under /tmp, which PrivateTmp empties
    assert env["FLASHINFER_WORKSPACE_BASE"] == cache  # FlashInfer adds .cache/flashinfer itself
    assert env["HF_HOME"] == "/var/lib/sglang/.cache/huggingface"  # downloads stay out of the stack's folder


def test_path_has_the_venvs_bin_with_and_without_the_cuda_fact():
    """FlashInfer's JIT runs `ninja` from the venv's bin/: with systemd's default PATH a start died at graph capture."""
    plain = startup.run_env("/c", "/h", "/opt/sglang/venv/bin")
    assert plain["PATH"] == "/opt/sglang/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert "CUDA_HOME" not in plain and "LD_LIBRARY_PATH" not in plain
    cuda = {"cuda_home": "/usr/local/cuda-13.0", "path": ["/usr/local/cuda-13.0/bin"], "ld_library_path": ["/x/lib64"]}
    env = startup.run_env("/c", "/h", "/opt/sglang/venv/bin", cuda)
    assert env["PATH"] == (
        "/usr/local/cuda-13.0/bin:/opt/sglang/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    )
    assert (env["CUDA_HOME"], env["LD_LIBRARY_PATH"]) == ("/usr/local/cuda-13.0", "/x/lib64")


def test_the_stack_venv_is_byte_compiled_at_install():
    """The service account cannot write __pycache__ in the root-owned venv: compiled site-packages saved about 13 s
    of imports per start on the H200. pip compiles unless told --no-compile; uv only with --compile-bytecode."""
    assert "--compile-bytecode" in stack.install_argv("uv", "/opt/sglang/venvs/v", "/r.txt", "/usr/local/bin/uv")
    assert not [a for a in stack.install_argv("pip", "/opt/sglang/venvs/v", "/r.txt") if "compile" in a]


@pytest.mark.skipif(os.geteuid() != 0, reason="sets owners: run as root (CI does)")
def test_the_cache_folders_are_never_made_through_a_link(tmp_path):
    """The role's comparison and folder tasks (roles/sglang_server/tasks/install.yml, install_converge.yml) as they
    are, on this machine: the cache root is root's, a second run finds nothing due, and a cache root the service
    account swapped for a link is due and refused, its target left as it was."""
    from ansible_json import run_playbook

    server = REPO / "roles" / "sglang_server"
    due = next(
        t
        for t in yaml.safe_load((server / "tasks" / "install.yml").read_text())
        if "sglang.deploy.sglang_state_due" in t
    )
    folders = [
        t
        for t in yaml.safe_load((server / "tasks" / "install_converge.yml").read_text())
        if "ansible.builtin.file" in t
    ]
    folder_vars = yaml.safe_load((server / "vars" / "main.yml").read_text())
    settings = {
        "sglang_server_home": str(tmp_path / "home"),
        "sglang_server_config_dir": str(tmp_path / "etc"),
        "__sglang_server_last_good_dir": str(tmp_path / "etc" / "last-good"),
        "sglang_server_cache_root": str(tmp_path / "cache"),
        "__sglang_server_cache_dir": str(tmp_path / "cache" / "no-stack"),
        "sglang_server_tools_dir": str(tmp_path / "tools"),
        **{k: folder_vars[k] for k in ("__sglang_server_dirs", "__sglang_server_cache_dir_entry")},
        "sglang_server_user": "nobody",
        "sglang_server_group": "root",
        "ansible_python_interpreter": sys.executable,
    }
    compare = {
        "name": due["name"],
        "sglang.deploy.sglang_state_due": {"dirs": due["sglang.deploy.sglang_state_due"]["dirs"]},
    }
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": settings,
            "tasks": [compare, *folders],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))

    def run():
        out, report = run_playbook(["-i", "localhost,", "play.yml"], tmp_path)
        result = report["plays"][0]["tasks"][0]["hosts"]["localhost"]
        assert "differs" in result, result
        return out, result["differs"]

    out, differs = run()
    assert out.returncode == 0 and len(differs) == 6, out.stdout[-2000:]
    st = os.stat(tmp_path / "cache")
    assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o750")
    assert os.stat(tmp_path / "cache" / "no-stack").st_uid == pwd.getpwnam("nobody").pw_uid
    assert run()[1] == []  # as the task made them
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "cache" / "no-stack").rmdir()
    (tmp_path / "cache").rmdir()
    (tmp_path / "cache").symlink_to(target)
    out, differs = run()
    assert out.returncode != 0 and differs[0] == f"{tmp_path / 'cache'}: not a folder", differs
    st = os.stat(target)
    assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o700") and not (target / "no-stack").exists()


def test_sglangs_accuracy_warnings_are_collected_from_any_rank():
    """Issue 49: the operator's log warned that DeepGemm might degrade accuracy on Blackwell; the gate shows it."""
    line = (
        "DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0. This might cause accuracy degradation on"
        " Blackwell."
    )
    log = f"[2026-12-01 13:42:46] server_args=x\n[2026-12-01 13:42:47 TP3] {line}\n[2026-12-01 13:42:48 TP0] {line}\n"
    report = startup.parse(startup.log_entries(log))
    assert report["accuracy_warnings"] == [line]
    assert startup.parse(startup.log_entries("[2026-12-01 13:42:46] server_args=x\n"))["accuracy_warnings"] == []
