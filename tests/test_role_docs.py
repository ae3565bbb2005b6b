"""Role variables: defaults and argument_specs agree, and README.md documents them as generated."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta" / "argument_specs.yml").exists())


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_specified(role):
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"].get("options", {})
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    assert sorted(set(defaults) - set(options)) == [], "defaults without an argument spec"
    for name, value in defaults.items():
        assert name.startswith(f"{role}_"), f"{name} lacks the role prefix"
        if "default" in options[name] and not (isinstance(value, str) and "{{" in value):
            assert options[name]["default"] == value, f"{name}: spec default differs from defaults/main.yml"


def test_readme_role_variables_are_generated_from_the_specs():
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "role_docs.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
