"""The parts of event-time ranges, checked against their manifests (etl.sink.manifest).

By event time a range has a file in each Hive partition its rows fell in, all with its name, so
the walk of etl.ops.coverage sees the range as long as one of them is left: a part deleted by
hand would hide behind the others. The manifest lists every part, so:
  - missing_part: the manifest lists a partition whose file is gone;
  - stray_part: a file of the range in a partition its manifest does not list.
A range without a manifest was written by planning time: a second file of it is a copy, which
etl.ops.coverage reports as an overlap. A range of a topic split among tables has a manifest whose
parts name their tables: its parts are checked per table (check_split_parts), by planning time
(one partition) as by event time.
Ranges of the open batch are not judged: they may be half published, which its resume finishes.
`etl recover` repairs both the same way: every file of the range (main parts, its
rejected file, its manifest) moves out of the table, and the range is rewritten from Kafka.
"""
from __future__ import annotations

from collections import defaultdict

from etl.model.batch import Batch
from etl.model.naming import FileRange
from etl.ops.coverage import Problem
from etl.ops.inventory import Inventory
from etl.sink.manifest import RangeManifest

_ACTION = ("run `etl recover`: it moves the range's remaining files out of the table (under the warehouse's "
           "_etl_moved_aside folder) and rewrites the range from Kafka while Kafka still holds it")


def check_parts(inventory: Inventory, manifests: list[RangeManifest], open_batch: Batch | None) -> list[Problem]:
    planned = {r.file_range for r in open_batch.file_ranges} if open_batch else set()
    folders = _folders_by_range(inventory)
    listed = {m.file_range: m for m in manifests
              if not any(part.table for part in m.parts)}  # a split's: per table, check_split_parts
    problems = []
    for file_range in sorted(set(folders) | set(listed)):
        if file_range in planned:
            continue
        problems += _range_problems(file_range, folders.get(file_range, set()), listed.get(file_range))
    return problems


def check_split_parts(inventories: dict[str, Inventory], manifests: list[RangeManifest],
                      open_batch: Batch | None) -> list[Problem]:
    """A range of a topic split by a field (etl.job.route_task, etl.job.event_task) has a file in
    each (table, partition) its manifest lists; the walk sees the range once, by its manifest, so a
    file gone from one table would hide behind the others, and a copy in another of its tables'
    partitions beside them. `inventories`: each table's, by name."""
    planned = {r.file_range for r in open_batch.file_ranges} if open_batch else set()
    present: dict[FileRange, set[tuple[str, str]]] = defaultdict(set)
    for table, inventory in inventories.items():
        for f in inventory.files:
            present[f.range].add((table, f.partition_path))
    problems = []
    for m in manifests:
        file_range = m.file_range
        listed = {(part.table, part.partition) for part in m.parts if part.table}
        if not listed or file_range in planned:
            continue
        name, tables = f"{m.topic}[{m.partition}] {_name(file_range)}", {table for table, _ in listed}
        found = {(table, path) for table, path in present.get(file_range, set()) if table in tables}
        problems += [Problem("missing_part", name, f"its manifest lists a file in table {table}, {path}, which is "
                             f"gone: the rows it held are missing from that table", _ACTION)
                     for table, path in sorted(listed - found)]
        problems += [Problem("stray_part", name, f"a file of the range is in table {table}, {path}, which its "
                             f"manifest does not list (copied or moved by hand?): its rows may be in the table twice",
                             _ACTION) for table, path in sorted(found - listed)]
    return problems


def damaged_ranges(problems: list[Problem]) -> set[str]:
    """The ranges `check_parts` found damaged, by their names' stems (FileRange.stem)."""
    return {p.where.rsplit(" ", 1)[-1] for p in problems if p.kind in PART_PROBLEMS}


PART_PROBLEMS = ("missing_part", "stray_part")


def _folders_by_range(inventory: Inventory) -> dict[FileRange, set[str]]:
    found: dict[FileRange, set[str]] = defaultdict(set)
    for f in inventory.files:
        found[f.range].add(f.partition_path)
    return found


def _range_problems(file_range: FileRange, folders: set[str], manifest: RangeManifest | None) -> list[Problem]:
    name = f"{file_range.topic}[{file_range.partition}] {_name(file_range)}"
    if manifest is None:
        return []  # planning time: one file; a second one is a copy, which the walk names an overlap
    listed = {part.partition for part in manifest.parts}
    problems = [Problem("missing_part", name, f"its manifest lists a file in {path}, which is gone: the rows of "
                        f"that partition are missing from the table", _ACTION) for path in sorted(listed - folders)]
    problems += [Problem("stray_part", name, f"a file of the range is in {path}, which its manifest does not list "
                         f"(copied or moved by hand?): its rows may be in the table twice", _ACTION)
                 for path in sorted(folders - listed)]
    return problems


def _name(file_range: FileRange) -> str:
    return file_range.stem  # whatever the table's format: damaged_ranges reads it back
