"""Stack bundles (stacks/*.yml): validation, content hash, pip steps, wheel locks, manifest drift.

Runs on target hosts through module_utils/sglang_deploy/stack.py (a symlink to this file): stdlib only,
Python 3.10+. A bundle reaches this code as a dict (the controller loads the YAML).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

HASH_LENGTH = 12
# Keys that describe a bundle without changing what gets installed: left out of its content hash.
NON_CONTENT_KEYS = ("description",)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def _text(value) -> bool:
    return isinstance(value, str) and value.strip() != ""


def validate(bundle: dict) -> list[str]:
    """Problems with a bundle, as sentences; empty when it is complete."""
    errors = []
    if not isinstance(bundle, dict):
        return ["a bundle must be a mapping"]
    name = bundle.get("name")
    if not (_text(name) and _NAME.match(name)):
        errors.append("name: lower-case letters, digits, '.' and '-' only")
    for key in ("python", "sglang_version"):
        if not _text(bundle.get(key)):
            errors.append(f"{key}: missing")
    for key in ("torch", "flashinfer"):
        section = bundle.get(key)
        if not isinstance(section, dict) or not _text(section.get("version")):
            errors.append(f"{key}.version: missing")
    sglang = bundle.get("sglang")
    if not isinstance(sglang, dict):
        errors.append("sglang: missing (give version, or git and commit)")
    elif _text(sglang.get("version")) == bool(sglang.get("git")):
        errors.append("sglang: give exactly one of version (PyPI) or git (repository URL)")
    elif sglang.get("git") and not _COMMIT.match(str(sglang.get("commit") or "")):
        errors.append(
            f"sglang.commit: a git source needs a full 40-hex commit, got {sglang.get('commit')!r} "
            "(set it in the bundle or with sglang_stack_sglang_commit)"
        )
    for key in ("extra_packages", "extra_index_urls"):
        if not isinstance(bundle.get(key, []), list):
            errors.append(f"{key}: must be a list")
    if not isinstance(bundle.get("hashes", {}), dict):
        errors.append("hashes: must map 'name==version' to a sha256 hex digest")
    return errors


def content(bundle: dict) -> dict:
    return {key: value for key, value in bundle.items() if key not in NON_CONTENT_KEYS}


def bundle_id(bundle: dict) -> str:
    """First HASH_LENGTH hex digits of the sha256 of the bundle's canonical JSON (descriptions left out)."""
    text = json.dumps(content(bundle), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def venv_name(bundle: dict) -> str:
    return f"{bundle['name']}-{bundle_id(bundle)}"


def sglang_requirement(bundle: dict) -> str:
    sglang = bundle["sglang"]
    if sglang.get("git"):
        return f"sglang @ git+{sglang['git']}@{sglang['commit']}#subdirectory=python"
    return f"sglang=={sglang['version']}"


def _index_args(urls) -> list[str]:
    args: list[str] = []
    for url in urls:
        if url and url not in args[1::2]:
            args += ["--extra-index-url", url]
    return args


def index_urls(bundle: dict) -> list[str]:
    """Indexes besides the host's default (PyPI or its pip.conf mirror), in bundle order."""
    urls = [bundle["torch"].get("index_url"), bundle["flashinfer"].get("index_url")]
    return [url for url in urls + list(bundle.get("extra_index_urls", [])) if url]


def pip_steps(bundle: dict) -> list[list[str]]:
    """Arguments for `python -m pip` (one list per pip run) that build the bundle into an empty venv.

    One resolution normally, so pip enforces SGLang's own pins. With `override_pins: true` SGLang and
    the extras go first, then torch and flashinfer are installed over SGLang's pins (the operator's
    manual method for nightly torch; pip prints a dependency-conflict warning).
    """
    torch = f"torch=={bundle['torch']['version']}"
    flashinfer = f"{bundle['flashinfer'].get('package', 'flashinfer-python')}=={bundle['flashinfer']['version']}"
    extras = list(bundle.get("extra_packages", []))
    indexes = _index_args(index_urls(bundle))
    install = ["install", "--no-input", "--disable-pip-version-check"]
    if bundle.get("override_pins"):
        return [
            install + indexes + [sglang_requirement(bundle)] + extras,
            install + indexes + [torch, flashinfer],
        ]
    return [install + indexes + [torch, flashinfer, sglang_requirement(bundle)] + extras]


def wheelhouse_steps(bundle: dict, wheel_dir: str, freeze_file: str) -> list[list[str]]:
    """pip runs that fill a bundle's wheelhouse with exactly the frozen set of a built venv."""
    return [["wheel", "--no-deps", "--no-input", "-w", wheel_dir, "-r", freeze_file] + _index_args(index_urls(bundle))]


def offline_step(wheel_dir: str, lock_file: str) -> list[str]:
    """pip run that installs a locked wheelhouse: no index, every file hash-checked."""
    return ["install", "--no-input", "--no-index", "--find-links", wheel_dir, "--require-hashes", "--no-deps", "-r", lock_file]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_wheel_name(filename: str) -> tuple[str, str] | None:
    match = _WHEEL.match(filename)
    return (normalize(match.group("name")), match.group("version")) if match else None


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def lock_text(wheel_dir: str, expected: dict | None = None) -> str:
    """A --require-hashes requirements file for every wheel in wheel_dir.

    expected maps "name==version" to a sha256 (the bundle's `hashes`); a mismatch or a pinned
    package missing from the wheelhouse raises ValueError.
    """
    lines, seen = [], {}
    for filename in sorted(os.listdir(wheel_dir)):
        parsed = parse_wheel_name(filename)
        if parsed is None:
            continue
        name, version = parsed
        if name in seen:
            raise ValueError(f"two wheels for {name} in {wheel_dir}: {seen[name]} and {filename}")
        seen[name] = filename
        digest = sha256_file(os.path.join(wheel_dir, filename))
        lines.append(f"{name}=={version} --hash=sha256:{digest}")
    found = {line.split(" ")[0]: line.rsplit(":", 1)[1] for line in lines}
    for pin, digest in (expected or {}).items():
        name, _, version = pin.partition("==")
        key = f"{normalize(name)}=={version}"
        if key not in found:
            raise ValueError(f"bundle hash for {pin}: no such wheel in {wheel_dir}")
        if found[key] != digest.lower():
            raise ValueError(f"sha256 mismatch for {pin}: bundle {digest}, wheelhouse {found[key]}")
    return "\n".join(lines) + "\n"


def version_matches(installed: str | None, pin: str) -> bool:
    """PEP 440 `==pin`: a pin without a local part (+cu130) matches any local build of that version."""
    if installed is None:
        return False
    return installed == pin or ("+" not in pin and installed.split("+")[0] == pin)


def drift(bundle: dict, manifest: dict) -> list[str]:
    """Differences between what a bundle asks for and what the manifest says is serving."""
    if not manifest:
        return [f"no stack installed; bundle {bundle.get('name')} wants one"]
    found = []
    if manifest.get("bundle_id") != bundle_id(bundle):
        found.append(
            f"bundle: serving {manifest.get('bundle')}-{manifest.get('bundle_id')}, "
            f"wanted {bundle.get('name')}-{bundle_id(bundle)}"
        )
    versions = manifest.get("versions", {})
    wanted = {
        "torch": bundle["torch"]["version"],
        "flashinfer": bundle["flashinfer"]["version"],
        "sglang": bundle["sglang"].get("version"),
    }
    for package, version in wanted.items():
        if version and not version_matches(versions.get(package), version):
            found.append(f"{package}: installed {versions.get(package)}, bundle {version}")
    commit = bundle["sglang"].get("commit")
    if commit and manifest.get("sglang_git_sha") != commit:
        found.append(f"sglang commit: installed {manifest.get('sglang_git_sha')}, bundle {commit}")
    return found


def prune_list(venvs_dir: str, keep_names: list[str], keep: int) -> list[str]:
    """Venv folders to delete: all but keep_names (new and previous) and the newest others up to keep in all."""
    if not os.path.isdir(venvs_dir):
        return []
    others = [
        entry
        for entry in os.scandir(venvs_dir)
        if entry.is_dir(follow_symlinks=False) and entry.name not in keep_names
    ]
    others.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime, reverse=True)
    room = max(keep - len([name for name in keep_names if name]), 0)
    return sorted(entry.path for entry in others[room:])
