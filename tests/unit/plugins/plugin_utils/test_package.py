"""The controller plugins' access to the sglang_deploy package (plugins/plugin_utils/package.py): ansible-test units
runs these on the built collection (without the package, a requirement it does not install), pytest on the
checkout."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleError

from ansible_collections.sglang.deploy.plugins.plugin_utils import package


def test_a_missing_requirement_fails_naming_the_fix(monkeypatch):
    monkeypatch.setattr(
        package, "IMPORT_ERRORS", [ModuleNotFoundError("No module named 'packaging'", name="packaging")]
    )
    with pytest.raises(AnsibleError, match=r"cannot import packaging: .*pip install sglang-deploy"):
        package.require()


def test_a_filter_without_the_package_lists_its_names_and_fails_when_used(monkeypatch):
    """ansible-doc lists a filter plugin's filters without the package; running one names the fix."""
    monkeypatch.setattr(package, "IMPORT_ERRORS", [])
    stand_in = package.missing(ModuleNotFoundError("No module named 'sglang_deploy'", name="sglang_deploy"))
    with pytest.raises(AnsibleError, match=r"cannot import sglang_deploy: .*pip install sglang-deploy"):
        stand_in.fanout_rounds(["a"], ["b"])


def test_the_plugins_find_the_package_and_its_needs():
    pytest.importorskip("sglang_deploy")
    package.require()
    from sglang_deploy.launch import profiles  # noqa: PLC0415  (what the sglang_profile action plugin imports)

    assert profiles.resolve("a", {"a": {"description": "x", "args": {}}}).chain == ["a"]
