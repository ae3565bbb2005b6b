"""Filters for the monitoring role (sglang_deploy.monitor): sglang_monitor_rules, the Prometheus rule file for the
releases and the router the scrape targets run (scrape.target_rules); sglang_monitor_scrape_configs, prometheus.yml's
scrape jobs for those targets (scrape.scrape_configs); sglang_monitor_dashboard, the Grafana dashboard for one release
(dashboard.render_dashboard). A refusal (MonitorError: an unrecorded release, a bad setting or target, a rule naming
a metric the release lacks) fails the task with its message."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.filter.sglang import _checked
from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.monitor import dashboard, scrape
except ImportError as exc:  # a Python need of the collection is missing: each filter fails naming it
    dashboard = scrape = package.missing(exc)


class FilterModule:
    def filters(self):
        return {
            "sglang_monitor_rules": _checked(scrape.target_rules),
            "sglang_monitor_scrape_configs": _checked(scrape.scrape_configs),
            "sglang_monitor_dashboard": _checked(dashboard.render_dashboard),
        }
