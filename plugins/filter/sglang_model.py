"""Filters sglang_model_fanout_rounds: the rounds of a host-to-host fetch (sglang_deploy.fleet.model_fanout.fanout_rounds);
sglang_model_lock_id: a lock's id as the controller computes it (ansible_collections.sglang.deploy.plugins.module_utils.model.lock_id)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.fleet import model_fanout
    from ansible_collections.sglang.deploy.plugins.module_utils import model
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)


class FilterModule:
    def filters(self):
        package.require()
        return {
            "sglang_model_fanout_rounds": lambda hosts, holding: model_fanout.fanout_rounds(list(hosts), list(holding)),
            "sglang_model_lock_id": model.lock_id,
        }
