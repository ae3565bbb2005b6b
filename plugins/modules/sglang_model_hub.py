#!/usr/bin/python
"""Documentation of the action plugin sglang_model_hub (action_plugins/sglang_model_hub.py), which runs on the
controller: download a model lock's Hub repository at its commit into a folder (the controller cache)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_hub
short_description: Download a model lock's files from the Hugging Face Hub (or a mirror) at the locked commit
description:
  - Downloads each of the lock's files missing from O(folder), of another size or altered there, from its
    repository's resolve URL at its commit (files already there are kept), then hashes every file against the lock;
    a file that does not match is deleted and named in the failure.
  - A download stops past the file's locked size and at O(file_timeout) seconds, each named in the failure.
  - O(endpoint) must be https, or http to a loopback address; other http (the token and the files travel in clear)
    only with O(allow_insecure_endpoint).
  - An action plugin, so it always runs on the controller, in Ansible's own Python (stdlib only for the download);
    the role runs it once per play and the hosts get the files from there (one download per fleet).
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  lock:
    description: The model lock (with C(repository) and a commit as C(revision)).
    type: dict
    required: true
  folder:
    description: Folder that receives the files.
    type: path
    required: true
  token:
    description: Hugging Face token (from a vault); never logged or returned.
    type: str
    default: ""
  endpoint:
    description: Hub endpoint, e.g. a mirror (HF_ENDPOINT); empty is the Hub.
    type: str
    default: ""
  allow_insecure_endpoint:
    description: Accept an http O(endpoint) that is not a loopback address.
    type: bool
    default: false
  file_timeout:
    description: Seconds each file's download may take.
    type: float
    default: 3600
notes:
  - Check mode downloads nothing.
"""

EXAMPLES = r"""
- name: Download the checkpoint into the controller cache
  sglang_model_hub:
    lock: "{{ __lock }}"
    folder: ~/.cache/sglang-deploy/models/qwen3-0.6b-0123456789ab
    token: "{{ vault_hf_token }}"
  run_once: true
"""

RETURN = r"""
folder:
  description: The folder that holds the files.
  returned: always
  type: str
"""
