"""Filters sglang_model_fanout_rounds: the rounds of a host-to-host fetch (sglang_deploy.fleet.model_fanout.fanout_rounds);
sglang_model_lock_id: a lock's id as the controller computes it (ansible_collections.sglang.deploy.plugins.module_utils.model.lock_id)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

from ansible_collections.sglang.deploy.plugins.module_utils import model

try:
    from sglang_deploy.fleet import model_fanout
except ImportError as exc:  # a Python need of the collection is missing: the filter fails naming it
    model_fanout = package.missing(exc)


class FilterModule:
    def filters(self):
        return {
            "sglang_model_fanout_rounds": lambda hosts, holding: model_fanout.fanout_rounds(list(hosts), list(holding)),
            "sglang_model_lock_id": model.lock_id,
        }
