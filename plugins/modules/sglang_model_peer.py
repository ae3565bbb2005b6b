#!/usr/bin/python
"""Ansible module: download one file of a locked checkpoint from a peer host's share (the fan-out), within the lock."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_peer
short_description: Download one locked file of a checkpoint from a peer host's share into the partial folder
description:
  - Downloads O(path) from the share at O(url) (the peer's model_share, started by the fan-out round) with the
    round's O(token), into O(folder). The download stops past the file's locked O(size) and at O(timeout) seconds;
    a file of another size or sha256 than locked is deleted and the module fails, naming it. A listener on the share
    port that is not the round's share (no token) gets no request it can answer with a file the lock accepts.
  - The file is owned by the module's user (root) and O(group), mode 0440.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  url:
    description: The share, http://ADDRESS:PORT.
    type: str
    required: true
  token:
    description: The round's token of that share; never logged or returned.
    type: str
    required: true
  path:
    description: The file's path in the checkpoint, as the lock names it.
    type: str
    required: true
  size:
    description: The file's locked size in bytes.
    type: int
    required: true
  sha256:
    description: The file's locked sha256.
    type: str
    required: true
  folder:
    description: The partial folder the file is written into.
    type: path
    required: true
  group:
    description: The group of the file (the server's account).
    type: str
    required: true
  timeout:
    description: Seconds the download may take.
    type: int
    default: 7200
notes:
  - Check mode downloads nothing. Stdlib only. The download lives in plugins/module_utils/wheel_fetch.py.
"""

EXAMPLES = r"""
- name: Download a file of the checkpoint from the peer host
  sglang_model_peer:
    url: http://10.0.0.2:18180
    token: "{{ hostvars['gpu-01'].__sglang_model_share_token }}"
    path: config.json
    size: 663
    sha256: "{{ __entry.sha256 }}"
    folder: /data/models/lab-dense.partial
    group: sglang
"""

RETURN = r"""
bytes:
  description: Bytes downloaded.
  returned: success
  type: int
"""

import grp
import os
import re
import time
import urllib.parse

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.model import path_problem
from ansible_collections.sglang.deploy.plugins.module_utils.wheel_fetch import DOWNLOAD_ERRORS, download, sha256_file

_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "token": {"type": "str", "required": True, "no_log": True},
            "path": {"type": "str", "required": True},
            "size": {"type": "int", "required": True},
            "sha256": {"type": "str", "required": True},
            "folder": {"type": "path", "required": True},
            "group": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 7200},
        },
        supports_check_mode=True,
    )
    p = module.params
    problem = path_problem(p["path"]) or ("" if _SHA256.match(p["sha256"]) and p["size"] >= 0 else "a bad lock entry")
    if problem or not p["url"].startswith("http://"):
        module.fail_json(msg=f"{p['path'][:80]!r} from {p['url'][:80]!r}: {problem or 'the share is http://HOST:PORT'}")
    if module.check_mode:
        module.exit_json(changed=True, bytes=0)
    dest = os.path.join(p["folder"], p["path"])
    url = f"{p['url'].rstrip('/')}/{urllib.parse.quote(p['path'])}"
    try:
        size = download(
            url,
            dest,
            max_bytes=p["size"],
            deadline=time.monotonic() + p["timeout"],
            headers={"Authorization": f"Bearer {p['token']}"},
            cap=f"its locked size ({p['size']} bytes)",
        )
    except DOWNLOAD_ERRORS as exc:
        module.fail_json(msg=f"{p['path']}: download from {p['url']} failed: {exc}")
    digest = sha256_file(dest)
    if size != p["size"] or digest != p["sha256"]:
        os.unlink(dest)
        module.fail_json(
            msg=f"{p['path']} from {p['url']}: {size} bytes, sha256 {digest}; the lock says {p['size']} bytes, "
            f"sha256 {p['sha256']}: deleted (the peer's file is altered, or another server answers on its port)"
        )
    os.chown(dest, os.geteuid(), grp.getgrnam(p["group"]).gr_gid, follow_symlinks=False)
    os.chmod(dest, 0o440)  # just renamed into the root-only partial folder by download
    module.exit_json(changed=True, bytes=size)


if __name__ == "__main__":
    main()
