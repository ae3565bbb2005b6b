"""Lookup sglang_benchmark_workload: the sglang_bench module's `workload` from the sglang_benchmark role's variables.
The logic is the sglang_deploy package's (compare.bench_vars, over the table of the settings host.bench.WORKLOAD)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_benchmark_workload
short_description: The benchmark workload that the sglang_benchmark role's variables set
description:
  - Reads the variable sglang_benchmark_<setting> of each setting of the sglang_bench module's
    O(sglang.deploy.sglang_bench#module:workload) that the task sees (role defaults, inventory, -e), templated,
    and returns them as one C(workload) mapping, the role's "none" values (0, "", [], {}) left out so that the
    module's defaults apply.
"""

RETURN = r"""
_raw:
  description: One mapping of workload settings.
  type: list
  elements: dict
"""

from ansible.plugins.lookup import LookupBase

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.compare import bench_vars
    from ansible_collections.sglang.deploy.plugins.module_utils.bench import WORKLOAD
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        package.require()
        names = [bench_vars.ROLE_PREFIX + name for name in WORKLOAD if bench_vars.ROLE_PREFIX + name in variables]
        given = bench_vars.from_role_vars({name: self._templar.template(variables[name]) for name in names})
        return [{name: value for name, value in given.items() if value is not None}]
