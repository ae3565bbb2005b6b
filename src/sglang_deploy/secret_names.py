"""What counts as a secret by its name, and masking it (extra variables, environment variables in results)."""

from __future__ import annotations

import re

SECRET_NAME_RE = re.compile(r"api_key|apikey|token|password|passwd|secret|credential", re.IGNORECASE)
MASK = "***"


def is_secret_name(name: object) -> bool:
    return bool(SECRET_NAME_RE.search(str(name)))


def mask(mapping: dict) -> dict:
    """A copy of ``mapping`` whose values under secret-looking names are replaced by ***."""
    return {key: (MASK if is_secret_name(key) else value) for key, value in mapping.items()}
