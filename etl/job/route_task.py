"""One Spark task for a range whose topic several routes share, split by one field
(etl.model.routes.TopicSplit): each record goes to the table of its field's value
(etl.rows.routing), each table's share through that route's own row pipeline into one file in
the table's folder of the batch's planning-time partition; the records no table takes, and
those a route's pipeline rejects (the reason naming the route), into one rejected file. Then the
range's manifest, in the job's rejected table's `_etl_ranges`, says the range is done.

Order of publishing: the rejected file, each table's file, the manifest last. A task that finds
the manifest writes nothing. Every table of the split gets its file, empty or not, so that each
table's folder covers the range like any range's file. A file a dead attempt already published
is kept after checking that it holds as many rows (the split is fixed by the plan's routes, so a
replay puts the same records in the same table); one with another count is not this range's,
and is refused.

Runs on an executor; the driver gives a range this task when its RangeTask carries a split
(etl.job.batch_tables).
"""
from __future__ import annotations

import posixpath
from typing import Iterable, Mapping

import pyarrow as pa

from etl import faults
from etl.config import HiveFormat
from etl.errors import StateConflict
from etl.job.range_task import RangeResult, RangeTask, last_record, opened_tables, range_chunks
from etl.job.summary import summed
from etl.model.identity import RecordFingerprint
from etl.model.batch import OffsetRange
from etl.model.naming import REJECTED_FORMAT, temp_name
from etl.rows.pipeline import RowPipeline
from etl.rows.routing import FieldRouter
from etl.sink.commit import publish
from etl.sink.file_format import open_sink, read_footer
from etl.sink.fs import WarehouseFileSystem, filesystem_for
from etl.sink.layout import FileLayout
from etl.sink.manifest import Part, RangeManifest, manifest_path, publish_manifest, read_manifest
from etl.source.chunk import RawChunk


def run_split_range_task(task: RangeTask, lookups: Mapping[str, object] | None = None) -> RangeResult:
    """The split task: `task.split` is set. `lookups`: dimension name -> Spark broadcast."""
    assert task.split is not None
    fs, r = filesystem_for(task.warehouse), task.range
    path = manifest_path(task.split.manifest_root, r.topic, r.partition, r.start, r.end, r.incarnation)
    manifest, published = read_manifest(fs, path), False
    if manifest is None:
        manifest = split_range(fs, task, range_chunks(task), opened_tables(lookups))
        published = publish_manifest(fs, path, manifest)
    faults.checkpoint(f"renamed:{r.partition}")
    return RangeResult(r, published, manifest.rows, manifest.rejected, manifest.unmatched, manifest.ignored_fields,
                       RecordFingerprint.from_json(manifest.last_record), manifest.parts)


def split_range(fs: WarehouseFileSystem, task: RangeTask, chunks: Iterable[RawChunk],
                lookups: Mapping[str, pa.Table]) -> RangeManifest:
    """Write and publish the range's files (not its manifest, which the caller publishes last)."""
    writer = _SplitWriter(fs, task, lookups)
    try:
        last = None
        for chunk in chunks:
            writer.write(chunk)
            last = chunk
            faults.checkpoint(f"writing:{task.range.partition}")
        writer.close()
    except BaseException:
        writer.abort()
        raise
    faults.checkpoint(f"closed:{task.range.partition}")
    return writer.publish(last)


class _SplitWriter:
    def __init__(self, fs: WarehouseFileSystem, task: RangeTask, lookups: Mapping[str, pa.Table]):
        assert task.split is not None
        self.fs, self.task, self.target, r = fs, task, task.split, task.range
        self.router = FieldRouter(self.target.split, self.target.probe)
        self.pipelines = {t.name: RowPipeline(t.writer.rows, r.topic, r.partition, lookups) for t in self.target.tables}
        self.sinks = {t.name: open_sink(fs, _temp_path(t.main_dir, r, t.writer.layout),
                                        self.pipelines[t.name].schema, t.writer.row_group_size, t.writer.layout)
                      for t in self.target.tables}
        first = self.target.tables[0]
        rejected_layout = first.writer.layout.without_columns()
        self.rejected = open_sink(fs, _temp_path(task.rejected_dir, r, rejected_layout),
                                  self.pipelines[first.name].rejected_schema, first.writer.row_group_size,
                                  rejected_layout)
        try:
            for sink in self.sinks.values():  # created up front: a bad path fails before Kafka is read
                sink.open()
        except BaseException:
            self.abort()  # the ones already created go
            raise

    def write(self, chunk: RawChunk) -> None:
        if not len(chunk):
            return
        routed = self.router.route(chunk.values)
        for table in self.target.tables:
            indices = routed.by_table.get(table.name)
            if indices is None:
                continue
            rows = self.pipelines[table.name].process(chunk.take(indices.to_pylist()))
            self.sinks[table.name].append(rows.kept)
            if rows.rejected is not None:  # their reasons name the route (its writer spec's)
                self.rejected.append(rows.rejected)
        if routed.rejected:
            self.rejected.append(self.pipelines[self.target.tables[0].name].rejected(chunk, routed.rejected))

    def close(self) -> None:
        for sink in self.sinks.values():
            sink.close()
        if self.rejected.rows_appended:
            self.rejected.close()

    def abort(self) -> None:
        for sink in (*self.sinks.values(), self.rejected):
            sink.abort()

    def publish(self, last: RawChunk | None) -> RangeManifest:
        r, target = self.task.range, self.target
        count = self.rejected.rows_appended
        if count:
            publish(self.fs, self.rejected.path, posixpath.join(self.task.rejected_dir, r.name_as(REJECTED_FORMAT)))
        parts = []
        for table in target.tables:
            sink = self.sinks[table.name]
            final = posixpath.join(table.main_dir, r.name_as(table.writer.layout.file_format))
            if not publish(self.fs, sink.path, final):
                _check_same_rows(self.fs, final, sink.rows_appended, table.writer.layout.file_format)
            parts.append(Part(target.partition, sink.rows_appended, 0, table.name))
        unmatched, ignored = summed(p.unmatched for p in self.pipelines.values()), \
            summed(p.ignored_fields for p in self.pipelines.values())
        fingerprint = last_record(last)
        return RangeManifest(r.topic, r.partition, r.start, r.end, tuple(parts), rejected=count,
                             rejected_partition=target.partition if count else "", unmatched=unmatched,
                             ignored_fields=ignored, last_record=None if fingerprint is None else fingerprint.to_json(),
                             incarnation=r.incarnation)


def _temp_path(folder: str, r: OffsetRange, layout: FileLayout) -> str:
    return posixpath.join(folder, temp_name(r.name_as(layout.file_format)))


def _check_same_rows(fs: WarehouseFileSystem, final: str, rows: int, file_format: HiveFormat) -> None:
    found = read_footer(fs, final, file_format).rows
    if found != rows:
        raise StateConflict(f"{final} already exists with {found} rows, but this range puts {rows} rows there: it is "
                            f"not this range's file (a recreated topic, a copied file?). Move it out of the warehouse "
                            f"after checking where it came from, then run again")
