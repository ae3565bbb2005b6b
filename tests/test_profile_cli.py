"""`sglang-deploy profiles | render | validate`: output formats and exit codes (0 valid, 1 refused, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglang_deploy import cli
from sglang_deploy.launch import profiles

FIXTURES = Path(__file__).parent / "fixtures"
SEED = str(FIXTURES / "seed_launches.yml")
HOST = ["--gpu-arch", "sm_120", "--gpus", "8", "--no-nvlink"]


@pytest.fixture
def qwen_config(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
            }
        )
    )
    return str(tmp_path)


def test_profiles_lists_names_and_descriptions(capsys):
    assert cli.main(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "nextn (extends baseline)" in out and "172 tok/s" in out


def test_render_argv_is_the_json_argv_with_notes_on_stderr(capsys):
    assert cli.main(["render", "nextn", "--sglang-version", "0.5.23"]) == 0
    cap = capsys.readouterr()
    expected = profiles.render("nextn", profiles.load_profiles(), profiles.load_settings(), "0.5.23").argv
    assert json.loads(cap.out) == expected
    assert "renamed to --mamba-radix-cache-strategy" in cap.err and "SGLANG_ENABLE_SPEC_V2" in cap.err


def test_render_defaults_to_sglang_version_default_of_the_settings(capsys):
    """The --sglang-version help names the settings' sglang_version_default; the playbooks' sglang_version falls
    back to the same variable."""
    assert cli.main(["validate", "nextn"]) == 0
    default = profiles.load_settings()["sglang_version_default"]
    assert f"for sglang {default} " in capsys.readouterr().out
    assert "default(sglang_version_default)" in (profiles.SETTINGS_FILE).read_text()
    with pytest.raises(SystemExit):
        cli.main(["render", "--help"])
    assert "sglang_version_default of the sglang role's defaults" in " ".join(capsys.readouterr().out.split())


def test_render_env_shell_unit(capsys):
    assert cli.main(["render", "nextn", "--sglang-version", "0.5.10.post1", "--format", "env"]) == 0
    assert capsys.readouterr().out.splitlines() == ['OMP_NUM_THREADS="16"', 'SGLANG_ENABLE_SPEC_V2="1"']
    assert cli.main(["render", "nextn", "--format", "shell", "--python", "python3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("env OMP_NUM_THREADS=16") and "python3 -m sglang.launch_server" in out
    assert cli.main(["render", "nextn", "--format", "unit"]) == 0
    out = capsys.readouterr().out
    assert "Environment=" not in out and "EnvironmentFile=/etc/sglang/sglang.env\n" in out  # as the role writes it
    assert "ExecStart=/opt/sglang/venv/bin/python /opt/sglang-deploy/launch.py -m sglang.launch_server \\\n" in out
    assert "    --speculative-algorithm NEXTN \\\n" in out


def test_render_unknown_profile_is_a_usage_error(capsys):
    assert cli.main(["render", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown profile 'nope'" in err and "baseline" in err and "nextn" in err


def test_validate_exit_codes(capsys, qwen_config):
    assert (
        cli.main(["validate", "nextn", "--sglang-version", "0.5.10.post1", *HOST, "--model-config", qwen_config]) == 0
    )
    assert "OK: profile nextn" in capsys.readouterr().out
    rc = cli.main(
        [
            "validate",
            "seed-msg5980",
            "--profiles-file",
            SEED,
            "--sglang-version",
            "0.5.10.post1",
            *HOST,
            "--model-config",
            qwen_config,
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1 and "REFUSED" in out and "[spec-triple]" in out and "[hybrid-spec-extra-buffer]" in out
    assert cli.main(["validate", "nextn", "--model-config", "/nonexistent/x"]) == 2
    assert cli.main(["validate", "nextn", "--sglang-version", "0.1"]) == 2


def test_validate_warns_but_passes_and_verbose_shows_skipped(capsys):
    assert cli.main(["validate", "nextn", "--concurrency", "64", "-v"]) == 0
    out = capsys.readouterr().out
    assert "WARNING [spec-running-cap]" in out and "INFO    [arch-moe-backend] skipped" in out


def test_profiles_file_replaces_group_vars(capsys):
    assert cli.main(["profiles", "--profiles-file", SEED]) == 0
    out = capsys.readouterr().out
    assert "seed-msg6001" in out and "nextn (extends" not in out
