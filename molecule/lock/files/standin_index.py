"""Stand-in nightly stack for the molecule `lock` scenario (test doubles; the real nightly indexes are unreachable).

    python standin_index.py build ROOT --pypi-wheels DIR      # indexes + SGLang git repository under ROOT
    python standin_index.py nightly ROOT 20261201             # publish one more torch nightly
    python standin_index.py serve ROOT                        # PEP 503 indexes on 127.0.0.1:<free port>

ROOT/pypi/simple: a PEP 503 index of small real wheels from PyPI (DIR, from `pip download`), with sha256 fragments.
ROOT/nightly/simple: stand-in `torch` nightlies (+cu130) and `flashinfer-python`, published WITHOUT hashes, like the
PyTorch index at times. ROOT/sglang.git: a stand-in SGLang (flit_core build, python/ subfolder, branch main) that
pins torch==2.14.1 exactly, as SGLang's wheels do, so a nightly torch needs an override.
The stand-in packages import, report versions like the real ones, and `python -m sglang.launch_server --port N`
answers /health with the venv it runs from.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

TORCH = '__version__ = "{version}"\n\n\nclass version:  # noqa: N801 - torch.version.cuda\n    cuda = "13.0"\n'
FLASHINFER = '__version__ = "{version}"\n'
SGLANG_INIT = '__version__ = "0.6.0.dev1"\n'
LAUNCH = '''"""Stand-in launch_server: /health answers 200 with the venv (sys.prefix, resolved) it runs from."""
import argparse
import http.server
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=30000)
parser.add_argument("--host", default="127.0.0.1")
args, _ = parser.parse_known_args()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = os.path.realpath(sys.prefix).encode()
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer((args.host, args.port), Handler).serve_forever()
'''
PYPROJECT = """[build-system]
requires = ["flit_core>=3.4,<4"]
build-backend = "flit_core.buildapi"

[project]
name = "sglang"
version = "0.6.0.dev1"
description = "stand-in SGLang (test double)"
dependencies = ["torch==2.14.1", "flashinfer-python==0.7.2", "idna>=3"]
"""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def write_wheel(out: Path, name: str, version: str, module: str, source: str, requires: list[str] = ()) -> Path:
    """A minimal valid wheel (PEP 427): one module, METADATA, WHEEL, RECORD."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}/__init__.py": source.encode(),
        f"{dist}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {req}\n" for req in requires)
        ).encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = (
        "".join(
            f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
            for path, data in files.items()
        )
        + f"{dist}.dist-info/RECORD,,\n"
    )
    files[f"{dist}.dist-info/RECORD"] = record.encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name_in_zip, data in files.items():
            archive.writestr(zipfile.ZipInfo(name_in_zip, (2026, 11, 30, 0, 0, 0)), data)
    return path


def publish(index: Path, wheel_dir: Path, hashes: bool) -> None:
    """Write ROOT/<index>/simple/<project>/index.html for every wheel in wheel_dir (PEP 503)."""
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(wheel_dir.glob("*.whl")):
        projects.setdefault(normalize(wheel.name.split("-")[0]), []).append(wheel)
    simple = index / "simple"
    for project, wheels in projects.items():
        links = []
        for wheel in wheels:
            fragment = f"#sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}" if hashes else ""
            links.append(f'<a href="../../files/{wheel.name}{fragment}">{wheel.name}</a><br>')
        (simple / project).mkdir(parents=True, exist_ok=True)
        (simple / project / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        )
    (simple / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        + "\n".join(f'<a href="{p}/">{p}</a><br>' for p in sorted(projects))
        + "\n</body></html>\n"
    )


def nightly(root: Path, day: str) -> None:
    files = root / "nightly" / "files"
    write_wheel(files, "torch", f"2.15.0.dev{day}+cu130", "torch", TORCH.format(version=f"2.15.0.dev{day}+cu130"))
    publish(root / "nightly", files, hashes=False)


def build(root: Path, pypi_wheels: Path) -> None:
    pypi_files = root / "pypi" / "files"
    pypi_files.mkdir(parents=True, exist_ok=True)
    for wheel in pypi_wheels.glob("*.whl"):
        (pypi_files / wheel.name).write_bytes(wheel.read_bytes())
    publish(root / "pypi", pypi_files, hashes=True)
    write_wheel(
        root / "nightly" / "files",
        "flashinfer-python",
        "0.7.3.dev20261130",
        "flashinfer",
        FLASHINFER.format(version="0.7.3.dev20261130"),
    )
    nightly(root, "20261130")
    repo = root / "sglang.git"
    package = repo / "python" / "sglang"
    package.mkdir(parents=True, exist_ok=True)
    (repo / "python" / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text(SGLANG_INIT)
    (package / "launch_server.py").write_text(LAUNCH)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "standin",
        "GIT_AUTHOR_EMAIL": "standin@example.invalid",
        "GIT_COMMITTER_NAME": "standin",
        "GIT_COMMITTER_EMAIL": "standin@example.invalid",
    }
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "stand-in SGLang"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, env=env)


def serve(root: Path) -> None:
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(root))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    (root / "port").write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    command, root = sys.argv[1], Path(sys.argv[2])
    if command == "build":
        build(root, Path(sys.argv[sys.argv.index("--pypi-wheels") + 1]))
    elif command == "nightly":
        nightly(root, sys.argv[3])
    elif command == "serve":
        serve(root)
