"""Documentation fragment: the sglang_bench module's `workload` option, written from the table of the workload
settings (plugins/module_utils/bench/workload.py WORKLOAD), the one place each setting is described."""

from __future__ import annotations

import json

from ansible_collections.sglang.deploy.plugins.module_utils.bench.workload import ansible_options


class ModuleDocFragment:
    DOCUMENTATION = json.dumps(
        {
            "options": {
                "workload": {
                    "description": "The workload, by bench_serving's names; a setting left out takes its default.",
                    "type": "dict",
                    "default": {},
                    "suboptions": ansible_options(documented=True),
                }
            }
        }
    )
