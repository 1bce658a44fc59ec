"""One Parquet file in the warehouse, written under the name the caller chose.

Rows are written in row groups of exactly row_group_size rows as soon as enough are
buffered, so memory stays bounded by one row group plus what was appended last, however
many rows the file holds. The codec, each column's encoding, the timestamps' physical type
(INT96 unless the table serves only current readers), bloom filters and the rows' order in a
row group are the table's FileLayout (etl.sink.layout), fixed when the first row group is
written. Publishing the file is the commit protocol's job (etl.sink.commit), not this module's.
"""
from __future__ import annotations

import io
import logging
import os
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from etl.errors import WarehouseError
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout

log = logging.getLogger(__name__)


class ParquetSink:
    """One Parquet file, written in row groups of exactly row_group_size rows but the last."""

    def __init__(self, fs: WarehouseFileSystem, path: str, schema: pa.Schema, row_group_size: int,
                 layout: FileLayout):
        self.fs = fs
        self.path = path
        self.schema = layout.file_schema(schema)
        self.row_group_size = row_group_size
        self.layout = layout
        self.rows_appended = 0
        self.row_groups = 0
        self.metadata: dict[bytes, bytes] = {}  # footer key-value metadata, written at close
        self._buffer: list[pa.Table] = []
        self._buffered_rows = 0
        self._file: BinaryIO | None = None
        self._writer: pq.ParquetWriter | None = None

    def open(self) -> None:
        """Create the file (a bad path fails before any data is read). Its Parquet writer starts
        with the first row group, whose values the layout's per-column choices look at."""
        if self._file is None:
            self._file = self.fs.open_write(self.path)

    def _writer_for(self, first: pa.Table) -> pq.ParquetWriter:
        self.open()
        if self._writer is None:
            options = self.layout.writer_options(self.schema, first)
            self._writer = pq.ParquetWriter(self._file, self.schema, **options)
        return self._writer

    def append(self, table: pa.Table) -> None:
        self._buffer.append(table)
        self._buffered_rows += table.num_rows
        self.rows_appended += table.num_rows
        if self._buffered_rows >= self.row_group_size:
            self._write_full_row_groups()

    @property
    def buffered_rows(self) -> int:
        return self._buffered_rows

    def flush(self) -> None:
        """Write what is buffered as a row group now, smaller than row_group_size: how a writer
        that keeps many files open bounds the memory of all of them together."""
        if self._buffered_rows:
            self._write_row_group(pa.concat_tables(self._buffer))
            self._buffer, self._buffered_rows = [], 0

    def close(self) -> int:
        """Flush the remaining rows, finish the file durably, and return its size."""
        self.flush()
        writer = self._writer_for(self.schema.empty_table())  # an empty file: its writer starts here
        if self.metadata:
            writer.add_key_value_metadata(self.metadata)
        writer.close()
        _close_durably(self._file)
        info = self.fs.info(self.path)
        if info is None:
            raise WarehouseError(f"{self.path} vanished right after it was written; check what else writes there")
        return info.size

    def abort(self) -> None:
        if self._file is None:
            return
        # A remote upload that can abort (WebHDFS) must not be finished by close() just to be deleted.
        steps = [getattr(self._file, "abort", self._file.close), lambda: self.fs.delete(self.path)]
        if self._writer is not None:
            steps.insert(0, self._writer.close)
        for step in steps:
            try:
                step()
            except Exception as exc:  # the error that caused the abort matters more
                log.warning("while aborting %s: %s", self.path, exc)
        self._buffer, self._buffered_rows = [], 0

    def _write_full_row_groups(self) -> None:
        # concat_tables copies nothing; the remainder stays a slice of the last chunk(s).
        buffered = pa.concat_tables(self._buffer)
        full = buffered.num_rows - buffered.num_rows % self.row_group_size
        for start in range(0, full, self.row_group_size):
            self._write_row_group(buffered.slice(start, self.row_group_size))
        rest = buffered.slice(full)
        self._buffer, self._buffered_rows = ([rest] if rest.num_rows else []), rest.num_rows

    def _write_row_group(self, table: pa.Table) -> None:
        if not table.schema.equals(self.schema):  # timestamps marked UTC for current readers
            table = table.cast(self.schema)
        table = self.layout.arrange(table)
        self._writer_for(table).write_table(table, row_group_size=self.row_group_size)
        self.row_groups += 1


def _close_durably(file: BinaryIO) -> None:
    """Close so that the bytes survive a crash: the offsets committed after this rely on them."""
    file.flush()
    try:
        os.fsync(file.fileno())
    except (AttributeError, io.UnsupportedOperation):
        pass  # not a local file: its own close() is the durability point
    file.close()
