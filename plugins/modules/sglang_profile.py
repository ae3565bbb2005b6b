#!/usr/bin/python
"""Documentation only: the work is done by action_plugins/sglang_profile.py on the controller."""

DOCUMENTATION = r"""
---
module: sglang_profile
short_description: Render an SGLang launch profile for a release and refuse launches that would crash
description:
  - Resolves a profile from O(profiles) (the C(sglang_profiles) variable, with C(extends) inheritance), adds the
    project-wide settings, translates flags and environment variables for the target SGLang release
    (e.g. C(--mamba-scheduler-strategy) becomes C(--mamba-radix-cache-strategy) in 0.5.14) and runs the
    validation rules of C(sglang_deploy.rules.rules) against O(facts).
  - Runs on the controller (action plugin); nothing on the host is touched.
  - Fails, listing every error, when a rule refuses the launch. Warnings become Ansible warnings.
  - Refuses, before any rule runs, what cannot be launched safely, listing each problem - environment names
    outside C([A-Za-z_][A-Za-z0-9_]*), line breaks or NUL in any value, a list on a flag that takes one value, a
    value beginning with C(--), a dict or non-finite number as a value, a secret in the profile (secret flags
    such as C(ssl-keyfile-password), secret-looking env names such as C(HF_TOKEN)), an API key under 16 characters.
  - The API key never enters RV(argv); when O(api_key) is set, only its variable name is returned
    (RV(secret_env_keys)); the server's launcher passes it to SGLang from the environment.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  profile:
    description: Profile name, a key of O(profiles).
    type: str
    required: true
  profiles:
    description: The C(sglang_profiles) mapping (name -> description, extends, args, env).
    type: dict
    required: true
  settings:
    description:
      - Project-wide settings C(sglang_model_path), C(sglang_served_model_name), C(sglang_tp), C(sglang_host),
        C(sglang_port).
    type: dict
    default: {}
  api_key:
    description:
      - C(sglang_api_key). Checked (16 characters or more, no whitespace) and needed for a launch reachable from
        other hosts; never returned.
    type: str
    default: ""
  sglang_version:
    description: Target SGLang release (e.g. C(0.5.23)); flag lists of the nearest lower recorded release are used.
    type: str
  facts:
    description:
      - Facts the rules need; a rule whose facts are missing is skipped (an info finding says so).
      - Keys C(gpu_arch) (e.g. C(sm_120)), C(gpu_count) (0 counts as unknown), C(nvlink), C(model_architecture),
        C(model_quantization) (e.g. C(modelopt_fp4), C(none)), C(model_path_exists), C(allow_open_bind) (listening
        on a non-loopback address without an API key is refused unless true), C(api_key_set) (an API key is
        configured though O(api_key) is not given).
    type: dict
    default: {}
  concurrency:
    description: Highest benchmark concurrency planned (checked against the running-request cap).
    type: int
  resolve_only:
    description:
      - Only resolve O(profile) in O(profiles) (its name, its C(extends) chain, the keys of each member); render
        nothing and run no rule. Needs no release, settings or facts; a run refuses an unknown profile before it
        changes any host (C(playbooks/plan.yml)).
    type: bool
    default: false
notes:
  - Supports check mode (it changes nothing).
"""

EXAMPLES = r"""
- name: Render and validate the launch profile
  sglang_profile:
    profile: "{{ sglang_server_profile }}"
    profiles: "{{ sglang_profiles }}"
    settings:
      sglang_model_path: "{{ sglang_model_path }}"
      sglang_served_model_name: "{{ sglang_served_model_name }}"
      sglang_tp: "{{ sglang_tp }}"
      sglang_host: "{{ sglang_host }}"
      sglang_port: "{{ sglang_port }}"
    api_key: "{{ sglang_api_key }}"
    sglang_version: "{{ sglang_version }}"
    facts:
      gpu_arch: "{{ sglang_gpu.arch }}"
      gpu_count: "{{ sglang_gpu.count }}"
      nvlink: "{{ sglang_gpu.nvlink }}"
      model_path_exists: "{{ model_dir.stat.exists }}"
    concurrency: 32
  register: sglang_launch
"""

RETURN = r"""
listen:
  description:
    - Host and port the rendered launch listens on (a profile's args may override the settings), whether that is
      reachable from other hosts (C(open) is anything but a loopback address), and the URL to reach it on the host.
  returned: when the profile resolves and is rendered (not O(resolve_only))
  type: dict
  sample: {host: 127.0.0.1, port: 30000, open: false, url: "http://127.0.0.1:30000"}
argv:
  description: Arguments after C(python -m sglang.launch_server).
  returned: when the profile resolves
  type: list
  elements: str
  sample: ["--model-path", "/data/models/Qwen3.5-397B-A17B-NVFP4", "--tp-size", "8", "--speculative-algorithm", "NEXTN"]
env:
  description: Environment variables of the launch (not secret).
  returned: when the profile resolves
  type: dict
  sample: {"OMP_NUM_THREADS": "16"}
secret_env_keys:
  description: Names of secret variables the unit's 0600 EnvironmentFile must hold (values never returned).
  returned: when the profile resolves
  type: list
  elements: str
  sample: ["SGLANG_API_KEY"]
notes:
  description: Flags and variables translated or dropped for the target release.
  returned: when the profile resolves
  type: list
  elements: str
sglang_version:
  description: The release rendered for.
  returned: when the profile resolves
  type: str
flags_release:
  description: The recorded flag list used (nearest lower recorded release).
  returned: when the profile resolves
  type: str
findings:
  description: Every rule finding (rule, level error/warning/info, message).
  returned: when the profile resolves
  type: list
  elements: dict
chain:
  description: The profile and its C(extends) ancestors, root first.
  returned: with O(resolve_only), when the profile resolves
  type: list
  elements: str
  sample: [baseline, nextn]
unknown_profile:
  description: The profile name asked for when it is not in O(profiles) (the task fails).
  returned: when the profile is unknown
  type: str
  sample: ghost
available_profiles:
  description: The profile names there are, when O(profile) is not one of them.
  returned: when the profile is unknown
  type: list
  elements: str
  sample: [baseline, nextn]
"""
