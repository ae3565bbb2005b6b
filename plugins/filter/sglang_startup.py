"""Filters of the server's start: its stack's cache folder and the environment that keeps a restart's JIT and
compile caches and gives FlashInfer's JIT its tools (ansible_collections.sglang.deploy.plugins.module_utils.startup)."""

from __future__ import annotations

from ansible_collections.sglang.deploy.plugins.module_utils import startup


class FilterModule:
    def filters(self):
        return {"sglang_server_cache_dir": startup.cache_dir, "sglang_server_run_env": startup.run_env}
