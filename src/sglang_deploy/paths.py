"""Where the project's files live: the checkout this package was installed from (pip install -e .)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(os.environ.get("SGLANG_DEPLOY_HOME") or Path(__file__).resolve().parents[2])
GROUP_VARS = REPO / "group_vars"
STACKS = REPO / "stacks"
RESULTS = Path(os.environ.get("SGLANG_DEPLOY_RESULTS") or REPO / "results")
