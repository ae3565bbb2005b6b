"""Profiles: inheritance, settings, secrets, per-version translation, shipped profiles vs recorded and real parsers."""

from __future__ import annotations

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest

from sglang_deploy.launch import flags, profiles
from sglang_deploy.rules import rules
from sglang_deploy.paths import REPO

SHIPPED = profiles.load_profiles()
SETTINGS = profiles.load_settings()
FIXTURES = Path(__file__).parent / "fixtures"
# The releases the shipped profiles must render for, each with its own recorded list.
TARGETS = ["0.5.9", "0.5.10.post1", "0.5.23"]
OPERATOR_HOST = {
    "gpu_arch": "sm_120",
    "gpu_count": 8,
    "nvlink": False,
    "model_architecture": "Qwen3_5MoeForConditionalGeneration",
    "model_quantization": "modelopt_fp4",
    "model_path_exists": True,
}


def test_extends_merges_parent_first_and_null_removes():
    profile_defs = {
        "a": {"description": "a", "args": {"x": 1, "y": 2}, "env": {"E": 1, "F": True}},
        "b": {"description": "b", "extends": "a", "args": {"y": None, "z": 3}, "env": {"E": None}},
    }
    b = profiles.resolve("b", profile_defs)
    assert b.args == {"x": 1, "z": 3}
    assert b.env == {"F": "1"}
    assert b.chain == ["a", "b"]


@pytest.mark.parametrize(
    "profile_defs, name, match",
    [
        (
            {"a": {"description": "a", "extends": "b"}, "b": {"description": "b", "extends": "a"}},
            "a",
            "cycle a -> b -> a",
        ),
        ({"a": {"description": "a", "extends": "a"}}, "a", "cycle"),
        ({"a": {"description": "a", "extends": "ghost"}}, "a", "extends unknown profile 'ghost'"),
        ({"a": {"description": "a"}}, "b", r"unknown profile 'b'; available: a"),
        ({"a": {"args": {}}}, "a", "needs a description"),
        ({"a": {"description": "a", "flags": {}}}, "a", "unknown keys"),
        ({"a": {"description": "a", "args": {"--tp": 8}}}, "a", "without leading dashes"),
        ({"a": {"description": "a", "extends": ["b"]}}, "a", "one profile name"),
    ],
)
def test_resolve_errors(profile_defs, name, match):
    with pytest.raises(profiles.ProfileError, match=match):
        profiles.resolve(name, profile_defs)


def test_render_settings_then_profile_and_value_forms():
    profile_defs = {
        "p": {
            "description": "p",
            "args": {"tp": 4, "enable-metrics": True, "disable-radix-cache": False, "cuda-graph-bs-decode": [1, 2, 4]},
        }
    }
    launch = profiles.render("p", profile_defs, SETTINGS, "0.5.23")
    argv = launch.argv
    assert argv[:2] == ["--model-path", SETTINGS["sglang_model_path"]]
    assert argv.count("--tp-size") == 1 and argv[argv.index("--tp-size") + 1] == "4"  # alias overrides the setting
    assert "--enable-metrics" in argv and "--disable-radix-cache" not in argv
    i = argv.index("--cuda-graph-bs-decode")
    assert argv[i + 1 : i + 4] == ["1", "2", "4"]
    assert any("--tp is an abbreviation of --tp-size" in n for n in launch.notes)


def test_api_key_never_in_argv():
    launch = profiles.render("baseline", SHIPPED, {**SETTINGS, "sglang_api_key": "s3cret-0123456789"}, "0.5.23")
    assert "s3cret" not in json.dumps(launch.argv) and "s3cret" not in repr(launch)
    assert "--api-key" not in launch.argv
    assert launch.secret_env == {"SGLANG_API_KEY": "s3cret-0123456789"}
    assert profiles.render("baseline", SHIPPED, SETTINGS, "0.5.23").secret_env == {}


def test_version_defaults_to_the_settings_default_and_nearest_lower_release():
    assert profiles.render("baseline", SHIPPED, SETTINGS, "0.5.10.post1").sglang_version == "0.5.10.post1"
    assert profiles.render("baseline", SHIPPED, {"sglang_version_default": "0.5.9"}).sglang_version == "0.5.9"
    with pytest.raises(profiles.ProfileError, match="sglang_version_default"):
        profiles.render("baseline", SHIPPED, {})
    launch = profiles.render("baseline", SHIPPED, SETTINGS, "0.5.99")
    assert launch.flags_release == flags.recorded_releases()[-1]
    assert "nearest lower" in launch.notes[0]
    with pytest.raises(profiles.ProfileError, match="older than every recorded"):
        profiles.render("baseline", SHIPPED, SETTINGS, "0.4.0")


def test_recorded_lists_cover_the_target_releases():
    for version in TARGETS:
        assert flags.nearest_release(version) == version
        table = flags.flag_table(version)
        assert table.source.startswith("ServerArgs.add_cli_args") and "model-path" in table.flags


def test_mamba_strategy_renamed_both_ways():
    old = {"p": {"description": "p", "args": {"mamba-scheduler-strategy": "extra_buffer"}}}
    new = {"p": {"description": "p", "args": {"mamba-radix-cache-strategy": "extra_buffer"}}}
    assert "--mamba-radix-cache-strategy" in profiles.render("p", old, SETTINGS, "0.5.23").argv
    assert "--mamba-scheduler-strategy" in profiles.render("p", old, SETTINGS, "0.5.10.post1").argv
    back = profiles.render("p", new, SETTINGS, "0.5.10.post1")
    assert "--mamba-scheduler-strategy" in back.argv and any("before sglang 0.5.14" in n for n in back.notes)


def test_spec_v2_env_dropped_or_translated_from_0_5_14():
    on = {"p": {"description": "p", "env": {"SGLANG_ENABLE_SPEC_V2": 1}}}
    off = {"p": {"description": "p", "env": {"SGLANG_ENABLE_SPEC_V2": 0}}}
    assert profiles.render("p", on, SETTINGS, "0.5.10.post1").env == {"SGLANG_ENABLE_SPEC_V2": "1"}
    new_on = profiles.render("p", on, SETTINGS, "0.5.23")
    assert new_on.env == {} and new_on.dropped == [] and any("removed in sglang 0.5.14" in n for n in new_on.notes)
    new_off = profiles.render("p", off, SETTINGS, "0.5.23")
    assert new_off.env == {} and "--disable-overlap-schedule" in new_off.argv


def test_pcie_ipc_env_dropped_where_the_release_lacks_it():
    old = profiles.render("pcie-ipc", SHIPPED, SETTINGS, "0.5.10.post1")
    assert old.env == {} and old.dropped == ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"]
    assert profiles.render("pcie-ipc", SHIPPED, SETTINGS, "0.5.23").env == {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}


def test_shipped_profiles_exist_and_say_what_they_are():
    assert {"baseline", "nextn", "mscclpp", "no-custom-ar", "pcie-ipc"} <= set(SHIPPED)
    assert "172 tok/s" in SHIPPED["nextn"]["description"]
    nextn = profiles.resolve("nextn", SHIPPED)
    assert nextn.env == {"OMP_NUM_THREADS": "16", "SGLANG_ENABLE_SPEC_V2": "1"}
    assert nextn.args["speculative-algorithm"] == "NEXTN" and nextn.args["mamba-scheduler-strategy"] == "extra_buffer"


@pytest.mark.parametrize("version", TARGETS)
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_profiles_valid_on_the_operator_host(name, version):
    launch = profiles.render(name, SHIPPED, SETTINGS, version)
    findings = rules.validate(launch, OPERATOR_HOST, concurrency=32)
    assert rules.errors(findings) == []
    assert not [f for f in findings if f.level == rules.INFO and f.message.startswith("skipped")]


def _parser_pythons() -> dict[str, str]:
    """sglang version -> interpreter that can import its parser (scratch venvs, SGLANG_PARSER_PYTHONS)."""
    candidates = os.environ.get("SGLANG_PARSER_PYTHONS", "").split(os.pathsep) + glob.glob("/var/tmp/sgl-*/bin/python")
    found = {}
    for python in filter(None, candidates):
        try:
            out = subprocess.run(
                [python, "-c", "import importlib.metadata as m, sglang.srt.server_args; print(m.version('sglang'))"],
                capture_output=True,
                text=True,
                timeout=120,
                cwd="/",
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0:
            found.setdefault(out.stdout.strip().splitlines()[-1], python)
    return found


CHECK_ARGV = str(
    Path(__file__).resolve().parents[1] / "plugins" / "module_utils" / "check_argv.py"
)  # the script the roles run on hosts


def _check_with_real_parser(python: str, launches: dict) -> dict:
    out = subprocess.run(
        [python, CHECK_ARGV, json.dumps(launches)], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert out.returncode in (0, 2), out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])["refused"]


@pytest.fixture(scope="module")
def parser_pythons():
    return _parser_pythons()


@pytest.mark.parametrize("version", TARGETS)
def test_shipped_profiles_accepted_by_the_real_parser(version, parser_pythons):
    python = parser_pythons.get(version)
    if python is None:
        pytest.skip(f"no interpreter with sglang {version} importable (see tools/record_flags.py for scratch venvs)")
    argvs = {
        name: profiles.render(name, SHIPPED, {**SETTINGS, "sglang_api_key": "k" * 16}, version).argv for name in SHIPPED
    }
    assert _check_with_real_parser(python, argvs) == {}


def test_real_parser_check_catches_the_operator_command_on_new_releases(parser_pythons):
    python = parser_pythons.get("0.5.23")
    if python is None:
        pytest.skip("no interpreter with sglang 0.5.23 importable")
    raw = {"seed": ["--model-path", "/m", "--tp", "8", "--mamba-scheduler-strategy", "extra_buffer"]}
    assert "mamba-scheduler-strategy" in _check_with_real_parser(python, raw)["seed"]


def test_load_profiles_file_errors(tmp_path):
    bad = tmp_path / "p.yml"
    bad.write_text("other: 1\n")
    with pytest.raises(profiles.ProfileError, match="no variable 'sglang_profiles'"):
        profiles.load_profiles(bad)
    bad.write_text("sglang_profiles: [1]\n")
    with pytest.raises(profiles.ProfileError, match="must be a mapping"):
        profiles.load_profiles(bad)
    with pytest.raises(profiles.ProfileError, match="cannot read"):
        profiles.load_profiles(tmp_path / "missing.yml")
    assert set(profiles.load_profiles(FIXTURES / "seed_launches.yml")) >= {"seed-msg5980", "seed-msg6001"}
    assert profiles.PROFILES_FILE.is_relative_to(REPO)


@pytest.mark.parametrize("version", flags.recorded_releases())
def test_shipped_profiles_pass_every_recorded_release(version):
    for name in SHIPPED:
        launch = profiles.render(name, SHIPPED, SETTINGS, version)
        assert rules.errors(rules.validate(launch, OPERATOR_HOST)) == [], (name, version)


@pytest.mark.parametrize(("key", "what"), [("args", "flags"), ("env", "environment variables")])
def test_a_profile_with_too_many_flags_is_refused_at_once_with_one_problem(tmp_path, key, what):
    """33,000 flags took 45 s to validate and printed a line each (issue 20 item 10)."""
    entries = {f"flag-{i}" if key == "args" else f"VAR_{i}": 1 for i in range(33_000)}
    path = tmp_path / "profiles.yml"
    path.write_text(json.dumps({profiles.PROFILES_VAR: {"big": {"description": "big", key: entries}}}))
    with pytest.raises(profiles.ProfileError) as err:
        profiles.render("big", profiles.load_profiles(path), SETTINGS, "0.5.23")
    assert [rule for rule, _ in err.value.problems] == ["profile-size"]  # refused before a flag is validated
    assert f"sets 33000 {what}, over the {profiles.MAX_PROFILE_ENTRIES}" in str(err.value)
    small = {"big": {"description": "big", key: dict(list(entries.items())[: profiles.MAX_PROFILE_ENTRIES])}}
    assert len(getattr(profiles.resolve("big", small), key)) == profiles.MAX_PROFILE_ENTRIES


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ({"tp-size": 2, "tensor-parallel-size": 4}, "--tp-size and --tensor-parallel-size"),
        ({"tp": 2, "tp-size": 2}, "--tp and --tp-size"),  # an abbreviation argparse takes for it
        (
            {"dist-timeout": 60, "cuda-graph-bs": [1], "cuda-graph-bs-decode": [2]},
            "--cuda-graph-bs and --cuda-graph-bs-",
        ),
    ],
)
def test_two_spellings_of_one_flag_in_a_profile_are_refused(args, shown):
    """They merged silently, the last one winning (issue 20 item 11)."""
    with pytest.raises(profiles.ProfileError) as err:
        profiles.render("p", {"p": {"description": "p", "args": args}}, SETTINGS, "0.5.23")
    assert [rule for rule, _ in err.value.problems] == ["flag-spellings"] and shown in str(err.value)


def test_a_child_profile_overrides_its_parents_spelling_and_a_profile_the_settings():
    profile_defs = {
        "p": {"description": "p", "args": {"tensor-parallel-size": 2}},
        "c": {"description": "c", "extends": "p", "args": {"tp": 4}},
    }
    assert profiles.render("c", profile_defs, {**SETTINGS, "sglang_tp": 8}, "0.5.23").args["tp-size"] == 4
