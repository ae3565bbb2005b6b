"""tools/gpu_lab.py and tools/gpu_boot.py, the parts that need no root and no GPU: the pins from constraints.txt,
the parts round trip, the merged-usr upper layer (only what the host lacks), the boot script's mounts, the refusals
without a booted lab, and the GPU session's phases: their --help, the commands their --dry-run prints, and how a
phase runs and is timed."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_lab", REPO / "tools" / "gpu_lab.py")
gpu_lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_lab)
gpu_boot = gpu_lab.gpu_boot  # the lab's machinery (fetch, pack, boot, exec, stop), as gpu_lab loaded it


def test_pins_decide_python_version_markers_for_the_target():
    text = (
        "# comment\n"
        'ansible-core==2.21.5 ; python_version >= "3.12"\n'
        'ansible-core==2.19.14 ; python_version < "3.12"\n'
        "Jinja2==3.1.6\n"
    )
    assert gpu_boot.pins(text, ("ansible-core", "jinja2")) == ["ansible-core==2.21.5", "Jinja2==3.1.6"]
    assert gpu_boot.pins(text, ("ansible-core",), python=(3, 11)) == ["ansible-core==2.19.14"]


def test_pins_name_a_package_without_a_pin():
    with pytest.raises(gpu_lab.LabError, match="pins no resolvelib for Python 3.12: pin them there"):
        gpu_boot.pins("Jinja2==3.1.6\n", ("Jinja2", "resolvelib"))


def test_the_projects_constraints_pin_every_wheel_the_lab_fetches():
    assert len(gpu_boot.pins((REPO / "constraints.txt").read_text())) == len(gpu_boot.WHEELS)


def test_parts_round_trip_and_a_broken_part_is_refused(tmp_path):
    work = tmp_path / "work"
    (work / "debs").mkdir(parents=True)
    (work / "whl").mkdir()
    (work / "debs" / "systemd_252_amd64.deb").write_bytes(b"d" * 300)
    (work / "whl" / "x-1-py3-none-any.whl").write_bytes(b"w" * 300)
    parts = gpu_boot.pack(work, tmp_path / "parts", part_bytes=1000)
    assert [p.name for p in parts] == [f"part{i:02d}" for i in range(len(parts))] and len(parts) > 1
    gpu_boot.join(tmp_path / "parts", tmp_path / "stage" / "lab.tar")
    assert (tmp_path / "stage" / "debs" / "systemd_252_amd64.deb").read_bytes() == b"d" * 300
    assert not (tmp_path / "stage" / "lab.tar").exists()
    parts[-1].write_bytes(parts[-1].read_bytes()[:-1])
    with pytest.raises(gpu_lab.LabError, match="a part is missing or broken"):
        gpu_boot.join(tmp_path / "parts", tmp_path / "stage2" / "lab.tar")


def test_upper_plan_takes_only_what_the_host_lacks_under_merged_usr(tmp_path):
    tree, host = tmp_path / "debroot", tmp_path / "host"
    for rel in ("lib/systemd/systemd", "bin/systemctl", "usr/lib/x86_64-linux-gnu/libip4tc.so.2", "etc/x.conf"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("new")
    (tree / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (tree / "lib/x86_64-linux-gnu/libssl.so.3").write_text("debian's")
    (host / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (host / "usr/lib/x86_64-linux-gnu/libssl.so.3").write_text("the host's own")
    (host / "etc").mkdir()
    (host / "etc/x.conf").write_text("host")
    assert gpu_boot.upper_plan(tree, host) == [
        "usr/bin/systemctl",
        "usr/lib/systemd/systemd",
        "usr/lib/x86_64-linux-gnu/libip4tc.so.2",
    ]


def test_fill_upper_copies_files_and_links_and_a_second_boot_keeps_what_is_there(tmp_path):
    tree, upper, host = tmp_path / "debroot", tmp_path / "upper", tmp_path / "host"
    (tree / "lib/systemd").mkdir(parents=True)
    (tree / "lib/systemd/systemd").write_text("252")
    (tree / "lib/systemd/link").symlink_to("systemd")
    host.mkdir()
    assert gpu_boot.fill_upper(tree, upper, host) == ["usr/lib/systemd/link", "usr/lib/systemd/systemd"]
    assert os.readlink(upper / "usr/lib/systemd/link") == "systemd"
    (upper / "usr/lib/systemd/systemd").write_text("changed inside the lab")
    gpu_boot.fill_upper(tree, upper, host)  # copying onto the link raised FileExistsError
    assert (upper / "usr/lib/systemd/systemd").read_text() == "changed inside the lab"


def test_the_units_the_host_enables_are_masked_in_the_lab(tmp_path):
    """A host with systemd installed but not running (the CI machine of the CPU stand-in) enables dockerd and a
    database: the lab's systemd would start them in the host's network namespace (issue 52)."""
    host, upper = tmp_path / "host", tmp_path / "upper"
    for rel in (
        "multi-user.target.wants/docker.service",
        "sockets.target.wants/docker.socket",
        "x.requires/db.service",
    ):
        (host / "etc/systemd/system" / rel).parent.mkdir(parents=True, exist_ok=True)
        (host / "etc/systemd/system" / rel).symlink_to("/usr/lib/systemd/system/" + rel.split("/")[1])
    (upper / "etc/systemd/system").mkdir(parents=True)
    (upper / "etc/systemd/system/db.service").write_text("the lab's own, from an earlier boot")
    assert gpu_boot.mask_host_units(upper, host) == ["db.service", "docker.service", "docker.socket"]
    assert os.readlink(upper / "etc/systemd/system/docker.service") == "/dev/null"
    assert (upper / "etc/systemd/system/db.service").read_text() == "the lab's own, from an earlier boot"
    assert gpu_boot.mask_host_units(upper, tmp_path / "no-systemd") == []


def test_boot_script_mounts_then_execs_systemd_in_the_merged_root(tmp_path):
    script = gpu_boot.boot_script(Path("/l/merged"), Path("/l/upper"), Path("/l/work"), ["/repo", "/out"])
    lines = script.splitlines()
    assert lines[1] == "mount -t overlay overlay -o lowerdir=/,upperdir=/l/upper,workdir=/l/work /l/merged"
    assert "mkdir -p /l/merged/repo && mount --rbind /repo /l/merged/repo" in lines
    assert "mount -t tmpfs tmpfs /l/merged/tmp" in lines
    assert lines[-2:] == ["export container=other", "exec chroot /l/merged /usr/lib/systemd/systemd --system"]


def test_exec_and_stop_without_a_booted_lab_say_boot_first(tmp_path, capsys):
    assert gpu_lab.main(["exec", str(tmp_path), "--", "true"]) == 2
    assert "no lab booted under" in capsys.readouterr().err
    assert gpu_lab.main(["stop", str(tmp_path)]) == 2


def test_boot_refuses_a_root_that_holds_a_lab(tmp_path):
    (tmp_path / "unshare.pid").write_text("1\n")
    with pytest.raises(gpu_lab.LabError, match="stop it first"):
        gpu_boot.boot(tmp_path / "parts", tmp_path, [], "python3")


def test_pack_keeps_only_debs_and_wheels(tmp_path):
    work = tmp_path / "work"
    (work / "debs").mkdir(parents=True)
    (work / "whl").mkdir()
    (work / "notes.txt").write_text("not carried")
    (work / "whl" / "a-1-py3-none-any.whl").write_bytes(b"a")
    gpu_boot.pack(work, tmp_path / "parts")
    gpu_boot.join(tmp_path / "parts", tmp_path / "stage" / "lab.tar")
    assert sorted(p.relative_to(tmp_path / "stage").as_posix() for p in (tmp_path / "stage").rglob("*")) == [
        "whl",
        "whl/a-1-py3-none-any.whl",
    ]


def test_a_command_in_the_lab_gets_no_variable_only_the_gpu_machine_sets(monkeypatch):
    """The GPU machine sets PYTHONDONTWRITEBYTECODE; a GPU host's root shell does not, and with it the roles' root
    runs of the stack's Python left the image's modules without bytecode for every start of the unit."""
    seen = {}
    monkeypatch.setattr(gpu_boot, "_pid", lambda root: 4242)
    monkeypatch.setattr(gpu_lab.subprocess, "run", lambda argv, **kw: seen.update(argv=argv, env=kw["env"]))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("SGLANG_LAB_API_KEY", "k" * 24)
    gpu_boot.nsenter(Path("/root/gpulab"), ["ansible-playbook", "site.yml"])
    assert seen["argv"][:3] == ["nsenter", "-t", "4242"] and seen["argv"][-2:] == ["ansible-playbook", "site.yml"]
    assert "PYTHONDONTWRITEBYTECODE" not in seen["env"] and seen["env"]["SGLANG_LAB_API_KEY"] == "k" * 24


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda sha: None, "missing"),
        (lambda sha: sha.write_text(""), "holds no sha256"),
        (lambda sha: sha.write_text("not-a-digest  lab.tar\n"), "holds no sha256"),
        (lambda sha: sha.mkdir(), "not a regular file"),
        (lambda sha: sha.symlink_to("/dev/zero"), "not a regular file"),
    ],
)
def test_join_refuses_a_sha256_file_that_is_missing_empty_or_not_a_file(tmp_path, make, problem):
    # A sha file linked to /dev/zero was read whole (until memory ran out); the others gave a traceback.
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part00").write_bytes(b"x")
    make(parts / "lab.sha256")
    with pytest.raises(gpu_lab.LabError, match=f"lab.sha256.*{problem}"):
        gpu_boot.join(parts, tmp_path / "stage" / "lab.tar")


def test_join_refuses_a_part_that_is_not_a_file(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "lab.sha256").write_text("0" * 64 + "  lab.tar\n")
    (parts / "part00").symlink_to("/dev/zero")
    with pytest.raises(gpu_lab.LabError, match="part00 is not a regular file"):
        gpu_boot.join(parts, tmp_path / "stage" / "lab.tar")


SESSION_PHASES = ("smoke", "suite", "parity", "up", "deploy", "restart", "restart-unit", "traffic", "compare")


@pytest.mark.parametrize("cmd", ("fetch", "pack", "boot", "exec", "stop", *SESSION_PHASES))
def test_each_subcommand_answers_help(cmd, capsys):
    with pytest.raises(SystemExit) as done:
        gpu_lab.main([cmd, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and f" {cmd} [-h]" in out
    assert ("--dry-run" in out) == (cmd in SESSION_PHASES and cmd != "restart-unit")


def dry_run(tmp_path, monkeypatch, capsys, *argv) -> list[str]:
    """What a phase prints with --dry-run and --out tmp_path/out, on a machine whose SITE has no SGLang yet."""
    monkeypatch.setattr(gpu_lab, "SITE", tmp_path / "site")
    assert gpu_lab.main([argv[0], "--dry-run", "--out", str(tmp_path / "out"), *argv[1:]]) == 0
    assert not (tmp_path / "out").exists()  # nothing ran
    return capsys.readouterr().out.splitlines()


def test_smoke_prints_the_install_then_pytest_on_the_image_python(tmp_path, monkeypatch, capsys):
    out, py = tmp_path / "out", sys.executable
    assert dry_run(tmp_path, monkeypatch, capsys, "smoke") == [
        f"+ {py} tools/fetch_collections.py --self-only",
        f"+ {py} tools/gpu_stage.py install /root/stage {tmp_path}/site > {out}/install.log 2>&1",
        "+ PYTHONPATH=/root/site PYTHONUNBUFFERED=1 timeout 560 /opt/torch/.venv/bin/python -m pytest "
        f"tests/gpu/test_smoke.py -v -p no:cacheprovider --gpu-out /root/gpu-out > {out}/pytest-test_smoke.log 2>&1",
        f"+ cp -r /root/gpu-out {out}/gpu-out",
    ]


def test_suite_runs_each_file_and_installs_nothing_where_sglang_is(tmp_path, monkeypatch, capsys):
    (tmp_path / "site" / "sglang").mkdir(parents=True)
    lines = dry_run(tmp_path, monkeypatch, capsys, "suite", "--budget", "300", "test_dense.py", "test_nextn.py")
    assert not [line for line in lines if "gpu_stage.py install" in line]
    assert [re.search(r"timeout (\d+) .* (tests/gpu/\S+)", line).groups() for line in lines[1:3]] == [
        ("300", "tests/gpu/test_dense.py"),
        ("300", "tests/gpu/test_nextn.py"),
    ]


def test_parity_passes_its_arguments_and_collects_the_record(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    args = ("parity", "--timeout", "540", "commit 9e49fbd", "--levels", "", "--rates", "16:96")
    lines = dry_run(tmp_path, monkeypatch, capsys, *args)[2:]
    work = re.search(r"--out (/root/parity-\d+) ", lines[0]).group(1)
    assert lines == [
        f"+ PYTHONPATH=/root/site PYTHONUNBUFFERED=1 timeout 540 /opt/torch/.venv/bin/python benchmarks/gpu_parity.py "
        f"--out {work} --source 'commit 9e49fbd' --levels '' --rates 16:96 > {out}/parity-stdout.log 2>&1",
        f"+ cp {work}/parity-raw.json {work}/parity-table.md {out}",
        f"+ cat {work}/logs/*.log 2>&1 | gzip > {out}/parity-server.log.gz",
        f"+ tar czf {out}/runs.tar.gz --exclude=dataset-* -C {work} runs",
        "+ nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader",
    ]
    parity = shlex.split(lines[0].split(" > ")[0])[5:]
    assert parity[:2] == ["/opt/torch/.venv/bin/python", "benchmarks/gpu_parity.py"]
    sys.path.insert(0, str(REPO / "benchmarks"))
    import gpu_parity

    with pytest.raises(SystemExit):
        gpu_parity.main(["--help"])
    options = capsys.readouterr().out
    assert [w for w in parity[2:] if w.startswith("--") and f"{w} " not in options] == []  # gpu_parity.py takes all


def test_up_boots_the_lab_over_the_carried_tree_and_deploys_with_the_key_unprinted(tmp_path, monkeypatch, capsys):
    out, py = tmp_path / "out", sys.executable
    lines = dry_run(tmp_path, monkeypatch, capsys, "up", "--profile", "dense")
    assert lines[:8] == [
        "+ rm -rf /root/gpu-src",
        "+ cp -r build/gpu-src /root/gpu-src",
        f"+ {py} /root/gpu-src/tools/fetch_collections.py --self-only",
        f"+ {py} tools/fetch_collections.py --self-only",
        f"+ {py} tools/gpu_stage.py install /root/stage {tmp_path}/site > /root/labout/install.log 2>&1",
        "+ a new API key into /root/gpulab.key (0600)",
        f"+ {py} /root/gpu-src/tools/make_models.py /data/models > /root/labout/models.log 2>&1",
        f"+ {py} tools/gpu_lab.py boot build/gpu-lab /root/gpulab --bind /root/labout > /root/labout/boot.txt 2>&1",
    ]
    assert lines[8] == (
        "+ SGLANG_LAB_API_KEY=$(cat /root/gpulab.key) SGLANG_DEPLOY_RESULTS=/root/labout/results "
        f"ANSIBLE_CONFIG=/root/gpu-src/ansible.cfg PYTHONPATH=/root/gpu-src/src:/root/gpu-src/collections "
        f"{py} tools/gpu_lab.py exec /root/gpulab -- bash -c 'cd "
        "/root/gpu-src && /root/gpulab/ansible/bin/ansible-playbook -i inventory/gpu-lab.yml site.yml -e profile=dense'"
        " > /root/labout/deploy-first.log 2>&1"
    )
    assert lines[9:] == [
        f"+ cp -r /root/labout/. {out}",
        f"+ {py} tools/gpu_lab.py exec /root/gpulab -- journalctl -u sglang --no-pager -o short-iso 2>&1 | gzip > "
        f"{out}/journal-sglang.txt.gz",
    ]


def test_deploy_takes_its_name_and_extra_vars(tmp_path, monkeypatch, capsys):
    args = ("deploy", "dense-b", "--name", "stray", "-e", "sglang_fleet_force_restart=true")
    line = dry_run(tmp_path, monkeypatch, capsys, *args)[0]
    assert line.endswith(
        "site.yml -e profile=dense-b -e sglang_fleet_force_restart=true' > /root/labout/stray.log 2>&1"
    )


def test_up_gives_its_extra_vars_to_the_first_deploy(tmp_path, monkeypatch, capsys):
    lines = dry_run(tmp_path, monkeypatch, capsys, "up", "-e", "sglang_benchmark_requests=4", "-e", "a=b c")
    assert lines[8].endswith(
        "site.yml -e profile=dense -e sglang_benchmark_requests=4 -e '\"'\"'a=b c'\"'\"''"
        " > /root/labout/deploy-first.log 2>&1"
    )


def test_restart_alternates_the_caches_in_each_round(tmp_path, monkeypatch, capsys):
    lines = dry_run(tmp_path, monkeypatch, capsys, "restart", "--caches", "warm,cold", "--repeats", "2")
    found = [
        re.search(r"restart-unit (\S+) (\w+)' >> /root/labout/restarts.jsonl 2> /root/labout/\1.err", line)
        for line in lines[:4]
    ]
    assert [m.groups() for m in found] == [
        ("warm-1", "warm"),
        ("cold-1", "cold"),
        ("warm-2", "warm"),
        ("cold-2", "cold"),
    ]
    with pytest.raises(gpu_lab.LabError, match="warm and cold, not warm,hot"):
        gpu_lab.restart(gpu_lab.Session(tmp_path, tmp_path, dry_run=True), ["warm", "hot"], 1)


def test_compare_runs_a_command_line_the_cli_takes(tmp_path, monkeypatch, capsys):
    from sglang_deploy import cli

    line = dry_run(tmp_path, monkeypatch, capsys, "compare", "dense", "dense-b", "--repeats", "3")[0]
    shell = shlex.split(line.split(" > ")[0])[-1]
    assert shell.startswith("cd /root/gpu-src && PATH=/root/gpulab/ansible/bin:$PATH python -m sglang_deploy.cli ")
    args = cli.build_parser().parse_args(shlex.split(shell.split("sglang_deploy.cli ")[1]))
    assert (args.profiles, args.repeats, args.out) == (["dense", "dense-b"], 3, "/root/labout/compare")


def test_compare_on_the_captured_trace_passes_bench_flags_the_cli_takes(tmp_path, monkeypatch, capsys):
    from sglang_deploy import cli

    argv = ("compare", "dense", "dense-b", "--repeats", "2", "--trace", "--bench=--num-prompts", "--bench=150")
    shell = shlex.split(dry_run(tmp_path, monkeypatch, capsys, *argv)[0].split(" > ")[0])[-1]
    args = cli.build_parser().parse_args(shlex.split(shell.split("sglang_deploy.cli ")[1]))
    assert (args.dataset_name, args.dataset_path, args.requests) == ("trace", "/root/labout/captured.jsonl", 150)


def test_the_mixed_load_is_seeded_poisson_with_shared_prefixes_under_journalds_line():
    load = gpu_lab.mixed_load(600, 3.0, seed=7)
    assert load == gpu_lab.mixed_load(600, 3.0, seed=7) != gpu_lab.mixed_load(600, 3.0, seed=8)
    times = [line["timestamp"] for line in load]
    assert times == sorted(times) and 1500 < len(load) < 2100 and times[-1] <= 600_000
    assert max(line["input_length"] for line in load) <= 2500  # ~11 bytes a token at log level 3: under 48 KiB
    firsts = [line["hash_ids"][0] for line in load]
    assert {0, 1, 2, 3, 10, 12} <= set(firsts) and sum(f < 1000 for f in firsts) > len(load) / 2
    for line in load:  # one id per 512-token block
        assert len(line["hash_ids"]) == -(-line["input_length"] // 512)


def test_traffic_starts_the_load_once_logging_is_on_and_keeps_the_capture(tmp_path, monkeypatch, capsys):
    from sglang_deploy import cli

    lines = dry_run(tmp_path, monkeypatch, capsys, "traffic", "--duration", "30", "--rate", "2")
    assert lines[0] == "+ a seeded mixed load (seed 7, 2.0 req/s for 30 s) into /root/labout/load.jsonl"
    words = shlex.split(lines[1])
    shell = words[words.index("-c") + 1]
    capture, rest = shell.split("python -m sglang_deploy.cli ", 2)[1:]
    assert capture.startswith('traffic capture --duration 90.0 --max-requests "$N" --out /root/labout/captured.jsonl')
    assert shell.index("log_requests=True") < shell.index("sglang_deploy.cli bench")
    bench = rest.split(" > ")[0]
    args = cli.build_parser().parse_args(shlex.split(bench))
    assert (args.dataset_name, args.dataset_path, args.warmup) == ("trace", "/root/labout/load.jsonl", 0)


def test_a_phase_needs_an_out_folder(monkeypatch, capsys):
    monkeypatch.delenv("OUT", raising=False)
    assert gpu_lab.main(["smoke"]) == 2
    assert "no --out and no $OUT" in capsys.readouterr().err


def test_a_phase_runs_timed_with_its_log_its_gzip_and_the_key_from_its_file(tmp_path, capsys):
    s = gpu_lab.Session(tmp_path / "logs", tmp_path / "out", dry_run=False)
    (tmp_path / "key").write_text("k" * 48 + "\n")
    env = {"KEY": gpu_lab.FileText(tmp_path / "key")}
    show = [sys.executable, "-c", "import os, sys; print(os.environ['KEY'][:3]); print('late', file=sys.stderr)"]
    assert s.run(show, phase="one", log=tmp_path / "out" / "one.log", env=env, tail=1) == 0
    assert (tmp_path / "out" / "one.log").read_text() == "kkk\nlate\n"
    assert s.run([sys.executable, "-c", "raise SystemExit(3)"], phase="two") == 3
    assert s.run(["cat", str(tmp_path / "out" / "*.log")], log=tmp_path / "out" / "all.gz") == 0
    assert gzip.open(tmp_path / "out" / "all.gz").read() == b"kkk\nlate\n"
    phases = (tmp_path / "logs" / "phases.txt").read_text().splitlines()
    assert [re.sub(r"[0-9.]+ s rc (\d+), started \S+Z$", r"S s rc \1", p) for p in phases] == [
        "phase one: S s rc 0",
        "phase two: S s rc 3",
    ]
    printed = capsys.readouterr().out
    assert "KEY=$(cat " in printed and "k" * 48 not in printed and "late\n" in printed


def test_restart_unit_empties_the_caches_when_cold_and_reports_the_start(tmp_path, monkeypatch):
    from ansible_collections.sglang.deploy.plugins.module_utils import readiness, startup

    cache = tmp_path / "cache" / "venv-1" / "flashinfer"
    cache.mkdir(parents=True)
    monkeypatch.setattr(gpu_lab, "CACHES", str(tmp_path / "cache" / "*" / "*"))
    calls = []
    monkeypatch.setattr(gpu_lab.subprocess, "run", lambda argv, check: calls.append(argv))
    monkeypatch.setattr(readiness, "wait_ready", lambda url, **kw: calls.append((url, kw["unit"])))
    monkeypatch.setattr(startup, "read_journal", lambda unit, ready_at: {"summary": "ready 33.0 s after its start"})
    monkeypatch.setenv("SGLANG_LAB_API_KEY", "k" * 24)
    got = gpu_lab.restart_unit("warm-1", "warm")
    assert cache.is_dir() and got["name"] == "warm-1" and got["summary"] == "ready 33.0 s after its start"
    assert calls == [
        ["systemctl", "reset-failed", "sglang"],
        ["systemctl", "restart", "sglang"],
        ("http://127.0.0.1:30000", "sglang"),
    ]
    got = gpu_lab.restart_unit("cold-1", "cold")
    assert not cache.exists() and got["caches"] == "cold" and json.dumps(got)


def test_boot_script_quotes_its_paths_and_refuses_a_line_break(monkeypatch):
    """Root runs the script: a --bind or root path is one word, never a command (issue 48, R12)."""
    monkeypatch.setattr(gpu_boot, "HOST_MOUNTS", ())
    script = gpu_boot.boot_script(Path("/l/m d"), Path("/l/upper"), Path("/l/work"), ["/x;touch /pwned", "/$(id)"])
    words = [shlex.split(line) for line in script.splitlines()]
    assert ["mount", "--rbind", "/x;touch /pwned", "/l/m d/x;touch /pwned"] == words[7][4:]
    assert ["mkdir", "-p", "/l/m d/$(id)", "&&", "mount", "--rbind", "/$(id)", "/l/m d/$(id)"] == words[8]
    assert words[-1] == ["exec", "chroot", "/l/m d", "/usr/lib/systemd/systemd", "--system"]
    with pytest.raises(gpu_lab.LabError, match="holds a line break"):
        gpu_boot.boot_script(Path("/l/m"), Path("/l/u"), Path("/l/w"), ["/ok\nreboot"])


@pytest.mark.parametrize("root", ["/l,upperdir=/etc", "/l:x", "/l\\,x"])
def test_boot_script_refuses_a_root_the_overlay_options_would_read_otherwise(root):
    """A comma in the root path added overlay mount options (lowerdir=/,upperdir=/l,upperdir=/etc/upper,...): shell
    quoting does not guard inside -o (issue 48, red-team of R12)."""
    with pytest.raises(gpu_lab.LabError, match=f"{re.escape(repr(root + '/upper'))} holds a comma, colon or backslash"):
        gpu_boot.boot_script(Path(f"{root}/merged"), Path(f"{root}/upper"), Path(f"{root}/work"), [])


@pytest.mark.parametrize("name", ["../../etc/cron.d/x", "a/b", "..", ".hidden", ""])
def test_deploy_refuses_a_name_that_is_no_plain_file_name(tmp_path, monkeypatch, capsys, name):
    """The phase's log stays in the lab's output folder (issue 48, R12)."""
    monkeypatch.setattr(gpu_lab, "SITE", tmp_path / "site")
    argv = ["deploy", "--dry-run", "--out", str(tmp_path / "out"), "--name", name, "dense"]
    if not name:
        argv[-1] = "../dense"  # the default name, deploy-PROFILE, is checked too
    assert gpu_lab.main(argv) == 2
    assert "no plain file name" in capsys.readouterr().err


def test_a_checkout_without_the_collection_link_gets_it_and_ansible_finds_the_modules(tmp_path):
    """Issue 52: the GPU lab's checkout (a git archive: no collections/ link) failed its first deploy with
    "couldn't resolve module/action 'sglang.deploy.sglang_profile'"; `up` now makes the link there first."""
    tree = tmp_path / "gpu-src"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    env = {**os.environ, "ANSIBLE_CONFIG": str(tree / "ansible.cfg")}
    doc = [str(Path(sys.executable).parent / "ansible-doc"), "-t", "module", "sglang.deploy.sglang_quality"]
    missing = subprocess.run(doc, cwd=tree, env=env, capture_output=True, text=True)
    assert "sglang.deploy.sglang_quality was not found" in missing.stderr
    subprocess.run([sys.executable, str(tree / "tools" / "fetch_collections.py"), "--self-only"], check=True)
    found = subprocess.run(doc, cwd=tree, env=env, capture_output=True, text=True)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", found.stdout)
    assert found.returncode == 0 and f"sglang.deploy.sglang_quality ({tree}" in shown, found.stderr
    # compare and restart-unit run plain Python in the lab: LAB_ENV's PYTHONPATH finds the package and the collection
    # of that checkout (compare's `No module named 'sglang_deploy'`, issue 52).
    path = gpu_lab.LAB_ENV["PYTHONPATH"].replace(str(gpu_lab.LAB_SRC), str(tree))
    imports = "import sglang_deploy.cli as c, ansible_collections.sglang.deploy.plugins.module_utils.startup as s"
    where = subprocess.run(
        [sys.executable, "-c", f"{imports}; print(c.__file__); print(s.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
    )
    assert where.stdout.split() == [
        f"{tree}/src/sglang_deploy/cli/__init__.py",
        f"{tree}/collections/ansible_collections/sglang/deploy/plugins/module_utils/startup.py",
    ], where.stderr


def test_a_word_with_a_star_is_a_glob_only_where_it_holds_no_whitespace(tmp_path):
    (tmp_path / "part00").touch()
    (tmp_path / "part01").touch()
    assert gpu_lab.expand(f"{tmp_path}/part*") == [f"{tmp_path}/part00", f"{tmp_path}/part01"]
    assert gpu_lab.expand(f"{tmp_path}/none*") == [f"{tmp_path}/none*"]
    line = f"cd {tmp_path} && ls part*"  # a command line for bash -c: its shell expands it, not this one
    (tmp_path / "cd ").mkdir()
    (tmp_path / "cd " / "x").touch()
    assert gpu_lab.expand(f"{tmp_path}/cd */x*") == [f"{tmp_path}/cd */x*"]
    assert gpu_lab.expand(line) == [line]
