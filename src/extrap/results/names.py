"""Names on disk derived from labels."""

from __future__ import annotations

import re


def slug(name: str) -> str:
    """A file or folder name for a PE spec (formulas included) or any other label."""
    s = re.sub(r"[^A-Za-z0-9.=+-]+", "_", name).strip("_")
    return s[:80] or "pe"
