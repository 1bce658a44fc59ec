"""One Spark task under event-time partitioning: one Kafka partition-batch into a Parquet file per
Hive partition its rows fall in, then the range's manifest (etl.sink.manifest).

A routed job's range is the same task: a topic one route takes whole is one table, as a one-table
job's range; a topic split by a field among several tables (etl.job.range_shares) gets a file per
(table, Hive partition), each table's rows placed by the same Placement, and its manifest in the
job's rejected table (the one every route shares) lists each part with its table.

Order of publishing: the parts, each by a no-replace rename; the rejected file; the manifest
last. The manifest is what says the range is done: a task that finds it writes nothing. A task
that does not find it reads the range again and places its rows the same way (the plan fixes
the Placement and the split's routes), so a part a dead attempt already published is found in
place under its name: the new copy is dropped, after checking it holds as many rows (a part with
another count is not this range's, and is refused). A table of the range with no kept row still
gets one empty file, in the batch's planning-time partition, so that its offsets are covered by
a file name in every table, like any other range.

Runs on an executor; etl.job.write_mode gives it the ranges of a batch planned by event time.
"""
from __future__ import annotations

import posixpath
from contextlib import ExitStack
from typing import Callable, Iterable, Mapping

import pyarrow as pa

from etl import faults
from etl.errors import StateConflict
from etl.job.range_shares import RangeShares, ShareTarget, share_targets
from etl.job.range_task import RangeResult, RangeTask, last_record, opened_tables, range_chunks
from etl.job.split_writer import OpenFiles, PassWriter, WrittenPart
from etl.model.identity import RecordFingerprint
from etl.model.naming import REJECTED_FORMAT, partition_path, temp_name
from etl.model.partitioning import legacy_path
from etl.model.schema import arrow_schema
from etl.rows.placement import planned_key
from etl.sink.commit import publish
from etl.sink.file_format import open_sink, read_footer
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.manifest import Part, RangeManifest, manifest_path, publish_manifest, read_manifest
from etl.sink.row_groups import RowGroupSink
from etl.source.chunk import RawChunk

Chunks = Callable[[], Iterable[RawChunk]]  # the range's chunks, read again by each pass


def run_event_range_task(task: RangeTask, lookups: Mapping[str, object] | None = None) -> RangeResult:
    """The event-time task: `task` carries the batch's Placement. `lookups`: dimension name ->
    Spark broadcast of the table's Arrow IPC bytes."""
    fs = filesystem_for(task.warehouse)
    manifest, published = event_range(fs, task, lambda: range_chunks(task), opened_tables(lookups))
    faults.checkpoint(f"renamed:{task.range.partition}")
    last = RecordFingerprint.from_json(manifest.last_record)  # the manifest keeps it: a replay has it too
    return RangeResult(task.range, published, manifest.rows, manifest.rejected, manifest.unmatched,
                       manifest.ignored_fields, last, manifest.parts, manifest.max_event_ms)


def event_range(fs: WarehouseFileSystem, task: RangeTask, chunks: Chunks,
                tables: Mapping[str, pa.Table]) -> tuple[RangeManifest, bool]:
    """The range's manifest, and whether this attempt published it."""
    r = task.range
    root = task.split.manifest_root if task.split else task.placing.table_root
    path = manifest_path(root, r.topic, r.partition, r.start, r.end, r.incarnation)
    found = read_manifest(fs, path)
    if found is not None:
        if task.split is None:  # routed tables post-date the padded names: a split range has no legacy part
            _move_legacy_parts(fs, task, found)
        return found, False
    manifest = _RangeSplit(fs, task, chunks, tables).run()
    return manifest, publish_manifest(fs, path, manifest)


def _move_legacy_parts(fs: WarehouseFileSystem, task: RangeTask, manifest: RangeManifest) -> None:
    """A range published by a release that named years 1-999 unpadded (dt=1-01-02), resumed: its
    manifest reads as the padded partitions, and the batch registers those, so its parts move
    there first (not yet registered: no query sees the move). etl.ops.legacy_names moves the
    parts of committed batches."""
    for part in manifest.parts:
        legacy = legacy_path(part.partition)
        if legacy == part.partition:
            continue
        name = manifest.file_range.name_as(task.writer.layout.file_format)
        source = posixpath.join(task.placing.table_root, legacy, name)
        if not fs.exists(source):
            continue
        folder = posixpath.join(task.placing.table_root, task.placing.relocated.get(part.partition, part.partition))
        fs.makedirs(folder)
        target = posixpath.join(folder, name)
        if fs.rename_no_replace(source, target):
            continue
        # Both there: a racing attempt moved it first, or a crash inside a link-then-unlink move.
        if fs.info(source).size != fs.info(target).size:
            raise StateConflict(f"{source} cannot move to {target}: a different file is there already. Check "
                                f"which one holds the range's rows, move the other out of the warehouse, then run "
                                f"again")
        fs.delete(source)


class _RangeSplit:
    def __init__(self, fs: WarehouseFileSystem, task: RangeTask, chunks: Chunks, tables: Mapping[str, pa.Table]):
        self.fs, self.task, self.chunks, self.tables = fs, task, chunks, tables
        self.range, self.spec, self.placement = task.range, task.writer, task.placing.placement
        self.parts: dict[tuple[str, int], Part] = {}  # (table, partition key) -> its published part
        self.rejected: RowGroupSink | None = None
        self.unmatched: dict = {}
        self.ignored_fields: dict = {}
        self.max_event_ms: int | None = None
        self.last: RawChunk | None = None

    def run(self) -> RangeManifest:
        first = True
        while True:
            deferred = self._pass(first)
            first = False
            if not deferred:
                break
        self._empty_files()
        return self._finish()

    def _pass(self, first: bool) -> bool:
        r = self.range
        shares = RangeShares(self.task, self.tables, self.placement)
        budget = OpenFiles(self.task.placing.max_open_files, self.spec.row_group_size)  # one for all the range's tables
        writers = {t.table: self._writer(t, shares.schema(t.table), budget) for t in shares.targets}
        if first:
            layout = self.spec.layout.without_columns()
            self.rejected = open_sink(self.fs, posixpath.join(self.task.rejected_dir,
                                                              temp_name(r.name_as(layout.file_format))),
                                      shares.rejected_schema, self.spec.row_group_size, layout)
        try:
            with ExitStack() as stack:  # an exception aborts every writer's files
                for writer in writers.values():
                    stack.enter_context(writer)
                for chunk in self.chunks():
                    shared, refused = shares.process(chunk)
                    for target, rows in shared:
                        writers[target.table].write(rows.kept, rows.placed)
                        if first:
                            self._first_pass_extras(rows)
                    if first:
                        self._first_pass_chunk(chunk, refused)
                    faults.checkpoint(f"writing:{r.partition}")
                written = [(table, part) for table, writer in writers.items() for part in writer.close()]
        except BaseException:
            self.rejected.abort()
            raise
        if first:
            self.unmatched, self.ignored_fields = shares.unmatched(), shares.ignored_fields()
        self._publish(written)
        return any(writer.deferred for writer in writers.values())

    def _writer(self, target: ShareTarget, schema: pa.Schema, budget: int | OpenFiles) -> PassWriter:
        done = frozenset(key for table, key in self.parts if table == target.table)
        name = self.range.name_as(target.writer.layout.file_format)
        return PassWriter(self.fs, target.table_root, name, self.placement.partitioner, schema,
                          target.writer.row_group_size, target.writer.layout, done, budget, target.relocated)

    def _first_pass_extras(self, rows) -> None:
        if rows.rejected is not None:  # a routed range's: their reasons name the route
            self.rejected.append(rows.rejected)
        highest = None if rows.placed is None else rows.placed.max_event_ms
        if highest is not None:
            self.max_event_ms = highest if self.max_event_ms is None else max(self.max_event_ms, highest)

    def _first_pass_chunk(self, chunk: RawChunk, refused: pa.Table | None) -> None:
        if refused is not None:  # records no table of a split takes
            self.rejected.append(refused)
        self.last = chunk

    def _publish(self, written: list[tuple[str, WrittenPart]]) -> None:
        for table, part in written:
            if not publish(self.fs, part.temp_path, part.final_path):
                self._check_same_rows(part)
            self.parts[(table, part.key)] = Part(part.partition, part.rows, part.late, table)
            faults.checkpoint(f"part:{self.range.partition}")

    def _check_same_rows(self, part: WrittenPart) -> None:
        found = read_footer(self.fs, part.final_path, self.spec.layout.file_format).rows
        if found != part.rows:
            raise StateConflict(f"{part.final_path} already exists with {found} rows, but this range places "
                                f"{part.rows} rows there: it is not this range's file (a recreated topic, a copied "
                                f"file?). Move it out of the warehouse after checking where it came from, then run "
                                f"again")

    def _empty_files(self) -> None:
        """An empty file in the planning-time partition for each table that got no kept row."""
        key = planned_key(self.placement)
        for target in share_targets(self.task):
            if any(table == target.table for table, _key in self.parts):
                continue
            writer = self._writer(target, arrow_schema(target.writer.schema), 1)
            with writer:
                writer.ensure(key)
                written = writer.close()
            self._publish([(target.table, part) for part in written])

    def _finish(self) -> RangeManifest:
        r, rejected = self.range, self.rejected
        count = rejected.rows_appended
        if count:
            rejected.close()
            publish(self.fs, rejected.path, posixpath.join(self.task.rejected_dir, r.name_as(REJECTED_FORMAT)))
        last = last_record(self.last)
        return RangeManifest(r.topic, r.partition, r.start, r.end, tuple(self.parts[k] for k in sorted(self.parts)),
                             rejected=count, rejected_partition=partition_path(self.placement.planned) if count else "",
                             unmatched=self.unmatched, ignored_fields=self.ignored_fields,
                             max_event_ms=self.max_event_ms,
                             last_record=None if last is None else last.to_json(), incarnation=r.incarnation)
