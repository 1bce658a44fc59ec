"""Streams one Kafka partition's share of a batch into one file, plus one file of
rejected records when some could not be decoded: the row pipeline (etl.rows.pipeline) feeding
two files of the table's format (etl.sink.file_format). This is where rows and sink meet.

The main file is always created, even with no rows, because its existence is what marks
the offset range as done. How many rows found no match in each dimension is stored in the
main file's footer (key etl.unmatched), so that a replay can count them again; so are the
writer-schema fields the table lacks (etl.ignored_fields), counted into the batch summary.

Both files are written under the temp names the caller chose; publishing them is the
commit protocol's job, not this module's.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa

from etl.config import DimensionConfig, HeaderColumn
from etl.errors import ConfigError, EtlError
from etl.model.rollup_table import RollupSpec
from etl.model.schema import TableSchema
from etl.model.table_ddl import TableDdl
from etl.rows.decoders import Decoder
from etl.rows.hive_values import readable_in
from etl.rows.pipeline import RowPipeline, RowSpec
from etl.sink.file_format import open_sink
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.source.chunk import RawChunk

UNMATCHED_METADATA_KEY = b"etl.unmatched"
IGNORED_FIELDS_METADATA_KEY = b"etl.ignored_fields"


@dataclass(frozen=True)
class WriterSpec:
    """Everything a task needs to write files; built once by the driver and pickled to tasks.
    The settings themselves were checked when the config was parsed (etl.config)."""

    schema: TableSchema
    decoder: Decoder
    key_column: str | None
    row_group_size: int
    layout: FileLayout
    dimensions: tuple[DimensionConfig, ...] = ()  # the joined ones enrich each chunk
    transform: str | None = None  # module:function, see etl.rows.transform
    header_columns: tuple[HeaderColumn, ...] = ()  # the tasks read headers only when some are configured
    route: str = ""  # a routed job's route: its rejected records' reasons name it
    ddl: TableDdl | None = None  # what the registrar creates and evolves the table from (None: [hive] schema's)
    rollups: tuple[RollupSpec, ...] = ()  # the rollups of this table's rows: a partials file per range each

    def __post_init__(self):
        if self.key_column != self.schema.key_column:
            raise ConfigError(
                f"key_column {self.key_column!r} differs from the schema's {self.schema.key_column!r}; "
                "load the schema with load_table_schema(path, key_column) using the same key column"
            )

    @property
    def rows(self) -> RowSpec:
        return RowSpec(self.schema, self.decoder, self.key_column, self.dimensions, self.transform,
                       self.header_columns, self.route, readable_in(self.layout.file_format))


@dataclass(frozen=True)
class WriteCounts:
    records: int  # records read: rows + rejected
    rows: int
    rejected: int
    bytes_written: int  # size of the main file
    rejected_bytes_written: int  # size of the rejected file; 0 when none was created
    row_groups: int  # in the main file
    first_offset: int | None  # None when no records were written
    last_offset: int | None
    unmatched: Mapping[str, int] = field(default_factory=dict)  # per joined dimension: rows with no match
    ignored_fields: Mapping[str, int] = field(default_factory=dict)  # writer-schema field the table lacks


class PartitionWriter:
    """Writes the chunks of one partition's offset range to main_path (and rejected_path).

    Use as a context manager: an exception inside the block aborts, which deletes both
    files; leaving the block normally closes.
    """

    def __init__(self, fs: WarehouseFileSystem, spec: WriterSpec, topic: str, partition: int, main_path: str,
                 rejected_path: str, lookups: Mapping[str, pa.Table] | None = None):
        self._topic, self._partition = topic, partition
        self._rows = RowPipeline(spec.rows, topic, partition, lookups)
        self._main = open_sink(fs, main_path, self._rows.schema, spec.row_group_size, spec.layout)
        self._rejected = open_sink(fs, rejected_path, self._rows.rejected_schema, spec.row_group_size,
                                   spec.layout.without_columns())
        self._records = 0
        self._first_offset: int | None = None
        self._counts: WriteCounts | None = None
        self._aborted = False
        # Created up front: a bad path should fail before any Kafka data is read.
        try:
            self._main.open()
        except BaseException:
            self._main.abort()
            raise

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._aborted:
            self.close()

    def write(self, chunk: RawChunk) -> None:
        self._check_writable()
        if not len(chunk):
            return
        rows = self._rows.process(chunk)
        self._main.append(rows.kept)
        if rows.rejected is not None:
            self._rejected.append(rows.rejected)
        self._records += len(chunk)
        self._first_offset = chunk.offsets[0] if self._first_offset is None else self._first_offset

    def close(self) -> WriteCounts:
        """Finish both files and say what was written. Calling it again returns the same counts."""
        if self._counts is None:
            self._check_writable()
            try:
                self._counts = self._finish()
            except BaseException:
                self.abort()
                raise
        return self._counts

    def abort(self) -> None:
        """Close and delete whatever files this writer created. Never raises."""
        self._aborted = True
        self._main.abort()
        self._rejected.abort()

    def _finish(self) -> WriteCounts:
        unmatched = self._rows.unmatched
        if unmatched:
            self._main.metadata[UNMATCHED_METADATA_KEY] = json.dumps(unmatched, sort_keys=True).encode()
        ignored = self._rows.ignored_fields
        if ignored:
            self._main.metadata[IGNORED_FIELDS_METADATA_KEY] = json.dumps(ignored, sort_keys=True).encode()
        main_bytes = self._main.close()
        rejected_bytes = self._rejected.close() if self._rejected.rows_appended else 0
        return WriteCounts(
            records=self._records,
            rows=self._main.rows_appended,
            rejected=self._rejected.rows_appended,
            bytes_written=main_bytes,
            rejected_bytes_written=rejected_bytes,
            row_groups=self._main.row_groups,
            first_offset=self._first_offset,
            last_offset=self._rows.last_offset,
            unmatched=dict(unmatched),
            ignored_fields=dict(ignored),
        )

    def _check_writable(self) -> None:
        if self._aborted:
            raise EtlError(f"the writer of {self._topic}[{self._partition}] was aborted; start a new one")
        if self._counts is not None:
            raise EtlError(f"the writer of {self._topic}[{self._partition}] is closed; start a new one")
