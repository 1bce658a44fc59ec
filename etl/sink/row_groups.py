"""What every file writer of the warehouse shares: rows buffered and written in row groups of
exactly row_group_size rows (Parquet's row groups, the slices ORC's writer is handed), the file
created up front, finished durably, or aborted and deleted.

Memory stays bounded by one row group plus what was appended last, however many rows the file
holds. A format's writer (etl.sink.parquet, etl.sink.orc) says how one row group is written and
how the file is finished. Publishing the file is the commit protocol's job (etl.sink.commit).
"""
from __future__ import annotations

import logging
from typing import BinaryIO

import pyarrow as pa

from etl.errors import WarehouseError
from etl.sink.fs import WarehouseFileSystem
from etl.sink.fs.base import close_durably
from etl.sink.layout import FileLayout

log = logging.getLogger(__name__)


class RowGroupSink:
    """One file, written in row groups of exactly row_group_size rows but the last."""

    def __init__(self, fs: WarehouseFileSystem, path: str, schema: pa.Schema, row_group_size: int,
                 layout: FileLayout):
        self.fs = fs
        self.path = path
        self.schema = schema  # the file's columns, which a format may refine
        self.row_group_size = row_group_size
        self.layout = layout
        self.rows_appended = 0
        self.row_groups = 0
        self.metadata: dict[bytes, bytes] = {}  # footer key-value metadata, written at close
        self._buffer: list[pa.Table] = []
        self._buffered_rows = 0
        self._file: BinaryIO | None = None

    def open(self) -> None:
        """Create the file: a bad path fails before any data is read."""
        if self._file is None:
            self._file = self.fs.open_write(self.path)

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
            self._write(pa.concat_tables(self._buffer))
            self._buffer, self._buffered_rows = [], 0

    def close(self) -> int:
        """Flush the remaining rows, finish the file durably, and return its size."""
        self.flush()
        self.open()
        self._finish()
        assert self._file is not None
        close_durably(self._file)
        info = self.fs.info(self.path)
        if info is None:
            raise WarehouseError(f"{self.path} vanished right after it was written; check what else writes there")
        return info.size

    def abort(self) -> None:
        if self._file is None:
            return
        # A remote upload that can abort (WebHDFS) must not be finished by close() just to be deleted.
        steps = [self._close_writer, getattr(self._file, "abort", self._file.close), lambda: self.fs.delete(self.path)]
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
            self._write(buffered.slice(start, self.row_group_size))
        rest = buffered.slice(full)
        self._buffer, self._buffered_rows = ([rest] if rest.num_rows else []), rest.num_rows

    def _write(self, table: pa.Table) -> None:
        if not table.schema.equals(self.schema):
            table = table.cast(self.schema)
        self._write_row_group(self.layout.arrange(table))
        self.row_groups += 1

    def _write_row_group(self, table: pa.Table) -> None:
        """Write one row group, in the file's columns and the layout's order."""
        raise NotImplementedError

    def _finish(self) -> None:
        """Write what ends the file (its footer) to the open file; the file is closed after."""
        raise NotImplementedError

    def _close_writer(self) -> None:
        """Close the format's writer, if it started, when the file is aborted."""
        raise NotImplementedError
