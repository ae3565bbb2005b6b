"""Stack bundles (stacks/*.yml): validation, content hash, pip steps, wheel locks, manifest drift; the
`sglang_stack_plan` module runs them on the host, `sglang-deploy stack` on the controller. The wheelhouse (download,
fetch, hash check) is host/wheel_fetch.py, the prune of old venvs host/stack_prune.py.

Stdlib only, Python 3.10+. A bundle reaches this code as a dict (the controller loads the YAML).
"""

from __future__ import annotations

import hashlib
import json
import os
import re

from .text import CONTROL

HASH_LENGTH = 12
# Keys that describe a bundle without changing what gets installed: left out of its content hash.
NON_CONTENT_KEYS = ("description",)
# \Z, not $: $ also matches before a final line break ("name\n").
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_NAME = re.compile(r"[a-z0-9][a-z0-9.-]*\Z")


def _text(value) -> bool:
    return isinstance(value, str) and value.strip() != ""


def validate(bundle: dict) -> list[str]:
    """Problems with a bundle, as sentences; empty when it is complete."""
    if not isinstance(bundle, dict):
        return ["a bundle must be a mapping"]
    errors = _required_problems(bundle) + _sglang_problems(bundle)
    for key in ("extra_packages", "extra_index_urls"):
        if not isinstance(bundle.get(key, []), list):
            errors.append(f"{key}: must be a list")
    errors += requirement_problems(bundle) + index_url_problems(bundle) + lock_file_problems(bundle)
    errors += base_problems(bundle)
    if not isinstance(bundle.get("hashes", {}), dict):
        errors.append("hashes: must map 'name==version' to a sha256 hex digest")
    return errors


def _required_problems(bundle: dict) -> list[str]:
    """The name, the Python version, and the versions of SGLang, torch and FlashInfer every bundle gives."""
    errors = []
    name = bundle.get("name")
    if not (_text(name) and _NAME.match(name)):
        errors.append("name: lower-case letters, digits, '.' and '-' only")
    for key in ("python", "sglang_version"):
        if not _text(bundle.get(key)):
            errors.append(f"{key}: missing")
    if _text(bundle.get("python")) and not PYTHON.fullmatch(bundle["python"]):
        # the role runs python<version> as root on the host: no path, no word
        errors.append(f"python {bundle['python'][:60]!r}: a Python version such as '3.12'")
    for key in ("torch", "flashinfer"):
        section = bundle.get(key)
        if not isinstance(section, dict) or not _text(section.get("version")):
            errors.append(f"{key}.version: missing")
    return errors


def _sglang_problems(bundle: dict) -> list[str]:
    """SGLang's source: a PyPI version, or a git repository at a full commit."""
    sglang = bundle.get("sglang")
    if not isinstance(sglang, dict):
        return ["sglang: missing (give version, or git and commit)"]
    errors = []
    if _text(sglang.get("version")) == bool(sglang.get("git")):
        errors.append("sglang: give exactly one of version (PyPI) or git (repository URL)")
    elif sglang.get("git") and not _COMMIT.match(str(sglang.get("commit") or "")):
        errors.append(
            f"sglang.commit: a git source needs a full 40-hex commit, got {sglang.get('commit')!r} "
            "(set it in the bundle or with sglang_stack_sglang_commit)"
        )
    return errors + (git_source_problems(sglang) if sglang.get("git") else [])


# What a bundle hands to git, pip and uv is checked before any of them sees it: a value they would read as an option
# (--upload-pack=COMMAND, -r FILE), a transport helper (ext::COMMAND), or a line break that starts a new line in a
# requirements file runs commands or reads files on the controller or the host.
_HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
_USER = r"[A-Za-z0-9_][A-Za-z0-9_.+-]*"
GIT_URL = re.compile(
    rf"https://(?:[^/@\s]+@)?{_HOST}(?::[0-9]+)?(?:/\S*)?"  # https, optionally with credentials
    rf"|ssh://(?:{_USER}@)?{_HOST}(?::[0-9]+)?/\S*"
    rf"|(?:{_USER}@)?{_HOST}:(?!//)\S+"  # ssh, scp-like: git@github.com:sgl-project/sglang
    r"|file:///\S*|/\S*"  # a local repository
)
GIT_URL_FORMS = "https://HOST/PATH, ssh://[USER@]HOST/PATH, USER@HOST:PATH, file:///PATH or an absolute path"
# The bundle's Python: the role runs python<PYTHON> on the host, and uv takes it as --python-version.
PYTHON = re.compile(r"3\.[0-9]+(?:\.[0-9]+)?")
# A branch or tag name: no option, no revision syntax (.., ^{}, @{, ~, :), no wildcard.
GIT_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+-]*(?:[./][A-Za-z0-9_+-]+)*")
# A folder inside the checkout: no segment starts with '.', so no '..'; not absolute.
SUBDIRECTORY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")

# A package name (PEP 508), with extras: flashinfer-python, sglang[all].
PACKAGE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._,-]*\])?")
# A version or a PEP 440 specifier set: 2.14.1, >=2.15.0.dev0, ==2.12.0.dev20260307+cu130, >=1,<2.
VERSION = re.compile(r"[A-Za-z0-9.*+!_=<>~, ]*[A-Za-z0-9.*+!_]")
INDEX_URL = re.compile(r"https?://\S+|file:///\S*")
# The lock file a locked bundle names: a plain file name beside the bundle, never a path.
LOCK_FILE = re.compile(r"[a-z0-9][a-z0-9.-]*\.lock\.yml")


# The interpreter of an image a layered bundle's venv is made with: an absolute path, no part '.' or '..' or beginning
# with '-'; the role runs it as root.
BASE_PYTHON = re.compile(r"(?:/(?!\.\.?(?:/|\Z))[A-Za-z0-9_.+][A-Za-z0-9_.+-]*)+")


def base_problems(bundle: dict) -> list[str]:
    """A base (the image's Python that a layered bundle's venv is made with) that is not a mapping with an absolute
    interpreter path."""
    base = bundle.get("base")
    if base is None:
        return []
    if not (isinstance(base, dict) and isinstance(base.get("python"), str) and BASE_PYTHON.fullmatch(base["python"])):
        return ["base.python: the absolute path of the image's interpreter, such as /opt/torch/.venv/bin/python"]
    return []


def layered_lock_problems(bundle: dict) -> list[str]:
    """A bundle layered on an image's Python installs only the wheels of its lock: nothing is resolved against what
    the image holds."""
    if bundle.get("base") and not bundle.get("lock"):
        return [
            f"base: a bundle layered on an image's Python installs only from a lock; lock it from the folder of the "
            f"wheels the image lacks: sglang-deploy stack lock {bundle.get('name')} --wheels DIR"
        ]
    return []


def base_python_problems(path: str) -> list[str]:
    """On the host: the base interpreter, what it links to and every folder above either must be root's and writable
    by no one else, since the role runs it as root (a bundle is data: it must not pick a program another user
    controls)."""
    if not os.path.exists(path):
        return [f"base.python: {path} is not on this host"]
    problems = []
    for start in dict.fromkeys((path, os.path.realpath(path))):
        part = start
        while True:
            st = os.stat(part)
            # A sticky folder (/tmp) lets no one else rename or remove root's entries in it.
            if st.st_uid != 0 or (st.st_mode & 0o022 and not (part != start and st.st_mode & 0o1000)):
                problems.append(f"{part} (uid {st.st_uid}, mode {oct(st.st_mode & 0o7777)})")
            if part == "/":
                break
            part = os.path.dirname(part)
    if problems:
        return [
            f"base.python: {path} is not root's alone, and the role runs it as root: "
            + ", ".join(dict.fromkeys(problems))
            + ": use an interpreter that only root can change"
        ]
    return []


def _control(text: str) -> bool:
    return CONTROL.search(text) is not None


def git_source_problems(sglang: dict) -> list[str]:
    """A git source that git would take as an option or a command, or that is not one of the GIT_URL_FORMS; a ref or
    subdirectory that is not a plain name. Values are not repeated (a URL may hold a password)."""
    url, problems = sglang.get("git"), []
    if not isinstance(url, str):
        problems.append("sglang.git: a repository URL (a string)")
    elif url.startswith("-"):
        problems.append("sglang.git: begins with '-': git would read it as an option; give a repository URL")
    elif re.match(r"[A-Za-z0-9._~-]+::", url):  # git's own test for TRANSPORT::ADDRESS
        problems.append("sglang.git: names a git transport helper (TRANSPORT::ADDRESS), which runs commands")
    elif _control(url) or not GIT_URL.fullmatch(url):
        problems.append(f"sglang.git: not a repository URL of the forms {GIT_URL_FORMS} (no whitespace)")
    ref = sglang.get("ref")
    if ref not in (None, "") and not (
        isinstance(ref, str) and GIT_REF.fullmatch(ref) and not ref.endswith(".lock") and len(ref) <= 200
    ):
        problems.append(
            f"sglang.ref {str(ref)[:60]!r}: a branch or tag name (letters, digits, '_', '+', '-', '.', '/'; "
            "not beginning with '-', no '..')"
        )
    subdirectory = sglang.get("subdirectory", "python")
    if not (isinstance(subdirectory, str) and SUBDIRECTORY.fullmatch(subdirectory)):
        problems.append(
            f"sglang.subdirectory {str(subdirectory)[:60]!r}: a folder inside the repository (a relative path "
            "whose parts do not begin with '.' or '-')"
        )
    return problems


def lock_file_problems(bundle: dict) -> list[str]:
    """A lock.file that is not a plain file name beside the bundle (a path would be read, and echoed in errors)."""
    lock = bundle.get("lock")
    if lock and not (
        isinstance(lock, dict) and isinstance(lock.get("file"), str) and LOCK_FILE.fullmatch(lock["file"])
    ):
        return [
            "lock.file: the file name of a lock beside the bundle (NAME.lock.yml, no folder); lock the bundle again"
        ]
    return []


def requirement_problems(bundle: dict) -> list[str]:
    """Versions, package names and extra_packages that pip or uv would read as an option (a word beginning with '-':
    -r FILE, --index-url) or as more than one line of a requirements file."""
    problems = []
    for key in ("torch", "flashinfer", "sglang"):
        version = bundle.get(key, {}).get("version") if isinstance(bundle.get(key), dict) else None
        if _text(version) and not VERSION.fullmatch(version):
            problems.append(f"{key}.version {version[:60]!r}: a version or a specifier such as >=2.15.0.dev0")
    package = bundle.get("flashinfer", {}).get("package") if isinstance(bundle.get("flashinfer"), dict) else None
    if package is not None and not (isinstance(package, str) and PACKAGE.fullmatch(package)):
        problems.append(f"flashinfer.package {str(package)[:60]!r}: a package name such as flashinfer-python")
    extras = bundle.get("extra_packages", [])
    for index, entry in enumerate(extras if isinstance(extras, list) else []):
        if not isinstance(entry, str) or not entry.strip():
            problems.append(f"extra_packages[{index}]: a requirement string such as 'nvidia-ml-py>=12'")
        elif _control(entry) or not re.match(r"[A-Za-z0-9]", entry) or re.search(r"\s-", entry):
            problems.append(
                f"extra_packages[{index}]: not a requirement beginning with a package name, or it holds an option "
                "(a word beginning with '-', such as -r FILE) or a line break, which pip and uv would obey: give "
                "only a requirement such as 'nvidia-ml-py>=12'"
            )
    return problems


def index_url_problems(bundle: dict) -> list[str]:
    """Index URLs that are not http(s):// or file:// URLs (a value beginning with '-' would be an option)."""
    named = [("index_url", bundle.get("index_url"))]
    for key in ("torch", "flashinfer"):
        if isinstance(bundle.get(key), dict):
            named.append((f"{key}.index_url", bundle[key].get("index_url")))
    extra = bundle.get("extra_index_urls", [])
    named += [(f"extra_index_urls[{index}]", url) for index, url in enumerate(extra if isinstance(extra, list) else [])]
    return [
        f"{key}: an index URL (https://HOST/PATH, http://HOST/PATH or file:///PATH, no whitespace)"
        for key, url in named
        if url not in (None, "") and not (isinstance(url, str) and not _control(url) and INDEX_URL.fullmatch(url))
    ]


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


def lock_id(lock: dict) -> str:
    """sha256 of a lock's canonical JSON: the locked bundle names it, so an edited lock is refused."""
    return hashlib.sha256(json.dumps(lock, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_lock(bundle: dict, lock: dict | None) -> list[str]:
    """Problems between a locked bundle and its lock file (empty when the bundle has no lock, or they agree)."""
    ref = bundle.get("lock")
    if not ref or lock_file_problems(bundle):  # validate names a lock.file that is not a file name
        return []
    if not isinstance(lock, dict) or not isinstance(lock.get("packages"), list):
        return [f"lock {ref.get('file')}: missing or not a lock (run: sglang-deploy stack lock)"]
    if lock_id(lock) != ref.get("id"):
        return [
            f"lock {ref.get('file')}: its content does not match the id in bundle {bundle.get('name')} (edited by hand?)"
        ]
    if lock.get("bundle") != bundle.get("name"):
        return [f"lock {ref.get('file')}: written for bundle {lock.get('bundle')}, not {bundle.get('name')}"]
    return [f"lock {ref.get('file')}: {problem}" for problem in entry_problems(lock_files(lock))]


# A wheel's file name, under at most one folder of the wheelhouse (wheels built at lock time); no segment starts
# with '.', so neither '..' nor an absolute path gets through.
WHEEL_FILE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.+!-]*/)?[A-Za-z0-9_][A-Za-z0-9_.+!-]*\.whl")
SHA256 = re.compile(r"[0-9a-f]{64}")
URL_SCHEMES = ("https://", "http://", "file://")


def entry_problems(entries: list) -> list[str]:
    """Lock entries that could reach outside the wheelhouse: a file that is not a wheel's name inside it (no '..',
    no absolute path), a sha256 that is not 64 hex digits, or a URL of another scheme. The lock id only detects an edit of the
    lock alone, so these are checked on every use."""
    problems = []
    for entry in entries:
        if not isinstance(entry, dict):
            problems.append(f"entry {entry!r} is not a mapping (lock the bundle again)")
            continue
        name, digest, url = entry.get("file"), entry.get("sha256"), entry.get("url")
        if not isinstance(name, str) or not WHEEL_FILE.fullmatch(name):
            problems.append(f"file {name!r} is not a wheel's file name (lock the bundle again)")
        elif not isinstance(digest, str) or not SHA256.fullmatch(digest):
            problems.append(f"{name}: sha256 {digest!r} is not 64 lowercase hex digits (lock the bundle again)")
        elif url and not (isinstance(url, str) and url.startswith(URL_SCHEMES) and not _control(url)):
            problems.append(
                f"{name}: its url is not http(s):// or file://, or holds a control character (lock the bundle again)"
            )
    return problems


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_files(lock: dict) -> list[dict]:
    """Every wheel a lock needs on the host: the stack's packages, then the installer's own wheel (uv)."""
    return list(lock["packages"]) + list(lock.get("installer", []))


def requirements_text(lock: dict, wheel_dir: str) -> str:
    """A --require-hashes requirements file naming each locked wheel file in wheel_dir."""
    return "".join(
        f"{os.path.join(wheel_dir, entry['file'])} --hash=sha256:{entry['sha256']}\n" for entry in lock["packages"]
    )


# Environment of an offline install: the lock is the whole truth, so no pip configuration file of the host
# (a global constraint file, find-links) takes part; pip's --isolated drops PIP_* variables, uv's --no-config uv.toml.
INSTALL_ENV = {"PIP_CONFIG_FILE": os.devnull}


def install_argv(installer: str, venv: str, requirements: str, uv: str = "", layered: bool = False) -> list[str]:
    """Offline install of a locked requirements file into venv: no index, no dependency resolution, hashes required
    (run with INSTALL_ENV). Bytecode is compiled at install, as pip does by default: the service account cannot
    write __pycache__ in the root-owned venv, so uncompiled modules would be compiled again at every start.
    A layered venv (made without pip) installs with the image's pip, which it sees through its .pth, with
    --ignore-installed: every locked wheel goes into the venv, also where the image holds the same version, and
    the image's own packages are never touched."""
    common = ["--no-index", "--no-deps", "--require-hashes", "-r", requirements]
    if layered:
        common.append("--ignore-installed")
    if installer == "uv" and not layered:
        return [
            uv,
            "pip",
            "install",
            "--no-config",
            "--python",
            os.path.join(venv, "bin", "python"),
            "--offline",
            "--no-cache",
            "--compile-bytecode",
        ] + common
    return [
        os.path.join(venv, "bin", "python"),
        "-m",
        "pip",
        "install",
        "--isolated",
        "--no-input",
        "--disable-pip-version-check",
    ] + common


# What `python -m venv` puts in every venv: not part of a lock, never reported as drift.
VENV_BOOTSTRAP = ("pip", "setuptools", "wheel")


def package_drift(lock: dict, installed: dict) -> list[str]:
    """Per package, where installed (name -> version, from the host's manifest) differs from the lock."""
    wanted = {normalize(entry["name"]): entry["version"] for entry in lock["packages"]}
    have = {normalize(name): version for name, version in installed.items()}
    found = []
    for name in sorted(set(wanted) | set(have)):
        if name not in have:
            found.append(f"{name}: not installed, lock {wanted[name]}")
        elif name not in wanted:
            if name not in VENV_BOOTSTRAP:
                found.append(f"{name}: installed {have[name]}, not in the lock")
        elif have[name] != wanted[name]:
            found.append(f"{name}: installed {have[name]}, lock {wanted[name]}")
    return found


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
