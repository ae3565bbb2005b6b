"""Filter sglang_host_record: the host record (local fact sglang_server) among a host's local facts, every field
of its schema present (None where unrecorded). The one reader; the sglang_host_record module is the one writer."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.sglang.deploy.plugins.module_utils import host_record


def read(local: dict | None) -> dict:
    """host_record.read(); a record that breaks the schema fails the task, naming the field."""
    try:
        return host_record.read(local)
    except host_record.RecordError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"sglang_host_record": read}
