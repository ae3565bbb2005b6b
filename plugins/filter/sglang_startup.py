"""Filters of the server's start: its stack's cache folder and the environment that keeps a restart's JIT and
compile caches and gives FlashInfer's JIT its tools (sglang_deploy.host.startup)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.plugin_utils import package  # noqa: F401  (puts sglang_deploy on sys.path)

from sglang_deploy.host import startup


class FilterModule:
    def filters(self):
        return {"sglang_server_cache_dir": startup.cache_dir, "sglang_server_run_env": startup.run_env}
