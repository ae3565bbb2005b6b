"""`-e` items of the command line read into extra variables (parse_extravars)."""

from __future__ import annotations

from pathlib import Path

from sglang_deploy.launch import profiles
from sglang_deploy.secret_names import is_secret_name


def parse_extravars(items: list) -> dict:
    """-e items in order, later ones winning: key=value (value read as YAML: numbers, booleans, [lists]; kept
    a string for a secret key), @file.yml (a mapping), or an inline YAML/JSON mapping. ValueError if bad."""
    out: dict = {}
    for item in items or []:
        if item.startswith("@"):
            path = Path(item[1:]).expanduser()
            try:
                text = profiles.read_text(path)
            except profiles.ProfileError as exc:
                raise ValueError(f"-e {item}: {exc}") from exc
            if text.startswith("$ANSIBLE_VAULT"):
                raise ValueError(
                    f"-e {item}: vault-encrypted files are not read here; keep vaulted secrets in "
                    "group_vars/ or inventory vars, where ansible decrypts them"
                )
            doc = _yaml_mapping(text, f"-e {item}")
        elif item.lstrip().startswith("{"):
            doc = _yaml_mapping(item, "-e")
        else:
            key, sep, value = item.partition("=")
            if not sep or not key.isidentifier():
                raise ValueError(f"-e {item!r}: expected key=value, @file.yml or a YAML/JSON mapping")
            if is_secret_name(key):
                doc = {key: value}
            else:
                try:
                    doc = {key: profiles.parse_yaml(value, f"-e {key}") if value else value}
                except profiles.ProfileError as exc:
                    if exc.problems[0][0] == "yaml-duplicate-key":
                        raise ValueError(str(exc)) from exc
                    doc = {key: value}  # not YAML: the text itself
        out.update(doc)
    return out


def _yaml_mapping(text: str, what: str) -> dict:
    try:
        doc = profiles.parse_yaml(text, what)
    except profiles.ProfileError as exc:
        raise ValueError(str(exc)) from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError(f"{what}: expected a mapping of variables")
    return doc
