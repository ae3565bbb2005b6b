"""Action plugin sglang_model_hub: download a model lock's Hub repository at its commit into a controller folder.

Documentation: plugins/modules/sglang_model_hub.py. The logic lives in sglang_deploy.locks.model_lock (hub_download).
"""

from __future__ import annotations


from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.locks import model_lock
    from ansible_collections.sglang.deploy.plugins.module_utils import model
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)


def _argument_spec() -> dict:
    return {
        "lock": {"type": "dict", "required": True},
        "folder": {"type": "path", "required": True},
        "token": {"type": "str", "default": "", "no_log": True},
        "endpoint": {"type": "str", "default": ""},
        "allow_insecure_endpoint": {"type": "bool", "default": False},
        "file_timeout": {"type": "float", "default": model_lock.FILE_TIMEOUT},
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        package.require()
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=_argument_spec())
        lock = args["lock"]
        problems = model.validate(lock) or ([] if lock.get("repository") else ["it has no repository: use a path"])
        if problems:
            raise AnsibleActionFail(f"model lock {lock.get('name')!r} cannot be fetched: " + "; ".join(problems))
        if not 0 < args["file_timeout"] < 10**7:
            raise AnsibleActionFail(
                f"file_timeout {args['file_timeout']}: seconds above 0 (sglang_model_hf_file_timeout)"
            )
        try:
            endpoint = model_lock.endpoint_url(args["endpoint"], allow_insecure=args["allow_insecure_endpoint"])
            if self._task.check_mode:
                return {**result, "changed": False, "folder": args["folder"]}
            downloaded = model_lock.hub_download(
                lock,
                args["folder"],
                token=args["token"],
                endpoint=endpoint,
                allow_insecure=args["allow_insecure_endpoint"],
                file_timeout=args["file_timeout"],
            )
        except model_lock.ModelLockError as exc:
            raise AnsibleActionFail(str(exc)) from exc
        return {**result, "changed": downloaded, "folder": args["folder"]}
