"""Rooms stay small enough to read: no module of etl/ over 350 lines, no file of scripts/ over
150 (a script is argparse plus one call into a package; the work lives in the package)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {"etl": ("*.py", 350), "scripts": ("*", 150)}


def oversized(folder: str) -> list[str]:
    pattern, limit = LIMITS[folder]
    found = []
    for path in sorted((ROOT / folder).rglob(pattern)):
        if path.is_file() and path.suffix not in (".jar", ".class") and "__pycache__" not in path.parts:
            lines = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(ROOT)}: {lines} lines (limit {limit})")
    return found


def test_no_etl_module_over_350_lines():
    assert oversized("etl") == []


def test_no_script_over_150_lines():
    assert oversized("scripts") == []
