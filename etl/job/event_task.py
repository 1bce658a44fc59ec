"""One Spark task under event-time partitioning: one Kafka partition-batch into a Parquet file per
Hive partition its rows fall in, then the range's manifest (etl.sink.manifest).

Order of publishing: the parts, each by a no-replace rename; the rejected file; the manifest
last. The manifest is what says the range is done: a task that finds it writes nothing. A task
that does not find it reads the range again and places its rows the same way (the plan fixes
the Placement), so a part a dead attempt already published is found in place under its name:
the new copy is dropped, after checking it holds as many rows (a part with another count is
not this range's, and is refused). A range with no kept row still gets one empty file, in the
batch's planning-time partition, so that its offsets are covered by a file name like any other.

Runs on an executor; etl.job.write_mode gives it the ranges of a batch planned by event time.
"""
from __future__ import annotations

import posixpath
from typing import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from etl import faults
from etl.errors import StateConflict
from etl.job.range_task import RangeResult, RangeTask, last_record, opened_tables, range_chunks
from etl.job.split_writer import PassWriter, WrittenPart
from etl.model.identity import RecordFingerprint
from etl.model.naming import partition_path, temp_name
from etl.model.partitioning import legacy_path
from etl.model.schema import arrow_schema
from etl.rows.pipeline import RowPipeline
from etl.rows.placement import planned_key
from etl.sink.commit import publish
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.manifest import Part, RangeManifest, manifest_path, publish_manifest, read_manifest
from etl.sink.parquet import ParquetSink


def run_event_range_task(task: RangeTask, lookups: Mapping[str, object] | None = None) -> RangeResult:
    """The event-time task: `task` carries the batch's Placement. `lookups`: dimension name ->
    Spark broadcast of the table's Arrow IPC bytes."""
    fs = filesystem_for(task.warehouse)
    tables = opened_tables(lookups)
    manifest, published = _manifest_of(fs, task, tables)
    faults.checkpoint(f"renamed:{task.range.partition}")
    last = RecordFingerprint.from_json(manifest.last_record)  # the manifest keeps it: a replay has it too
    return RangeResult(task.range, published, manifest.rows, manifest.rejected, manifest.unmatched,
                       manifest.ignored_fields, last, manifest.parts, manifest.max_event_ms)


def _manifest_of(fs: WarehouseFileSystem, task: RangeTask,
                 tables: Mapping[str, pa.Table]) -> tuple[RangeManifest, bool]:
    """The range's manifest, and whether this attempt published it."""
    r = task.range
    path = manifest_path(task.table_root, r.topic, r.partition, r.start, r.end)
    found = read_manifest(fs, path)
    if found is not None:
        _move_legacy_parts(fs, task, found)
        return found, False
    manifest = _RangeSplit(fs, task, tables).run()
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
        source = posixpath.join(task.table_root, legacy, manifest.file_name)
        if not fs.exists(source):
            continue
        folder = posixpath.join(task.table_root, task.relocated.get(part.partition, part.partition))
        fs.makedirs(folder)
        target = posixpath.join(folder, manifest.file_name)
        if fs.rename_no_replace(source, target):
            continue
        # Both there: a racing attempt moved it first, or a crash inside a link-then-unlink move.
        if fs.info(source).size != fs.info(target).size:
            raise StateConflict(f"{source} cannot move to {target}: a different file is there already. Check "
                                f"which one holds the range's rows, move the other out of the warehouse, then run "
                                f"again")
        fs.delete(source)


class _RangeSplit:
    def __init__(self, fs: WarehouseFileSystem, task: RangeTask, tables: Mapping[str, pa.Table]):
        self.fs, self.task, self.tables = fs, task, tables
        assert task.placement is not None, "the event-time task is given the batch's Placement"
        self.range, self.spec, self.placement = task.range, task.writer, task.placement
        self.parts: dict[int, Part] = {}
        self.rejected: ParquetSink | None = None
        self.unmatched: dict = {}
        self.ignored_fields: dict = {}
        self.max_event_ms: int | None = None
        self.last = None

    def run(self) -> RangeManifest:
        first = True
        while True:
            deferred = self._pass(first)
            first = False
            if not deferred:
                break
        if not self.parts:
            self._empty_file()
        return self._finish()

    def _pass(self, first: bool) -> bool:
        r = self.range
        pipeline = RowPipeline(self.spec.rows, r.topic, r.partition, self.tables, self.placement)
        writer = PassWriter(self.fs, self.task.table_root, r.file_name, self.placement.partitioner,
                            pipeline.schema, self.spec.row_group_size, self.spec.compression,
                            frozenset(self.parts), self.task.max_open_files, self.task.relocated)
        if first:
            self.rejected = ParquetSink(self.fs, posixpath.join(self.task.rejected_dir, temp_name(r.file_name)),
                                        pipeline.rejected_schema, self.spec.row_group_size, self.spec.compression)
        try:
            with writer:
                for chunk in range_chunks(self.task):
                    rows = pipeline.process(chunk)
                    writer.write(rows.kept, rows.placed)
                    if first:
                        self._first_pass_extras(chunk, rows)
                    faults.checkpoint(f"writing:{r.partition}")
                written = writer.close()
        except BaseException:
            self.rejected.abort()
            raise
        if first:
            self.unmatched = dict(pipeline.unmatched)
            self.ignored_fields = dict(pipeline.ignored_fields)
        self._publish(written)
        return writer.deferred

    def _first_pass_extras(self, chunk, rows) -> None:
        if rows.rejected is not None:
            self.rejected.append(rows.rejected)
        highest = None if rows.placed is None else rows.placed.max_event_ms
        if highest is not None:
            self.max_event_ms = highest if self.max_event_ms is None else max(self.max_event_ms, highest)
        self.last = chunk

    def _publish(self, written: list[WrittenPart]) -> None:
        for part in written:
            if not publish(self.fs, part.temp_path, part.final_path):
                self._check_same_rows(part)
            self.parts[part.key] = Part(part.partition, part.rows, part.late)
            faults.checkpoint(f"part:{self.range.partition}")

    def _check_same_rows(self, part: WrittenPart) -> None:
        with self.fs.open_read(part.final_path) as handle:
            found = pq.ParquetFile(handle).metadata.num_rows
        if found != part.rows:
            raise StateConflict(f"{part.final_path} already exists with {found} rows, but this range places "
                                f"{part.rows} rows there: it is not this range's file (a recreated topic, a copied "
                                f"file?). Move it out of the warehouse after checking where it came from, then run "
                                f"again")

    def _empty_file(self) -> None:
        key = planned_key(self.placement)
        writer = PassWriter(self.fs, self.task.table_root, self.range.file_name, self.placement.partitioner,
                            arrow_schema(self.spec.schema),
                            self.spec.row_group_size, self.spec.compression, frozenset(), 1, self.task.relocated)
        with writer:
            writer.ensure(key)
            written = writer.close()
        self._publish(written)

    def _finish(self) -> RangeManifest:
        r, rejected = self.range, self.rejected
        count = rejected.rows_appended
        if count:
            rejected.close()
            publish(self.fs, rejected.path, posixpath.join(self.task.rejected_dir, r.file_name))
        last = last_record(self.last)
        return RangeManifest(r.topic, r.partition, r.start, r.end, tuple(self.parts[k] for k in sorted(self.parts)),
                             rejected=count, rejected_partition=partition_path(self.placement.planned) if count else "",
                             unmatched=self.unmatched, ignored_fields=self.ignored_fields,
                             max_event_ms=self.max_event_ms,
                             last_record=None if last is None else last.to_json())
