"""Action plugin sglang_quality: read the reference fingerprint on the controller, run the module's checks on the
host, judge by the mode, and keep a fingerprint that passed. Documentation: plugins/modules/sglang_quality.py; the
checks are in ansible_collections.sglang.deploy.plugins.module_utils.quality, the store in sglang_deploy.fingerprints."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.sglang.deploy.plugins.plugin_utils import package

try:
    from sglang_deploy import fingerprints
except ImportError as exc:  # a Python need of the collection is missing: package.require() names it
    package.missing(exc)

SHOWN_PROBLEMS = 5
# The variables that name the controller's files: a host fact of one of these names would shadow the inventory's.
SHADOWED = {"sglang_quality_store", "sglang_quality"}


def _reference(store, model: str, host: str, profile: str, pinned: str) -> dict | None:
    """The stored fingerprint the deploy is held against (fingerprints.reference); a pinned stack without one fails:
    a canary held against nothing would pass whatever it answers."""
    try:
        ref = fingerprints.reference(store, model, host, profile, pinned) if store else None
    except fingerprints.FingerprintError as exc:
        raise AnsibleActionFail(f"sglang_quality: {exc}") from exc
    if pinned and ref is None:
        raise AnsibleActionFail(
            f"sglang_quality: no fingerprint of profile {profile!r} on stack {pinned!r} is kept for this host"
            f" in {store}: deploy that profile on that stack first (its gate keeps one)"
        )
    return ref


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        package.require()
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if args.get("mode", "enforce") == "off":
            result.update(changed=False, skipped=True, quality={"passed": None, "mode": "off", "problems": []})
            return result
        shadowed = sorted(SHADOWED & set(task_vars.get("ansible_facts") or {}))
        if shadowed:  # a host's fact would set where the controller writes
            raise AnsibleActionFail(f"sglang_quality: the host reports facts named {', '.join(shadowed)}: refused")
        store, model, profile = args.get("store"), args.get("model") or "", args.get("profile") or ""
        host = task_vars.get("inventory_hostname") or ""
        ref = _reference(store, model, host, profile, args.pop("reference_stack", "") or "")
        module_args = {**args, "reference": (ref or {}).get("fingerprint")}
        found = self._execute_module(
            module_name="sglang.deploy.sglang_quality", module_args=module_args, task_vars=task_vars
        )
        if found.get("failed"):
            return {**result, **found}
        if not isinstance(found.get("quality"), dict) or not isinstance(found.get("fingerprint"), list):
            raise AnsibleActionFail(
                "sglang_quality: the host's answer is not the module's result (quality, fingerprint)"
            )
        quality = {**found["quality"], "reference": (ref or {}).get("file"), "kept": None}
        problems = quality.get("problems")
        quality["problems"] = [str(p) for p in problems] if isinstance(problems, list) else ["a malformed answer"]
        quality["passed"] = quality.get("passed") is True and not (problems and quality["problems"])
        quality["mode"] = args.get("mode", "enforce")
        if quality["passed"] and store and not self._task.check_mode:
            try:
                stack, version = args.get("stack") or "", args.get("sglang_version")
                quality["kept"] = fingerprints.save(store, model, host, stack, profile, found["fingerprint"], version)
            except ValueError as exc:  # FingerprintError too
                raise AnsibleActionFail(f"sglang_quality: the fingerprint was not kept: {exc}") from exc
        result.update(changed=False, quality=quality)
        if not quality["passed"]:
            text = "; ".join(quality["problems"][:SHOWN_PROBLEMS])
            if quality["mode"] == "enforce":
                result.update(failed=True, msg=f"the server is up but does not answer right: {text}")
            else:
                result["warnings"] = [f"quality gate (report only): {text}"]
        return result
