"""Filters sglang_monitor_rules: the Prometheus rule file for the SGLang releases the hosts run
(sglang_deploy.monitor.rules.render_rules); sglang_monitor_dashboard: the Grafana dashboard for one release
(sglang_deploy.monitor.dashboard.render_dashboard). A refusal (MonitorError: an unrecorded release, a bad setting, a
rule naming a metric the release lacks) fails the task with its message."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.filter.sglang import _checked
from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.monitor import dashboard, rules
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)


def monitor_rules(releases, settings=None) -> str:
    """The rule file for ``releases`` (one version or a list: each host's, repeats allowed)."""
    return rules.render_rules([releases] if isinstance(releases, str) else list(releases), settings)


class FilterModule:
    def filters(self):
        package.require()
        return {
            "sglang_monitor_rules": _checked(monitor_rules),
            "sglang_monitor_dashboard": _checked(dashboard.render_dashboard),
        }
