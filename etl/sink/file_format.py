"""A table's file format, in one place: which writer makes its files, and what a file's footer
says (its rows, and the key-value metadata the job records there).

Everything that writes a committed file opens it here (`open_sink`), and everything that only
needs a file's row count or footer metadata reads it here (`read_footer`, `footer_rows`): a
replayed batch's file, a file already in place under a range's name, a merged file's ranges.
What reads a file's values (compaction's merge and its checksums, `verify --deep`) reads them
here too (`open_data`), a row group (Parquet) or a stripe (ORC) at a time, every timestamp as it
was written: Parquet's INT96 as microseconds (nanoseconds, pyarrow's default, end in 2262 and
wrapped later years), ORC's as nanoseconds, the only unit pyarrow reads ORC in. An ORC table
keeps no value outside that unit's range (etl.rows.hive_values.ORC_FILES), so none is lost.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

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


# Parquet's INT96 timestamps are read in this unit: it holds every year 0001..9999 Hive accepts.
INT96_UNIT = "us"


@dataclass(frozen=True)
class OpenData:
    """A file opened for its values: its footer, its columns, and its rows a part at a time."""

    footer: Footer
    schema: pa.Schema
    parts: int  # row groups, or stripes
    read_part: Callable[[int], pa.Table]

    def tables(self) -> Iterator[pa.Table]:
        return (self.read_part(index) for index in range(self.parts))


@contextmanager
def open_data(fs: WarehouseFileSystem, path: str, file_format: HiveFormat,
              int96_unit: str = INT96_UNIT) -> Iterator[OpenData]:
    """`int96_unit`: the unit Parquet's INT96 timestamps are read in. Who proves what another read
    wrote (etl.sink.checksums) names its own, so that one wrong unit cannot hide itself."""
    with fs.open_read(path) as handle:
        if file_format is HiveFormat.ORC:
            found = orc.ORCFile(handle)
            yield OpenData(Footer(found.nrows, found.metadata or {}), found.schema, found.nstripes,
                           lambda index: pa.Table.from_batches([found.read_stripe(index)]))
            return
        parquet = pq.ParquetFile(handle, coerce_int96_timestamp_unit=int96_unit)
        metadata = parquet.metadata
        yield OpenData(Footer(metadata.num_rows, metadata.metadata or {}), parquet.schema_arrow,
                       parquet.num_row_groups, parquet.read_row_group)


def read_columns(fs: WarehouseFileSystem, path: str, file_format: HiveFormat, columns: list[str]) -> pa.Table:
    """Some of a file's columns, whole, every timestamp as it was written (`open_data`)."""
    with fs.open_read(path) as handle:
        if file_format is HiveFormat.ORC:
            return orc.ORCFile(handle).read(columns=columns)
        return pq.read_table(handle, columns=columns, coerce_int96_timestamp_unit=INT96_UNIT)


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
