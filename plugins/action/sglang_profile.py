"""Action plugin sglang_profile: render a launch profile and run the validation rules on the controller.

Documentation: plugins/modules/sglang_profile.py. All logic lives in the sglang_deploy package (profiles, flags, rules).
"""

from __future__ import annotations


from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy.launch import profiles
    from sglang_deploy.rules import rules
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)

ARGUMENT_SPEC = {
    "profile": {"type": "str", "required": True},
    "profiles": {"type": "dict", "required": True},
    "settings": {"type": "dict", "default": {}, "no_log": False},
    # sglang_api_key: checked (length, characters) and counted for the open-bind rule, never returned.
    "api_key": {"type": "str", "default": "", "no_log": True},
    "sglang_version": {"type": "str"},
    "facts": {"type": "dict", "default": {}},
    "concurrency": {"type": "int"},
    # Only the profile's name and its extends chain (playbooks/plan.yml, before the stack that fixes the release).
    "resolve_only": {"type": "bool", "default": False},
}


def _facts(raw: dict) -> dict:
    facts = {k: v for k, v in raw.items() if v is not None and v != ""}
    for key in ("gpu_count", "node_count", "node_rank"):
        if key in facts:
            facts[key] = int(facts[key])
    for key in ("nvlink", "model_path_exists", "allow_open_bind", "api_key_set"):
        if key in facts:
            facts[key] = boolean(facts[key], strict=False)
    return facts


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        package.require()
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        settings = {**args["settings"], "sglang_api_key": args["api_key"]}
        try:
            if args["resolve_only"]:
                resolved = profiles.resolve(args["profile"], args["profiles"])
                result.update(changed=False, chain=resolved.chain)
                return result
            launch = profiles.render(args["profile"], args["profiles"], settings, args["sglang_version"])
        except profiles.UnknownProfile as exc:  # fields for the caller (sglang_deploy.api reads them)
            result.update(
                failed=True, msg=f"sglang_profile: {exc}", unknown_profile=exc.name, available_profiles=exc.available
            )
            return result
        except profiles.ProfileError as exc:
            raise AnsibleActionFail(f"sglang_profile: {exc}") from exc
        findings = rules.validate(launch, _facts(args["facts"]), args["concurrency"])
        errors = rules.errors(findings)
        result.update(
            changed=False,
            argv=launch.argv,
            env=launch.env,
            secret_env_keys=sorted(launch.secret_env),
            notes=launch.notes,
            sglang_version=launch.sglang_version,
            flags_release=launch.flags_release,
            # Where the server will listen (host, port, open: reachable from other hosts, url: from the host itself).
            listen=launch.listen,
            findings=[f.as_dict() for f in findings],
        )
        warnings = [f"{f.rule}: {f.message}" for f in findings if f.level == rules.WARNING]
        if warnings:
            result["warnings"] = result.get("warnings", []) + warnings
        if errors:
            result["failed"] = True
            result["msg"] = f"launch profile {launch.profile} refused for sglang {launch.sglang_version}: " + "; ".join(
                f"[{f.rule}] {f.message}" for f in errors
            )
        return result
