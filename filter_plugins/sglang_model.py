"""Filter sglang_model_fanout_rounds: the rounds of a host-to-host fetch (sglang_deploy.host.model.fanout_rounds)."""

from __future__ import annotations

from sglang_deploy.host import model


class FilterModule:
    def filters(self):
        return {"sglang_model_fanout_rounds": lambda hosts, holding: model.fanout_rounds(list(hosts), list(holding))}
