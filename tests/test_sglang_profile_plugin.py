"""The sglang_profile action plugin through a real ansible-playbook run against localhost."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ansible_json import needs_playbook, run_playbook

from sglang_deploy.paths import SHARED_DEFAULTS

FIXTURES = Path(__file__).parent / "fixtures"
pytestmark = needs_playbook


def play(tmp_path: Path, task_args: dict, extra_vars: dict | None = None) -> tuple[int, dict]:
    playbook = [
        {
            "name": "Render a profile",
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(SHARED_DEFAULTS / "sglang.yml"), str(SHARED_DEFAULTS / "profiles.yml")],
            "vars": extra_vars or {},
            "tasks": [{"name": "Render and validate", "sglang.deploy.sglang_profile": task_args, "register": "launch"}],
        }
    ]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    out, doc = run_playbook(
        ["-i", "localhost,", "-c", "local", str(path)], tmp_path, {"ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    )
    return out.returncode, doc["plays"][0]["tasks"][0]["hosts"]["localhost"]


COMMON = {
    "profiles": "{{ sglang_profiles }}",
    "settings": "{{ sglang_launch_settings }}",
    "facts": "{{ sglang_gpu | sglang.deploy.sglang_host_rule_facts | combine(sglang_profile_facts) }}",
}
GPU = {"sglang_gpu": {"count": 8, "arch": "sm_120", "nvlink": False}}


def test_plugin_renders_translates_and_warns(tmp_path):
    rc, res = play(tmp_path, {**COMMON, "profile": "nextn", "sglang_version": "0.5.23", "concurrency": 64}, GPU)
    assert rc == 0, res
    assert res["argv"][res["argv"].index("--mamba-radix-cache-strategy") + 1] == "extra_buffer"
    assert res["env"] == {"OMP_NUM_THREADS": "16"} and res["flags_release"] == "0.5.23"
    assert any("SGLANG_ENABLE_SPEC_V2" in n for n in res["notes"])
    assert any(w.startswith("spec-running-cap:") for w in res["warnings"])
    skipped = {f["rule"] for f in res["findings"] if f["level"] == "info"}
    assert "arch-moe-backend" not in skipped and "model-path" in skipped  # GPU facts used, model facts unknown


def test_plugin_refuses_with_every_error(tmp_path):
    seed = yaml.safe_load((FIXTURES / "seed_launches.yml").read_text())["sglang_profiles"]
    facts = {
        "gpu_arch": "sm_120",
        "gpu_count": "8",
        "nvlink": "false",
        "model_architecture": "Qwen3_5MoeForConditionalGeneration",
        "model_path_exists": False,
    }
    rc, res = play(
        tmp_path,
        {
            "profile": "seed-msg5980",
            "profiles": seed,
            "settings": "{{ sglang_launch_settings }}",
            "sglang_version": "0.5.10.post1",
            "facts": facts,
        },
    )
    assert rc == 2 and res["failed"]
    for rule in ("spec-triple", "hybrid-spec-extra-buffer", "model-path"):
        assert f"[{rule}]" in res["msg"]


def test_plugin_unknown_profile_fails_cleanly(tmp_path):
    rc, res = play(tmp_path, {**COMMON, "profile": "ghost"}, GPU)
    assert rc == 2 and "unknown profile 'ghost'" in res["msg"]
    assert res["unknown_profile"] == "ghost" and {"baseline", "nextn"} <= set(res["available_profiles"])


def test_plugin_never_returns_the_api_key(tmp_path):
    settings = {"sglang_model_path": "/m", "sglang_tp": 8}
    rc, res = play(
        tmp_path,
        {
            **COMMON,
            "profile": "baseline",
            "settings": settings,
            "api_key": "s3cret-key-0123456",
            "sglang_version": "0.5.23",
        },
        GPU,
    )
    assert rc == 0 and "s3cret-key" not in json.dumps(res)
    assert "--api-key" not in res["argv"] and res["secret_env_keys"] == ["SGLANG_API_KEY"]


def test_plugin_resolve_only_needs_no_release_settings_or_facts(tmp_path):
    """playbooks/plan.yml asks it before the stack play fixes the release: the name and extends chain only."""
    rc, res = play(tmp_path, {"profile": "nextn", "profiles": "{{ sglang_profiles }}", "resolve_only": True})
    assert rc == 0 and res["chain"][-1] == "nextn" and "argv" not in res
    rc, res = play(tmp_path, {"profile": "ghost", "profiles": "{{ sglang_profiles }}", "resolve_only": True})
    assert rc == 2 and res["unknown_profile"] == "ghost" and "baseline" in res["available_profiles"]
