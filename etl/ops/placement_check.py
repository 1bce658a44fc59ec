"""`etl verify --deep` by event time: every row sits in the partition of its own event time, and
each part holds the rows its manifest says.

Reads, for every file of a range that has a manifest, its event-time column only, places each
row with the table's partitioner in [hive] partition_timezone, and compares with the folder the
file is in. A NULL event time is skipped (on_missing_event_time = planning_time places it in the
batch's planning-time partition). Ranges without a manifest were written by planning time.
A routed job's tables share one partitioner; a split range's parts are counted per table.
"""
from __future__ import annotations

import pyarrow.compute as pc

from etl.ops.coverage import MAX_LISTED, Problem
from etl.ops.inventory import Inventory
from etl.sink.file_format import read_columns
from etl.sink.fs import WarehouseFileSystem
from etl.sink.manifest import RangeManifest


def check_placement(config, fs: WarehouseFileSystem, partitioner, inventories: dict[str, Inventory],
                    manifests: list[RangeManifest]) -> list[Problem]:
    """`partitioner`: the tables', in [hive] partition_timezone; `inventories`: each table's, by name."""
    column = config.hive.partitioning.event_column  # None by planning time: no row has a partition of its own
    if not manifests or column is None:
        return []
    counted = {(p.table, m.file_range, p.partition): p.rows for m in manifests for p in m.parts}
    by_path: dict[tuple[str, str], list] = {}
    for table, inventory in inventories.items():
        for f in inventory.files:
            by_path.setdefault((table, f.path), []).append(f)
    problems = []
    for (table, path), entries in by_path.items():
        # A merged file (etl.compaction.merge) holds several ranges: each one's rows are counted by offset.
        expected = {f.range: _counted(counted, table, f) for f in entries}
        if all(rows is None for rows in expected.values()):
            continue  # no manifest (planning time), or a stray part etl.ops.parts names
        table = read_columns(fs, path, entries[0].file_format, [column, "kafka_offset"])
        offsets = table.column("kafka_offset")
        for r, rows in expected.items():
            held = table.num_rows if len(entries) == 1 else pc.sum(pc.and_(
                pc.greater_equal(offsets, r.start), pc.less(offsets, r.end)).cast("int64")).as_py() or 0
            if rows is not None and held != rows:
                problems.append(Problem("part_rows_mismatch", path, f"holds {held} rows of offsets [{r.start}, "
                                        f"{r.end}), its manifest says {rows}",
                                        "move the file out of the warehouse and run `etl recover`"))
        problems += _misplaced(entries[0], table, column, partitioner)
        if len(problems) >= MAX_LISTED:
            break
    return problems


def _counted(counted: dict, table: str, f) -> int | None:
    """The rows the manifest lists for the file's part: a split's names its table, a one-table or
    whole-routed range's names none."""
    key = (f.range, f.partition_path)
    rows = counted.get((table, *key))
    return counted.get(("", *key)) if rows is None else rows


def _misplaced(f, table, column: str, partitioner) -> list[Problem]:
    # Floored to the millisecond the partitioner counts in: read as written (us or ns), a value a
    # fraction before a boundary belongs before it, in every year.
    values = pc.floor_temporal(table.column(column).combine_chunks(), unit="millisecond")
    keys = partitioner.wall_starts(values.cast("timestamp[ms]"))
    wrong = [(key, offset) for key, offset in zip(keys.to_pylist(), table.column("kafka_offset").to_pylist())
             if key is not None and partitioner.path(partitioner.values_of_key(key)) != f.partition_path]
    if not wrong:
        return []
    key, offset = wrong[0]
    should = partitioner.path(partitioner.values_of_key(key))
    return [Problem("misplaced_row", f.path, f"{len(wrong)} rows are not in the partition of their {column} "
                    f"(e.g. offset {offset} belongs in {should})",
                    "move the file out of the warehouse and run `etl recover`, which rewrites its range")]
