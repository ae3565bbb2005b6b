"""A launch: profiles as data rendered into SGLang flags and environment for a release, and their formats.

- profiles: load and resolve profiles, render a profile's launch for a version (Launch)
- profile_render: a profile's launch as `sglang-deploy render` prints it
- flags: SGLang's flags per release and the renames between releases
- launch_values: each flag or environment value as one safe word, the API key
- formats: the systemd unit's ExecStart, its EnvironmentFile, a shell command
- nodes: multi-node tensor-parallel groups (--nnodes > 1)
"""
