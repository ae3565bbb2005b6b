"""sglang_project_path: where the roles' stacks/, results/ and models/ are, in a checkout and in an installed
collection (ansible-test units on the built collection, pytest on the checkout)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.sglang.deploy.plugins.filter import sglang_project


def test_a_checkout_keeps_every_folder_in_it(monkeypatch):
    monkeypatch.setattr(sglang_project, "INSTALLED", False)
    assert sglang_project.project_path("results") == str(sglang_project.ROOT / "results")


def test_an_installed_collection_writes_where_ansible_runs_and_reads_its_own_stacks(monkeypatch, tmp_path):
    monkeypatch.setattr(sglang_project, "INSTALLED", True)
    monkeypatch.chdir(tmp_path)
    assert sglang_project.project_path("results") == str(tmp_path / "results")
    assert sglang_project.project_path("models") == str(tmp_path / "models")
    assert sglang_project.project_path("stacks") == str(sglang_project.ROOT / "stacks")
    assert (Path(sglang_project.project_path("stacks")) / "README.md").is_file()
