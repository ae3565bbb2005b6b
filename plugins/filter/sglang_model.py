"""Filter sglang_model_fanout_rounds: the rounds of a host-to-host fetch (sglang_deploy.fleet.model_fanout.fanout_rounds)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.fleet import model_fanout
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)


class FilterModule:
    def filters(self):
        package.require()
        return {
            "sglang_model_fanout_rounds": lambda hosts, holding: model_fanout.fanout_rounds(list(hosts), list(holding))
        }
