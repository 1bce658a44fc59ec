"""The support matrix (docs/installing.md, "The support matrix") says what runs each version and
security mode; the test modules say it too, with `@pytest.mark.cell(...)`. The two must agree:
a cell the table says CI runs in named modules is marked in each of them and in no other, and
every cell a module is marked with is a CI row of the table."""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "installing.md"
TESTS = ROOT / "tests" / "integration"
WHOLE_SUITE = "the whole suite"


def _matrix_rows() -> list[dict[str, object]]:
    text = MATRIX.read_text()
    section = text.split("## The support matrix", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([a-z0-9.-]+)`", cells[0])
        modules = re.findall(r"`(test_[a-z0-9_]+\.py)`", cells[3])
        rows.append({"names": names, "how": cells[2], "modules": modules, "whole": cells[3] == WHOLE_SUITE})
    return rows


def _marked_cells() -> dict[str, set[str]]:
    """cell -> the modules marked with it (pytest.mark.cell("a", "b") anywhere in a module)."""
    marked: dict[str, set[str]] = defaultdict(set)
    for module in sorted(TESTS.glob("test_*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.mark.cell":
                for arg in node.args:
                    marked[ast.literal_eval(arg)].add(module.name)
    return marked


def test_the_matrix_has_its_rows():
    rows = _matrix_rows()
    names = [name for row in rows for name in row["names"]]
    assert len(names) == len(set(names)), names
    assert {"spark-4.2", "spark-3.5", "kafka-4.4", "kafka-acls", "kafka-gssapi", "hive-3.1", "hive-4.0"} <= set(names)


def test_every_ci_cell_is_marked_in_the_modules_the_matrix_names_and_only_there():
    marked = _marked_cells()
    for row in _matrix_rows():
        for name in row["names"]:
            if row["how"] != "CI":
                assert name not in marked, f"{name} is not run in CI by the matrix, yet {marked[name]} are marked"
            elif row["whole"]:
                assert name not in marked, \
                    f"{name} runs in the whole suite by the matrix, yet {marked[name]} are marked"
            else:
                assert row["modules"], f"{name}: a CI row names its modules or says {WHOLE_SUITE!r}"
                assert all((TESTS / module).exists() for module in row["modules"]), row
                assert marked.get(name) == set(row["modules"]), (name, marked.get(name), row["modules"])


def test_every_marked_cell_is_a_ci_row_of_the_matrix():
    ci = {name for row in _matrix_rows() if row["how"] == "CI" for name in row["names"]}
    assert set(_marked_cells()) <= ci, set(_marked_cells()) - ci
