"""The architecture, checked: etl/'s imports run one way and never in a circle.

Every `import` and `from ... import` in etl/ is read with `ast`, including those inside
functions (a lazy import is still a dependency: hiding one in a function is how cycles
used to get in). Two rules:
  * direction: a module imports only from its own room or from rooms on a lower floor;
    rooms on the same floor never import each other (rows and sink meet only in job);
  * no cycle between modules, inside a room or across rooms.
The floor table of docs/design.md ("Code layout") is checked against FLOORS, so that the picture
a reader gets cannot drift from the rule the code is held to.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "etl"
DESIGN = PACKAGE.parent / "docs" / "design.md"

# Bottom to top. A room is a sub-package of etl, or a module directly in etl/.
FLOORS: tuple[frozenset[str], ...] = tuple(frozenset(rooms) for rooms in (
    {"errors"},
    {"logs"},
    {"config"},
    {"retry", "faults", "spark_line"},
    {"model"},
    {"source", "state"},
    {"rows", "sink"},
    {"hive", "postgres"},
    {"compaction"},
    {"job"},
    {"context"},
    {"ops"},
    {"cli", "examples"},
    {"submitted"},
    {"__main__"},
))
FLOOR_OF = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package: Path, known: set[str]) -> set[str]:
    """The etl modules that this file imports, anywhere in it."""
    this = module_name(path, package)
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, this, is_package)
            # `from etl.ops import status` imports the module etl.ops.status
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules if len(submodules) == len(node.names) else submodules | {base})
    return {_nearest_known(name, known) for name in found if name.split(".")[0] == package.name} - {this, None}


def _absolute(node: ast.ImportFrom, this: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = this.split(".")
    base = parts[:len(parts) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _nearest_known(name: str, known: set[str]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    known = set(files)
    return {name: imported_modules(path, package, known) for name, path in files.items()}


def room_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def backward_imports(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for importer, targets in sorted(graph.items()):
        here = room_of(importer)
        if here == "__init__":
            continue
        for target in sorted(targets):
            there = room_of(target)
            if there in (here, "__init__"):
                continue
            if there not in FLOOR_OF or here not in FLOOR_OF:
                wrong.append(f"{importer} -> {target}: room {here if here not in FLOOR_OF else there} "
                             f"is on no floor (add it to FLOORS)")
            elif FLOOR_OF[there] > FLOOR_OF[here]:
                wrong.append(f"{importer} -> {target}: {here} imports {there}, which sits above it")
            elif FLOOR_OF[there] == FLOOR_OF[here]:
                wrong.append(f"{importer} -> {target}: {here} and {there} share a floor and never import each other")
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_room_is_on_a_floor():
    rooms = {room_of(module) for module in import_graph()} - {"__init__"}
    assert sorted(rooms - set(FLOOR_OF)) == []


def test_no_import_runs_against_the_flow():
    assert backward_imports(import_graph()) == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


# -- the floor table in docs/design.md is FLOORS -------------------------------------------
def floor_table(text: str) -> list[tuple[int, list[str], str]]:
    """The rows of the first table under "## Code layout": floor, rooms, what the row says."""
    section = text.split("\n## Code layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.split("\n\n| floor |", 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        floor, rooms, holds = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((int(floor), [_room_of_path(p) for p in re.findall(r"`etl/([^`]+)`", rooms)], holds))
    return rows


def _room_of_path(path: str) -> str:
    return path.removesuffix("/").removesuffix(".py")


def table_errors(rows: list[tuple[int, list[str], str]], package: Path = PACKAGE) -> list[str]:
    """Where the table and FLOORS disagree, and the files a row names that its rooms lack."""
    wrong = []
    if [floor for floor, _, _ in rows] != list(range(1, len(rows) + 1)):
        wrong.append(f"the floors are numbered {[floor for floor, _, _ in rows]}, not 1 to {len(rows)}")
    table = [frozenset(rooms) for _, rooms, _ in rows]
    for level in range(max(len(table), len(FLOORS))):
        want = sorted(FLOORS[level]) if level < len(FLOORS) else []
        have = sorted(table[level]) if level < len(table) else []
        if want != have:
            wrong.append(f"floor {level + 1}: FLOORS has {want}, the table {have}")
    for floor, rooms, holds in rows:
        for name in re.findall(r"`([\w/]+(?:\.py|/))`", holds):
            if not any((package / room / name).exists() for room in rooms):
                wrong.append(f"floor {floor}: `{name}` is in none of {rooms}")
    return wrong


def test_the_design_floor_table_is_floors():
    assert table_errors(floor_table(DESIGN.read_text(encoding="utf-8"))) == []


def test_a_drifted_floor_table_is_caught():
    rows = floor_table(DESIGN.read_text(encoding="utf-8"))
    moved = [(floor, rooms + ["hive"] if floor == 1 else [r for r in rooms if r != "hive"], holds)
             for floor, rooms, holds in rows]
    renamed = [(floor, rooms, holds.replace("`plan.py`", "`planner.py`")) for floor, rooms, holds in rows]
    assert any("FLOORS has ['errors'], the table ['errors', 'hive']" in e for e in table_errors(moved))
    assert table_errors(renamed) == [f"floor {FLOOR_OF['compaction'] + 1}: `planner.py` is in none of ['compaction']"]


# -- the checker can fail: a copy of etl/ with one bad import added -----------------------
def _copy_with(tmp_path: Path, relative: str, line: str) -> Path:
    copy = tmp_path / "etl"
    for source in PACKAGE.rglob("*.py"):
        target = copy / source.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    with (copy / relative).open("a", encoding="utf-8") as handle:
        handle.write(f"\n\ndef _added():\n    {line}\n")
    return copy


@pytest.mark.parametrize("relative, line, expected", [
    ("source/kafka.py", "from etl.sink.commit import publish", "source imports sink, which sits above it"),
    ("rows/transform.py", "from etl.sink import commit", "rows and sink share a floor"),
    ("model/batch.py", "from etl.job.driver import Job", "model imports job, which sits above it"),
])
def test_a_backward_import_is_caught(tmp_path, relative, line, expected):
    added = set(backward_imports(import_graph(_copy_with(tmp_path, relative, line))))
    added -= set(backward_imports(import_graph()))
    assert len(added) == 1 and expected in added.pop(), added


def test_a_cycle_is_caught(tmp_path):
    copy = _copy_with(tmp_path, "model/naming.py", "from etl.model import batch")  # batch imports naming
    added = [c for c in cycles(import_graph(copy)) if c not in cycles(import_graph())]
    # batch imports naming, and identity, which imports naming too: one cycle of the three
    assert added == [["etl.model.batch", "etl.model.identity", "etl.model.naming"]]
