"""One ORC file in the warehouse, written under the name the caller chose: ParquetSink's
counterpart for a table stored as ORC (etl.sink.file_format chooses between them).

Rows are buffered by etl.sink.row_groups and handed to pyarrow's ORC writer in slices of
row_group_size rows; the writer cuts its stripes by size (64 MiB). Timestamps are written
naive, as their UTC wall-clock time: pyarrow writes a zone-aware timestamp as ORC's
TIMESTAMP_INSTANT, which Hive 2.3's ORC reader (ORC 1.3) cannot read, while a naive one is ORC's
TIMESTAMP, which every Hive reads. Years 1 and 9999 are written as they are; pyarrow reads back
only 1677-09-22 .. 2262-04-11 of them (it reads ORC timestamps as nanoseconds).

pyarrow's ORC writer has no user metadata; the footer metadata the job records (as it does in
a Parquet footer) is added to the file's tail as it is written (etl.sink.orc_tail).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.orc as orc

from etl.config.model import Compression
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.orc_tail import HeldTail
from etl.sink.row_groups import RowGroupSink

# pyarrow's ORC codec names for the table's [job] compression.
ORC_CODECS = {Compression.SNAPPY: "snappy", Compression.ZSTD: "zstd", Compression.GZIP: "zlib",
              Compression.NONE: "uncompressed"}


class OrcSink(RowGroupSink):
    """One ORC file, handed its rows in slices of row_group_size rows but the last."""

    def __init__(self, fs: WarehouseFileSystem, path: str, schema: pa.Schema, row_group_size: int,
                 layout: FileLayout):
        super().__init__(fs, path, naive_timestamps(schema), row_group_size, layout)
        self._writer: orc.ORCWriter | None = None
        self._tail: HeldTail | None = None

    def _writer_now(self) -> orc.ORCWriter:
        self.open()
        if self._writer is None:
            assert self._file is not None
            self._tail = HeldTail(self._file)
            self._writer = orc.ORCWriter(self._tail, compression=ORC_CODECS[self.layout.compression],
                                         bloom_filter_columns=list(self.layout.bloom_filter_columns) or None)
        return self._writer

    def _write_row_group(self, table: pa.Table) -> None:
        self._writer_now().write(table)

    def _finish(self) -> None:
        writer = self._writer_now()
        if self.row_groups == 0:  # an empty file still has the table's columns
            writer.write(self.schema.empty_table())
        assert self._tail is not None
        self._tail.hold()  # the writer writes its last stripe and the file's tail as it closes
        writer.close()
        self._tail.release(self.metadata)

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()


def naive_timestamps(schema: pa.Schema) -> pa.Schema:
    """The schema with each timestamp's zone dropped: its values stay the UTC instants they are,
    read as the wall-clock time in UTC."""
    return pa.schema([field.with_type(pa.timestamp(field.type.unit)) if pa.types.is_timestamp(field.type)
                      else field for field in schema], metadata=schema.metadata)
