#!/usr/bin/python
"""Ansible module: plan a stack bundle install (venv path, pip runs or offline install, drift); changes nothing."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_stack_plan
short_description: Validate a stack bundle and plan its versioned venv (read-only)
description:
  - Validates a stack bundle (a C(stacks/*.yml) file loaded on the controller) and derives its content hash,
    the versioned venv C(<root>/venvs/<name>-<hash12>), the pip runs that build it, and the wheelhouse folder.
  - For a locked bundle, the offline install (no index, no dependency resolution, hashes required) of the lock's
    wheels from O(wheelhouse), and the per-package drift between the serving venv and the lock (shown with --diff).
  - Reads the serving stack from C(<root>/venv) (a symlink) and C(<root>/manifest.json), and reports the drift
    between that manifest and the bundle.
version_added: "0.1.0"
author: sglang-deploy maintainers (@sglang-deploy)
options:
  bundle:
    description: The stack bundle (name, python, torch, flashinfer, sglang, sglang_version, ...).
    type: dict
    required: true
  root:
    description: Folder holding C(venvs/), the C(venv) symlink and C(manifest.json).
    type: path
    default: /opt/sglang
  lock:
    description: The bundle's lock (C(stacks/<name>.lock.yml)), for a bundle with a C(lock) key; checked against its id.
    type: dict
    default: {}
  wheelhouse:
    description: Folder on the host that receives the lock's wheels from the controller wheelhouse.
    type: path
    default: /var/cache/sglang/wheelhouse
  installer:
    description: Installer of a locked bundle (uv is faster, see benchmarks/stack_install.py).
    type: str
    choices: [uv, pip]
    default: uv
notes:
  - Read-only; check mode is fully supported. Stdlib only. Bundle rules live in plugins/module_utils/stack.py.
"""

EXAMPLES = r"""
- name: Plan the stack
  sglang_stack_plan:
    bundle: "{{ lookup('file', 'stacks/stable-0.5.23-2026-11-30.yml') | from_yaml }}"
    lock: "{{ lookup('file', 'stacks/stable-0.5.23-2026-11-30.lock.yml') | from_yaml }}"
  register: __plan
"""

RETURN = r"""
bundle_id:
  description: First 12 hex digits of the sha256 of the bundle's canonical JSON.
  returned: success
  type: str
  sample: 3f1c2a9b8e7d
venv:
  description: The versioned venv for this bundle.
  returned: success
  type: str
  sample: /opt/sglang/venvs/stable-0.5.23-2026-11-30-3f1c2a9b8e7d
link:
  description: The stable symlink services use.
  returned: success
  type: str
current:
  description: Where the symlink points now (empty when there is none).
  returned: success
  type: str
built:
  description: The venv exists and holds a manifest of this bundle.
  returned: success
  type: bool
installed:
  description: Built and the symlink points at it (nothing to do).
  returned: success
  type: bool
partial:
  description: The venv folder exists without a manifest of this bundle (a failed build to clear).
  returned: success
  type: bool
pip_steps:
  description: Argument lists for C(python -m pip), in order.
  returned: success
  type: list
locked:
  description: The bundle has a lock; it installs offline from O(wheelhouse).
  returned: success
  type: bool
wheels:
  description: Lock entries (file, sha256, ...) the host needs, the installer's own wheel included.
  returned: success
  type: list
requirements:
  description: The --require-hashes requirements file of the lock's wheels in O(wheelhouse).
  returned: success
  type: str
requirements_file:
  description: Where the role writes the requirements file (inside the new venv).
  returned: success
  type: str
install_argv:
  description: Argument list of the offline install.
  returned: success
  type: list
install_env:
  description: Environment of the offline install (no host pip configuration).
  returned: success
  type: dict
installer:
  description: The installer of a locked bundle; pip for a bundle layered on an image's Python (C(base)).
  returned: success
  type: str
installer_dir:
  description: Venv that holds the locked uv (O(installer=uv)); empty otherwise.
  returned: success
  type: str
installer_requirements:
  description: The --require-hashes requirements file of the locked uv wheel.
  returned: success
  type: str
package_drift:
  description: Per package, where the serving venv differs from the lock (empty without a lock).
  returned: success
  type: list
drift:
  description: Differences between the serving manifest and the bundle (empty when none).
  returned: success
  type: list
manifest:
  description: The serving manifest (empty when none).
  returned: success
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang.deploy.plugins.module_utils.stack import (
    INSTALL_ENV,
    VENV_BOOTSTRAP,
    base_python_problems,
    bundle_id,
    check_lock,
    drift,
    install_argv,
    layered_lock_problems,
    lock_files,
    package_drift,
    pip_steps,
    requirements_text,
    validate,
    venv_name,
)


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "bundle": {"type": "dict", "required": True},
            "lock": {"type": "dict", "default": {}},
            "root": {"type": "path", "default": "/opt/sglang"},
            "wheelhouse": {"type": "path", "default": "/var/cache/sglang/wheelhouse"},
            "installer": {"type": "str", "choices": ["uv", "pip"], "default": "uv"},
        },
        supports_check_mode=True,
    )
    bundle, lock, root = module.params["bundle"], module.params["lock"], module.params["root"]
    errors = validate(bundle) + check_lock(bundle, lock)
    if not errors:
        errors = layered_lock_problems(bundle)
    if not errors and bundle.get("base"):
        errors = base_python_problems(bundle["base"]["python"])
    if errors:
        module.fail_json(msg=f"stack bundle {bundle.get('name')!r} is not usable: " + "; ".join(errors), errors=errors)

    name = venv_name(bundle)
    venvs_dir = os.path.join(root, "venvs")
    venv = os.path.join(venvs_dir, name)
    link = os.path.join(root, "venv")
    current = os.path.realpath(link) if os.path.islink(link) else ""
    built = _read_json(os.path.join(venv, "manifest.json")).get("bundle_id") == bundle_id(bundle)
    manifest = _read_json(os.path.join(root, "manifest.json")) if current else {}
    locked = bool(bundle.get("lock"))
    layered = bool(bundle.get("base"))
    # A layered venv installs with the image's pip (no locked uv: the lock is a folder of wheels).
    wheelhouse, installer = module.params["wheelhouse"], "pip" if layered else module.params["installer"]
    requirements = os.path.join(venv, "requirements.lock.txt")
    uv_entries = list(lock.get("installer", [])) if locked else []
    installer_dir = (
        os.path.join(root, "installers", f"uv-{uv_entries[0]['version']}")
        if locked and installer == "uv" and uv_entries
        else ""
    )
    if locked and installer == "uv" and not installer_dir:
        module.fail_json(
            msg=f"the lock of bundle {bundle['name']} has no uv wheel: lock it again, or set sglang_stack_installer: pip"
        )
    per_package = package_drift(lock, manifest.get("packages", {})) if locked and manifest else []
    found = drift(bundle, manifest) + per_package
    diff = {}
    if module._diff and locked:
        installed = {
            key: value for key, value in manifest.get("packages", {}).items() if key.lower() not in VENV_BOOTSTRAP
        }
        diff = {
            "before_header": f"{link} ({manifest.get('bundle', 'none')})",
            "after_header": f"lock {bundle['lock']['file']}",
            "before": "".join(f"{key}=={installed[key]}\n" for key in sorted(installed, key=str.lower)),
            "after": "".join(
                f"{entry['name']}=={entry['version']}\n"
                for entry in sorted(lock["packages"], key=lambda e: e["name"].lower())
            ),
        }
    module.exit_json(
        changed=module.check_mode and bool(found),
        bundle_id=bundle_id(bundle),
        venv=venv,
        link=link,
        current=current,
        built=built,
        installed=built and current == os.path.realpath(venv),
        partial=os.path.isdir(venv) and not built,
        pip_steps=[] if locked else pip_steps(bundle),
        locked=locked,
        wheels=lock_files(lock) if locked else [],
        requirements=requirements_text(lock, wheelhouse) if locked else "",
        requirements_file=requirements,
        install_argv=install_argv(installer, venv, requirements, os.path.join(installer_dir, "bin", "uv"), layered)
        if locked
        else [],
        install_env=INSTALL_ENV,
        installer=installer,
        installer_dir=installer_dir,
        installer_requirements=requirements_text({"packages": uv_entries}, wheelhouse) if installer_dir else "",
        drift=found,
        package_drift=per_package,
        manifest=manifest,
        diff=diff,
    )


if __name__ == "__main__":
    main()
