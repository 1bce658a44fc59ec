"""One pass over an event-time range: the rows of each Hive partition into a Parquet file of their own.

Memory stays flat however many partitions a range touches (a backfill range may span 720
hourly partitions):
  - at most `max_open` files are open in one pass ([hive] max_open_partition_files), over all the
    tables of a routed range's writers when they share one budget (OpenFiles). Rows of
    further partitions are left for the next pass over the range, which skips the partitions
    already written. A file is written whole in one pass, so each (range, partition) is still
    one file; the common range (a few partitions) takes one pass;
  - the rows buffered by all open files of the budget together stay under one row group: past
    that, the largest buffer is written out as a (smaller) row group.
The files are written under temp names beside their final names; publishing is the task's job.
"""
from __future__ import annotations

import posixpath
from typing import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from etl.model.naming import temp_name
from etl.model.partitioning import TimePartitioner
from etl.rows.placement import PlacedRows
from etl.sink.file_format import open_sink
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.row_groups import RowGroupSink


@dataclass(frozen=True)
class WrittenPart:
    key: int
    partition: str  # the Hive partition's path: dt=.../hour=..., or dt=... for a daily table
    temp_path: str
    final_path: str
    rows: int
    late: int


class OpenFiles:
    """The files one task keeps open at once, over all its writers (one per table of a routed
    range), and the rows they buffer together."""

    def __init__(self, max_open: int, row_group_size: int):
        self.max_open, self.row_group_size = max_open, row_group_size
        self.sinks: list[RowGroupSink] = []

    def full(self) -> bool:
        return len(self.sinks) >= self.max_open

    def bound_memory(self) -> None:
        buffered = sum(s.buffered_rows for s in self.sinks)
        while buffered > self.row_group_size:
            largest = max(self.sinks, key=lambda s: s.buffered_rows)
            buffered -= largest.buffered_rows
            largest.flush()


class PassWriter:
    def __init__(self, fs: WarehouseFileSystem, table_root: str, file_name: str, partitioner: TimePartitioner,
                 schema: pa.Schema, row_group_size: int, layout: FileLayout, skip: frozenset[int],
                 max_open: int | OpenFiles, relocated: Mapping[str, str]):
        """`max_open`: this writer's own budget, or one it shares with the task's other writers.
        `relocated`: the folders of compacted partitions (etl.model.compaction), relative to table_root."""
        self._fs, self._root, self._file_name, self._partitioner = fs, table_root, file_name, partitioner
        self._relocated = relocated
        self._schema, self._row_group_size, self._layout = schema, row_group_size, layout
        self._skip = skip
        self._budget = max_open if isinstance(max_open, OpenFiles) else OpenFiles(max_open, row_group_size)
        self._sinks: dict[int, RowGroupSink] = {}
        self._late: dict[int, int] = {}
        self.deferred = False  # rows of a partition left for the next pass

    def __enter__(self) -> PassWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self.abort()

    def write(self, rows: pa.Table, placed: PlacedRows) -> None:
        if not rows.num_rows:
            return
        order = pc.sort_indices(placed.keys)  # stable: each partition's rows stay in offset order
        keys, rows, late = placed.keys.take(order), rows.take(order), placed.late.take(order)
        runs = pc.value_counts(keys)  # sorted keys: each key once, in order
        start = 0
        for key, count in zip(runs.field("values").to_pylist(), runs.field("counts").to_pylist()):
            sink = self._sink_for(key)
            if sink is not None:
                sink.append(rows.slice(start, count))
                self._late[key] += pc.sum(late.slice(start, count).cast(pa.int64())).as_py() or 0
            start += count
        self._budget.bound_memory()

    def ensure(self, key: int) -> None:
        """A file for `key` even without rows (a range with no kept row still has one file)."""
        self._sink_for(key)

    def close(self) -> list[WrittenPart]:
        parts = []
        for key, sink in sorted(self._sinks.items()):
            sink.close()
            folder = posixpath.dirname(sink.path)
            partition = self._partitioner.path(self._partitioner.values_of_key(key))
            parts.append(WrittenPart(key, partition, sink.path,
                                     posixpath.join(folder, self._file_name), sink.rows_appended, self._late[key]))
        return parts

    def abort(self) -> None:
        for sink in self._sinks.values():
            sink.abort()

    def _sink_for(self, key: int) -> RowGroupSink | None:
        if key in self._sinks:
            return self._sinks[key]
        if key in self._skip:
            return None
        if self._budget.full():
            self.deferred = True
            return None
        partition = self._partitioner.path(self._partitioner.values_of_key(key))
        folder = posixpath.join(self._root, self._relocated.get(partition, partition))
        sink = open_sink(self._fs, posixpath.join(folder, temp_name(self._file_name)), self._schema,
                         self._row_group_size, self._layout)
        sink.open()
        self._sinks[key], self._late[key] = sink, 0
        self._budget.sinks.append(sink)
        return sink
