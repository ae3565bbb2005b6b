"""The host side: what Ansible's modules and the roles run on a host (plugins/module_utils links here).

Stdlib only (hosts have no sglang_deploy install); imports nothing from the controller package above it nor from
the emulator. The controller uses the public names of these modules (readiness, server_http, bench, fleet probes,
port scan, stack operations, the launcher's secret flags, check_argv, process_age, gpu, model) and
sglang_defaults for SGLang's own values.
"""
