"""Lock a floating stack bundle with uv. Reading bundles and locks, and fetching a lock's wheels into a controller
wheelhouse (and pruning it): stack_files.py.

Controller side: needs the network (the bundle's indexes) and the uv binary of the `uv` wheel. What runs on the
host (checking a wheelhouse against a lock, the offline install, per-package drift) is in host/stack.py and
host/wheel_fetch.py.

Lock: `uv pip compile --generate-hashes --format pylock.toml` resolves the bundle for its Python and platform
(transitive dependencies included); for each package the wheel a host installer would pick (best tag for the
target) is recorded with its file name, URL and sha256. Where that sha256 comes from:
  - `index`: published by the default index (PyPI computes it at upload);
  - `download`: the wheel was downloaded and hashed here, for every wheel of an extra index (the PyTorch and
    nightly indexes have published wrong or missing hashes) and every wheel published without a hash
    (an --overrides entry can lose its hash in some tools); a published hash that differs is reported;
  - `build`: SGLang from git has no archive hash: the commit is built once into a wheel here, and that wheel is
    hashed and kept in the wheelhouse (it has no URL: keep the wheelhouse, it cannot be fetched again).
"""

from __future__ import annotations

import copy
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging import tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ansible_collections.sglang.deploy.plugins.module_utils import stack, stack_prune, wheel_fetch
from ansible_collections.sglang.deploy.plugins.module_utils.files import write_file
from sglang_deploy.secret_names import mask_secrets

DEFAULT_PLATFORM = "x86_64-manylinux_2_35"  # glibc 2.35: Ubuntu 22.04; Debian 12 and Ubuntu 24.04 are newer
DEFAULT_INDEX = "https://pypi.org/simple"
_OPERATORS = ("==", ">=", "<=", "~=", "!=", ">", "<", "===")


class _Dumper(yaml.SafeDumper):
    """Block sequences indented under their key, as yamllint's default expects."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


class LockError(Exception):
    """A bundle that cannot be locked or a wheelhouse that does not match its lock; the message names the fix."""


@dataclass
class LockResult:
    bundle_file: Path
    lock_file: Path
    bundle: dict
    lock: dict
    notes: list[str] = field(default_factory=list)


def uv_binary() -> str:
    """The uv executable of the `uv` wheel installed beside this package."""
    try:
        import uv
    except ImportError as exc:
        raise LockError("uv is not installed: pip install uv (a dependency of sglang-deploy)") from exc
    return uv.find_uv_bin()


def uv_version(uv: str) -> str:
    return subprocess.run([uv, "--version"], check=True, capture_output=True, text=True).stdout.split()[1]


def _spec(version: str) -> str:
    return version if version.startswith(_OPERATORS) else f"=={version}"


def floating_errors(bundle: dict) -> list[str]:
    """Problems that stop a bundle from being locked. Versions may be exact or PEP 440 specifiers (>=2.15.0.dev0),
    and a git source may name a branch or tag (sglang.ref) instead of a commit."""
    probe = copy.deepcopy(bundle) if isinstance(bundle, dict) else bundle
    if isinstance(probe, dict) and isinstance(probe.get("sglang"), dict) and probe["sglang"].get("git"):
        probe["sglang"].setdefault("commit", "")
        if not probe["sglang"]["commit"]:
            if not probe["sglang"].get("ref"):
                return ["sglang: a git source needs ref (branch or tag) or commit to lock"]
            probe["sglang"]["commit"] = "0" * 40
    errors = stack.validate(probe)
    if isinstance(bundle, dict):
        errors += _lock_option_problems(bundle)
    if isinstance(bundle, dict) and bundle.get("lock"):
        errors.append(
            f"bundle {bundle.get('name')} is already locked; lock the floating bundle it came from "
            f"({bundle.get('locked_from')})"
        )
    return errors


# Values of the lock-only keys, each checked before it reaches uv's command line (python: by stack.validate).
_LOCK_OPTIONS = {
    "platform": (re.compile(r"[a-z0-9_]+-manylinux_[0-9]+_[0-9]+"), f"such as {DEFAULT_PLATFORM}"),
    "index_strategy": (re.compile(r"first-index|unsafe-first-match|unsafe-best-match"), "one of uv's strategies"),
    "prerelease": (
        re.compile(r"disallow|allow|if-necessary|explicit|if-necessary-or-explicit"),
        "one of uv's prerelease modes",
    ),
    "exclude_newer": (re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)?"), "a date or time"),
}


def _lock_option_problems(bundle: dict) -> list[str]:
    return [
        f"{key} {str(bundle[key])[:60]!r}: {what}"
        for key, (pattern, what) in _LOCK_OPTIONS.items()
        if bundle.get(key) not in (None, "") and not pattern.fullmatch(str(bundle[key]))
    ]


def _target_tags(python: str, platform: str) -> list[tags.Tag]:
    """Tags an installer on the target accepts, best first (CPython <python>, manylinux up to the platform's glibc)."""
    arch, _, glibc = platform.partition("-manylinux_")
    major, minor = (int(part) for part in glibc.split("_"))
    platforms = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    platforms += [f"{legacy[m]}_{arch}" for m in (17, 12, 5) if m <= minor] + [f"linux_{arch}"]
    version = tuple(int(part) for part in python.split("."))
    return list(tags.cpython_tags(version, platforms=platforms)) + list(
        tags.compatible_tags(version, platforms=platforms)
    )


def pick_wheel(wheels: list[dict], ranked: list[tags.Tag]) -> dict | None:
    """The wheel a host installer would choose: the one with the best-ranked compatible tag."""
    rank = {tag: index for index, tag in enumerate(ranked)}
    best, best_rank = None, len(rank)
    for wheel in wheels:
        filename = os.path.basename(
            urllib.parse.unquote(urllib.parse.urlparse(wheel.get("url") or wheel.get("path", "")).path)
        )
        wheel_rank = min((rank.get(tag, len(rank)) for tag in parse_wheel_filename(filename)[3]), default=len(rank))
        if wheel_rank < best_rank:
            best, best_rank = {**wheel, "file": filename}, wheel_rank
    return best


def _index_args(bundle: dict) -> list[str]:
    # OPTION=VALUE throughout: a value is never read as an option of its own.
    return [f"--default-index={bundle.get('index_url') or DEFAULT_INDEX}"] + [
        f"--index={url}" for url in stack.index_urls(bundle)
    ]


def _run(argv: list[str], what: str, cwd: str | None = None, env: dict | None = None) -> str:
    result = subprocess.run(
        argv, capture_output=True, text=True, cwd=cwd, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise LockError(mask_secrets(f"{what} failed ({' '.join(argv[:3])} ...): {result.stderr.strip()[-3000:]}"))
    return result.stdout


# Every git call ends its options with `--`, so no value of a bundle is read as an option (--upload-pack=COMMAND);
# git may use only the transports a bundle may name (no ext::COMMAND, also not in a redirect or a submodule), and
# never asks for a password on the terminal.
_GIT_ENV = {"GIT_ALLOW_PROTOCOL": "https:ssh:file", "GIT_TERMINAL_PROMPT": "0"}


def _git(args: list[str], what: str) -> str:
    return _run(["git", *args], what, env=_GIT_ENV)


def _anonymous(url: str) -> str:
    """url without its user part (https://TOKEN@host/... is how a token is often given): for messages."""
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl() if parts.scheme else url


def resolve_commit(git_url: str, ref: str) -> str:
    """The full commit a branch or tag points at now (`git ls-remote`); a full sha is returned as it is."""
    if stack._COMMIT.match(ref):
        return ref
    problems = stack.git_source_problems({"git": git_url, "ref": ref})
    if problems:
        raise LockError("; ".join(problems))
    out = _git(["ls-remote", "--", git_url, ref, f"{ref}^{{}}"], f"git ls-remote {_anonymous(git_url)} {ref}")
    shas = {line.split()[1]: line.split()[0] for line in out.splitlines() if len(line.split()) == 2}
    for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
        if name in shas and stack._COMMIT.match(shas[name]):
            return shas[name]
    raise LockError(f"git ref {ref!r} not found in {_anonymous(git_url)}: give a branch, a tag or a full commit")


def build_git_wheel(uv: str, bundle: dict, commit: str, out_dir: Path, work: Path) -> Path:
    """Check out SGLang at commit and build its python/ folder once into a wheel (in out_dir)."""
    source = bundle["sglang"]
    problems = stack.git_source_problems(source) + (
        [] if stack._COMMIT.match(commit) else [f"commit {commit!r}: not a full 40-hex commit"]
    )
    if problems:
        raise LockError("; ".join(problems))
    checkout = work / "sglang-src"
    _git(
        ["clone", "--quiet", "--no-checkout", "--", source["git"], str(checkout)],
        f"git clone {_anonymous(source['git'])}",
    )
    # switch, not checkout: checkout reads what follows `--` as paths.
    _git(["-C", str(checkout), "switch", "--quiet", "--detach", "--", commit], f"git switch {commit}")
    subdir = (checkout / source.get("subdirectory", "python")).resolve()
    if not subdir.is_relative_to(checkout.resolve()):
        raise LockError(f"sglang.subdirectory: a link that leads out of the repository of commit {commit}")
    built = work / "built"
    _run(
        [uv, "build", "--wheel", "--quiet", "--out-dir", str(built), *_index_args(bundle), str(subdir)],
        f"building SGLang {commit[:12]} into a wheel",
    )
    (wheel,) = built.glob("*.whl")
    out_dir.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(wheel, out_dir / wheel.name))


def _compile(
    uv: str,
    bundle: dict,
    requirements: list[str],
    work: Path,
    *,
    overrides: list[str] = (),
    find_links: Path | None = None,
    label: str = "stack",
) -> dict:
    (work / f"{label}.in").write_text("\n".join(requirements) + "\n")
    argv = [
        uv,
        "pip",
        "compile",
        f"{label}.in",
        "--quiet",
        "--refresh",  # what the indexes serve now, not uv's cached pages (a nightly index changes daily)
        "--generate-hashes",
        "--no-header",
        f"--output-file=pylock.{label}.toml",
        f"--python-version={bundle['python']}",
        f"--python-platform={bundle.get('platform', DEFAULT_PLATFORM)}",
        f"--index-strategy={bundle.get('index_strategy', 'first-index')}",
        f"--prerelease={bundle.get('prerelease', 'if-necessary-or-explicit')}",
        *_index_args(bundle),
    ]
    if overrides:
        (work / f"{label}.overrides.txt").write_text("\n".join(overrides) + "\n")
        argv.append(f"--overrides={label}.overrides.txt")
    if find_links:
        argv.append(f"--find-links={find_links}")
    if bundle.get("exclude_newer"):
        argv.append(f"--exclude-newer={bundle['exclude_newer']}")
    _run(argv, "uv pip compile", cwd=str(work))
    with open(work / f"pylock.{label}.toml", "rb") as handle:
        return tomllib.load(handle)


def _entries(pylock: dict, bundle: dict, wheelhouse: Path, built: Path | None, notes: list[str]) -> list[dict]:
    ranked = _target_tags(bundle["python"], bundle.get("platform", DEFAULT_PLATFORM))
    default_index = bundle.get("index_url") or DEFAULT_INDEX
    # Files of the default index: PyPI serves them from files.pythonhosted.org, a mirror under its own root.
    trusted = (
        ("https://files.pythonhosted.org/",)
        if default_index == DEFAULT_INDEX
        else (default_index.rsplit("/simple", 1)[0] + "/",)
    )
    entries, to_download = [], []
    for package in pylock["packages"]:
        name, version = package["name"], package["version"]
        if built is not None and canonicalize_name(name) == "sglang":
            entries.append(
                {
                    "name": name,
                    "version": version,
                    "file": f"{built.parent.name}/{built.name}",
                    "url": None,
                    "sha256": wheel_fetch.sha256_file(str(built)),
                    "sha256_from": "build",
                }
            )
            continue
        wheel = pick_wheel(package.get("wheels", []), ranked)
        if wheel is None:
            raise LockError(
                f"{name} {version} has no wheel for Python {bundle['python']} on "
                f"{bundle.get('platform', DEFAULT_PLATFORM)} (sdist only): pin a version that has one, "
                "or build it and serve it from an extra index"
            )
        published = (wheel.get("hashes") or {}).get("sha256")
        entry = {
            "name": name,
            "version": version,
            "file": wheel["file"],
            "url": wheel["url"],
            "sha256": published,
            "sha256_from": "index",
        }
        if not published or not wheel["url"].startswith(trusted):
            to_download.append(entry)
        entries.append(entry)

    def hash_download(entry: dict) -> None:
        path = wheelhouse / entry["file"]
        if not path.exists() or (entry["sha256"] and wheel_fetch.sha256_file(str(path)) != entry["sha256"]):
            try:
                wheel_fetch.download(entry["url"], str(path))
            except wheel_fetch.DOWNLOAD_ERRORS as exc:
                raise LockError(
                    f"{entry['file']}: download from {wheel_fetch.without_credentials(entry['url'], str(exc))}"
                ) from exc
        digest = wheel_fetch.sha256_file(str(path))
        if not entry["sha256"]:
            notes.append(f"{entry['file']}: the index published no sha256; locked the hash of the download")
        elif entry["sha256"] != digest:
            notes.append(
                f"{entry['file']}: the index published sha256 {entry['sha256']}, the download has {digest}; "
                "locked the download's"
            )
        entry.update(sha256=digest, sha256_from="download")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(hash_download, to_download))
    return entries


def _check_expected(bundle: dict, entries: list[dict]) -> None:
    found = {f"{canonicalize_name(entry['name'])}=={entry['version']}": entry["sha256"] for entry in entries}
    for pin, digest in (bundle.get("hashes") or {}).items():
        name, _, version = pin.partition("==")
        key = f"{canonicalize_name(name)}=={version}"
        if key not in found:
            raise LockError(f"bundle hash for {pin}: the resolution has no such package (it resolved something else)")
        if found[key] != str(digest).lower():
            raise LockError(f"sha256 of {pin}: the bundle expects {digest}, the lock found {found[key]}")


def lock(
    bundle: dict, stacks_dir: Path, wheelhouse: Path, *, name: str | None = None, today: datetime.date | None = None
) -> LockResult:
    """Resolve a floating bundle into stacks_dir/<name>.yml (exact pins) and <name>.lock.yml (every wheel)."""
    errors = floating_errors(bundle)
    if errors:
        raise LockError(
            f"bundle {bundle.get('name') if isinstance(bundle, dict) else bundle!r} cannot be locked: "
            + "; ".join(errors)
        )
    today = today or datetime.datetime.now(datetime.UTC).date()
    name = name or f"{bundle['name']}-{today.isoformat()}"
    if not stack._NAME.match(name):
        raise LockError(f"bundle name {name!r}: lower-case letters, digits, '.' and '-' only")
    uv = uv_binary()
    notes: list[str] = []
    wheelhouse = wheelhouse.resolve()
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sglang-lock-") as tmp:
        work = Path(tmp)
        sglang = dict(bundle["sglang"])
        built = None
        if sglang.get("git"):
            sglang["commit"] = resolve_commit(sglang["git"], sglang.get("commit") or sglang["ref"])
            # One folder per commit: every commit of a branch builds a wheel of the same file name.
            built = build_git_wheel(
                uv, bundle, sglang["commit"], wheelhouse / stack_prune.git_wheel_dir(sglang["commit"]), work
            )
            notes.append(
                f"{built.parent.name}/{built.name}: SGLang {sglang['commit']} built here; "
                f"the wheel exists only in {wheelhouse}"
            )
            sglang_req = f"sglang=={parse_wheel_filename(built.name)[1]}"
        else:
            sglang_req = f"sglang{_spec(sglang['version'])}"
        flashinfer = bundle["flashinfer"].get("package", "flashinfer-python")
        pins = [f"torch{_spec(bundle['torch']['version'])}", f"{flashinfer}{_spec(bundle['flashinfer']['version'])}"]
        requirements = pins + [sglang_req] + list(bundle.get("extra_packages", []))
        pylock = _compile(
            uv,
            bundle,
            requirements,
            work,
            overrides=pins if bundle.get("override_pins") else (),
            find_links=built.parent if built else None,
        )
        entries = _entries(pylock, bundle, wheelhouse, built, notes)
        installer_pylock = _compile(
            uv,
            {
                **bundle,
                "index_url": DEFAULT_INDEX,
                "torch": {},
                "flashinfer": {},
                "extra_index_urls": [],
                "exclude_newer": None,
            },
            [f"uv=={uv_version(uv)}"],
            work,
            label="installer",
        )
        installer = _entries(installer_pylock, {**bundle, "index_url": DEFAULT_INDEX}, wheelhouse, None, notes)
    _check_expected(bundle, entries)
    versions = {canonicalize_name(entry["name"]): entry["version"] for entry in entries}
    lock_data = {
        "bundle": name,
        "locked_from": bundle["name"],
        "locked_at": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        "resolver": f"uv {uv_version(uv)} pip compile",
        "python": bundle["python"],
        "platform": bundle.get("platform", DEFAULT_PLATFORM),
        "requirements": requirements,
        "overrides": pins if bundle.get("override_pins") else [],
        "notes": sorted(notes),
        "packages": sorted(entries, key=lambda entry: canonicalize_name(entry["name"])),
        "installer": installer,
    }
    locked = {key: value for key, value in copy.deepcopy(bundle).items() if key not in ("hashes", "exclude_newer")}
    locked["name"] = name
    locked["locked_from"] = bundle["name"]
    locked["torch"] = {**bundle["torch"], "version": versions["torch"]}
    locked["flashinfer"] = {**bundle["flashinfer"], "version": versions[canonicalize_name(flashinfer)]}
    if sglang.get("git"):
        locked["sglang"] = sglang
    else:
        locked["sglang"] = {"version": versions["sglang"]}
    return _write(bundle["name"], locked, lock_data, stacks_dir)


def lock_wheels(
    bundle: dict, wheel_dir: Path, stacks_dir: Path, *, name: str | None = None, today: datetime.date | None = None
) -> LockResult:
    """Lock a bundle layered on an image's Python (`base`) from a folder of wheels: every *.whl in wheel_dir with its
    sha256 (sha256_from `wheelhouse`, no URL: the role takes them from that folder as the controller wheelhouse).
    Nothing is resolved against the image: the folder holds what the image lacks, chosen for it (tools/gpu_stage.py's
    set for the H200's torch 2.11.0). Its sglang and flashinfer wheels must be the bundle's versions, and it holds no
    torch (the image's is used)."""
    if not bundle.get("base"):
        raise LockError(
            f"bundle {bundle.get('name')} has no base: --wheels locks only a bundle layered on an image's Python"
        )
    errors = floating_errors(bundle)
    if errors:
        raise LockError(f"bundle {bundle.get('name')} cannot be locked: " + "; ".join(errors))
    today = today or datetime.datetime.now(datetime.UTC).date()
    name = name or f"{bundle['name']}-{today.isoformat()}"
    if not stack._NAME.match(name):
        raise LockError(f"bundle name {name!r}: lower-case letters, digits, '.' and '-' only")
    entries, seen = [], {}
    for path in sorted(Path(wheel_dir).glob("*.whl")):
        # Plain files only: a link would put whatever it points at (a credentials file) on every host.
        if path.is_symlink() or not path.is_file():
            raise LockError(f"{path} is not a plain file: copy the wheel into {wheel_dir}")
        try:
            package, version, _, _ = parse_wheel_filename(path.name)
        except InvalidWheelFilename as exc:
            raise LockError(f"{path.name} is not a wheel's file name ({exc}): rename or remove it") from exc
        if package in seen:
            raise LockError(f"{wheel_dir} holds two wheels of {package}: {seen[package]} and {path.name}; keep one")
        seen[package] = path.name
        entries.append(
            {"name": str(package), "version": str(version), "file": path.name, "url": None}
            | {"sha256": wheel_fetch.sha256_file(str(path)), "sha256_from": "wheelhouse"}
        )
    flashinfer = canonicalize_name(bundle["flashinfer"].get("package", "flashinfer-python"))
    versions = {entry["name"]: entry["version"] for entry in entries}
    wanted = {"sglang": bundle["sglang"].get("version"), flashinfer: bundle["flashinfer"]["version"]}
    problems = [
        f"{package}: the bundle wants {version}, {wheel_dir} holds {versions.get(package, 'no wheel of it')}"
        for package, version in wanted.items()
        if versions.get(package) != version
    ]
    if "torch" in versions:
        problems.append(f"{seen['torch']}: the image's torch is used; take torch out of {wheel_dir}")
    if problems:
        raise LockError(f"bundle {bundle['name']} cannot be locked from {wheel_dir}: " + "; ".join(problems))
    lock_data = {
        "bundle": name,
        "locked_from": bundle["name"],
        "locked_at": datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat(),
        "resolver": "none: the wheels of a folder, layered on the image's Python",
        "python": bundle["python"],
        "base": bundle["base"],
        "requirements": [],
        "overrides": [],
        "notes": [
            f"{len(entries)} wheels from {Path(wheel_dir).name}/; torch {bundle['torch']['version']} is the image's"
        ],
        "packages": entries,
        "installer": [],
    }
    locked = {key: value for key, value in copy.deepcopy(bundle).items() if key not in ("hashes", "exclude_newer")}
    locked["name"] = name
    locked["locked_from"] = bundle["name"]
    return _write(bundle["name"], locked, lock_data, stacks_dir)


def _write(source: str, locked: dict, lock_data: dict, stacks_dir: Path) -> LockResult:
    """Write the locked bundle <name>.yml (naming its lock and the lock's id) and <name>.lock.yml."""
    name = locked["name"]
    locked["lock"] = {"file": f"{name}.lock.yml", "id": stack.lock_id(lock_data)}
    bundle_file, lock_file = stacks_dir / f"{name}.yml", stacks_dir / f"{name}.lock.yml"
    header = (
        f"# Written by `sglang-deploy stack lock {source}` on {lock_data['locked_at']}; "
        "do not edit (the lock id would no longer match).\n---\n"
    )
    # write_file replaces a link planted at either name instead of writing through it into another file.
    write_file(header + yaml.dump(locked, Dumper=_Dumper, sort_keys=False, width=120), str(bundle_file), 0o644)
    write_file(
        "# yamllint disable rule:line-length\n"
        + header
        + yaml.dump(lock_data, Dumper=_Dumper, sort_keys=False, width=1000),
        str(lock_file),
        0o644,
    )
    return LockResult(bundle_file, lock_file, locked, lock_data, lock_data["notes"])
