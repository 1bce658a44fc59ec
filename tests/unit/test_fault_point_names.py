"""The fault points' names (etl.faults), read from the code with `ast`: faults.py's docstring
lists every one, and no two differ only by case (a test that names one must not hit the other)."""
from __future__ import annotations

import ast
from pathlib import Path

from etl import faults

PACKAGE = Path(faults.__file__).resolve().parent


def checkpoint_names() -> set[str]:
    """Each `faults.checkpoint(...)` argument in etl/, a formatted value written `<`."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "checkpoint" and node.args:
                names.add(_text(node.args[0]))
    return names


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    assert isinstance(node, ast.JoinedStr), ast.dump(node)
    return "".join(str(part.value) if isinstance(part, ast.Constant) else "<" for part in node.values)


def test_the_docstring_lists_every_fault_point():
    names = checkpoint_names()
    assert len(names) >= 18
    doc = faults.__doc__ or ""
    assert sorted(n for n in names if n not in doc) == []
    assert f"({len(names)} in all" in doc


def test_no_two_fault_points_differ_only_by_case():
    by_lower: dict[str, set[str]] = {}
    for name in checkpoint_names():
        by_lower.setdefault(name.lower(), set()).add(name)
    assert [sorted(same) for same in by_lower.values() if len(same) > 1] == []
