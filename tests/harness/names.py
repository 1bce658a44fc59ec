"""Names built from a test's name, safe where they go (topic, znode, job, table)."""
from __future__ import annotations

import re


def sanitize(name: str, allowed: str, max_len: int) -> str:
    """`name` with runs of characters outside `allowed` (a regex class body) replaced by '_'."""
    return re.sub(f"[^{allowed}]+", "_", name).strip("_")[:max_len] or "test"
