"""Secrets in a run's extra variables: which variables are secret, and every form their values can take in the
run's files and events, to scrub them from both.

An extra variable whose name, or the name of any key nested in it, looks secret (api_key, token, password,
secret...: sglang_deploy.secret_names) goes to a 0600 file passed as `-e @file` (the runner's job); as a safety net
every file and event of the run is then scrubbed of the secret values in each form they can take there
(secret_forms: escaped, quoted, JSON inside JSON).
"""

from __future__ import annotations

import json
from pathlib import Path

from sglang_deploy.secret_names import is_secret_name, value_secrets

REDACTED = "[redacted secret]"


def split_secrets(extravars: dict) -> tuple[dict, dict]:
    """(public, secret): a variable is secret when its name or any nested key names a secret, or a value in it is
    a URL with a password or another secret (secret_names.value_secrets)."""

    def secret(key, value) -> bool:
        if is_secret_name(key):
            return True
        if isinstance(value, str):
            return bool(value_secrets(value))
        if isinstance(value, dict):
            return any(secret(k, v) for k, v in value.items())
        if isinstance(value, list):
            return any(secret("", v) for v in value)
        return False

    public, hidden = {}, {}
    for key, value in extravars.items():
        (hidden if secret(key, value) else public)[key] = value
    return public, hidden


def secret_values(secret_vars: dict) -> list:
    """The clear-text values to scrub: every string under a secret key and every secret a string holds (a URL's
    password, a ?token=: value_secrets), at least 4 characters each."""
    out: list = []

    def walk(value, under_secret: bool):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, under_secret or is_secret_name(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, under_secret)
        elif under_secret and value not in (None, "") and len(str(value)) >= 4:
            out.append(str(value))
        if isinstance(value, str):
            out.extend(p for p in value_secrets(value) if len(p) >= 4)

    walk(secret_vars, False)
    return sorted(set(out), key=len, reverse=True)


def secret_forms(values: list) -> list:
    """Each value as it can appear in a run's files and events, longest first: raw, Python repr (either quote),
    shell-quoted, YAML double- and single-quoted (\\u/\\x escapes or raw UTF-8), and each of those JSON-escaped
    once or twice (a JSON string inside a JSON event), ASCII-escaped or not."""
    import shlex

    import yaml

    forms: set = set()
    for v in values:
        base = {v, repr(v)[1:-1], repr(v + '"')[1:-2], shlex.quote(v), v.replace("'", "''")}
        for unicode in (False, True):
            dumped = yaml.safe_dump(v, default_style='"', allow_unicode=unicode, width=1 << 30)
            base.add(dumped.strip()[1:-1])
        for form in base:
            forms.add(form)
            for ascii_only in (True, False):
                once = json.dumps(form, ensure_ascii=ascii_only)[1:-1]
                forms.update((once, json.dumps(once, ensure_ascii=ascii_only)[1:-1]))
    return sorted(forms, key=len, reverse=True)


def redact(obj, forms: list):
    """obj with every one of the forms (secret_forms) replaced by REDACTED, in strings inside dicts and lists."""
    if not forms:
        return obj
    if isinstance(obj, str):
        for form in forms:
            obj = obj.replace(form, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {k: redact(v, forms) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v, forms) for v in obj]
    return obj


def scrub_tree(root: Path, forms: list) -> int:
    """Replace every one of the forms (secret_forms) in every file under root; returns the files changed."""
    needles = [form.encode() for form in forms]
    changed = 0
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        blob = path.read_bytes()
        new = blob
        for n in needles:
            new = new.replace(n, REDACTED.encode())
        if new != blob:
            path.write_bytes(new)
            changed += 1
    return changed
