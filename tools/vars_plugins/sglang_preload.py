"""Vars plugin sglang_preload (ansible.cfg's vars_plugins; not part of the collection): no variables. At a play's first
task, in ansible-playbook's own process, it loads the collection's filter plugins, so that each task's worker (a fork
of that process) finds them and the sglang_deploy modules they import already loaded. Otherwise every worker whose task
uses one of them imports the lot again, through Ansible's collection loader, which compiles the sources each time:
about 0.1 CPU s a task, 6 of a lab deploy's 17 CPU s on the controller (results/history/repository.md)."""

from __future__ import annotations

from ansible.plugins.loader import filter_loader
from ansible.plugins.vars import BaseVarsPlugin


class VarsModule(BaseVarsPlugin):
    loaded = False

    def get_vars(self, loader, path, entities, cache=True):
        if not VarsModule.loaded:
            VarsModule.loaded = True
            try:
                filter_loader.get("sglang.deploy.sglang_escaped")  # loads every filter file of the collection
            except Exception:  # noqa: BLE001 - only a speed-up: a play without the collection (no collections/ yet) runs on
                pass
        return {}
