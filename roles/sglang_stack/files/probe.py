"""Import the stack's key packages and print their versions as JSON (run with the venv's python)."""

import json
import platform
import sys
import sysconfig
from importlib import metadata

# The imports are the check.
import flashinfer  # noqa: F401  # pylint: disable=unused-import
import sglang  # noqa: F401  # pylint: disable=unused-import
import torch


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_sha():
    try:
        direct = metadata.distribution("sglang").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    return json.loads(direct).get("vcs_info", {}).get("commit_id") if direct else None


json.dump(
    {
        "python": platform.python_version(),
        "versions": {
            "torch": torch.__version__,
            "flashinfer": version("flashinfer-python") or version("flashinfer"),
            "sglang": version("sglang"),
            "sglang_kernel": version("sglang-kernel") or version("sgl-kernel"),
            "transformers": version("transformers"),
            "triton": version("triton"),
        },
        "torch_cuda": torch.version.cuda,
        "sglang_git_sha": git_sha(),
        # The venv's own packages: a venv layered on an image's Python also sees the image's (torch), not its own.
        "packages": {
            dist.metadata["Name"]: dist.version
            for dist in metadata.distributions(
                path=sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
            )
        },
    },
    sys.stdout,
)
