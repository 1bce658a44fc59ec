"""A table's file format, in one place: which writer makes its files, and what a file's footer
says (its rows, and the key-value metadata the job records there).

Everything that writes a committed file opens it here (`open_sink`), and everything that only
needs a file's row count or footer metadata reads it here (`read_footer`, `footer_rows`): a
replayed batch's file, a file already in place under a range's name, a merged file's ranges.
What reads a file's values (compaction's merge and its checksums, `verify --deep`) is Parquet's
alone for now: ORC files are written (etl.sink.orc), but no table chooses them yet ([hive]
format = orc is refused by the config).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

from etl.config.model import HiveFormat
from etl.sink.fs import WarehouseFileSystem
from etl.sink.layout import FileLayout
from etl.sink.orc import OrcSink
from etl.sink.parquet import ParquetSink
from etl.sink.row_groups import RowGroupSink


@dataclass(frozen=True)
class Footer:
    """What a file's footer says without reading its values."""

    rows: int
    metadata: Mapping[bytes, bytes] = field(default_factory=dict)


def open_sink(fs: WarehouseFileSystem, path: str, schema: pa.Schema, row_group_size: int,
              layout: FileLayout) -> RowGroupSink:
    """The writer of one file of the table whose layout (and format) is `layout`."""
    if layout.file_format is HiveFormat.ORC:
        return OrcSink(fs, path, schema, row_group_size, layout)
    return ParquetSink(fs, path, schema, row_group_size, layout)


def read_footer(fs: WarehouseFileSystem, path: str, file_format: HiveFormat = HiveFormat.PARQUET) -> Footer:
    with fs.open_read(path) as handle:
        if file_format is HiveFormat.ORC:
            found = orc.ORCFile(handle)
            return Footer(found.nrows, found.metadata or {})
        metadata = pq.ParquetFile(handle).metadata
        return Footer(metadata.num_rows, metadata.metadata or {})


def footer_rows(fs: WarehouseFileSystem, path: str, file_format: HiveFormat = HiveFormat.PARQUET) -> int:
    """Row count from the footer alone; 0 when the file does not exist."""
    if not fs.exists(path):
        return 0
    return read_footer(fs, path, file_format).rows
