"""One Parquet file in the warehouse, written under the name the caller chose.

Rows are buffered and written in row groups by etl.sink.row_groups. The codec, each column's
encoding, the timestamps' physical type (INT96 unless the table serves only current readers),
bloom filters and the rows' order in a row group are the table's FileLayout (etl.sink.layout),
fixed when the first row group is written.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.row_groups import RowGroupSink


class ParquetSink(RowGroupSink):
    """One Parquet file, written in row groups of exactly row_group_size rows but the last."""

    def __init__(self, fs: WarehouseFileSystem, path: str, schema: pa.Schema, row_group_size: int,
                 layout: FileLayout):
        # For current readers, timestamps are marked UTC (etl.sink.layout).
        super().__init__(fs, path, layout.file_schema(schema), row_group_size, layout)
        self._writer: pq.ParquetWriter | None = None

    def _writer_for(self, first: pa.Table) -> pq.ParquetWriter:
        """The file's writer, started with its first row group, whose values the layout's
        per-column choices look at."""
        self.open()
        if self._writer is None:
            options = self.layout.writer_options(self.schema, first)
            self._writer = pq.ParquetWriter(self._file, self.schema, **options)
        return self._writer

    def _write_row_group(self, table: pa.Table) -> None:
        self._writer_for(table).write_table(table, row_group_size=self.row_group_size)

    def _finish(self) -> None:
        writer = self._writer_for(self.schema.empty_table())  # an empty file: its writer starts here
        if self.metadata:
            writer.add_key_value_metadata(self.metadata)
        writer.close()

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
