"""How a table's Parquet files are laid out: codec, each column's encoding, the timestamps'
physical type, bloom filters, the page index, and the order of the rows in each row group.

Encodings are chosen per column from what the column holds, once per file, from its first row
group (the writer fixes them when it opens):
- a dictionary where values repeat (at most one distinct value in two rows): RLE-packed indexes
  into a small page beat the values themselves, and an engine can skip on the dictionary;
- otherwise, for readers that have them (`ParquetReaders.CURRENT`), DELTA_BINARY_PACKED for
  integers and timestamps (offsets and event ids grow steadily, so their deltas pack in a few
  bits) and DELTA_BYTE_ARRAY for strings (shared prefixes are stored once);
- PLAIN for the rest, and for every column a Hive 2.3 reader must read (parquet-mr 1.8 reads
  PLAIN and dictionary pages; INT64 delta came in 1.9).
Floats stay PLAIN for every reader: BYTE_STREAM_SPLIT would shrink them, but Spark's vectorized
reader (4.2 as 3.5) refuses it ("Unsupported encoding: BYTE_STREAM_SPLIT"), and Spark is what
the analysts query through.
pyarrow's default, a dictionary on every column, builds one for unique columns too, fills its
1 MiB page and falls back to PLAIN only after that: bytes and time spent for nothing.

The page index (each page's min, max and NULL count, read by Spark, Trino and DuckDB to skip
pages) is always written: readers that do not know it never read it. So are bloom filters, for
the columns the table names, and the row groups' sort order, when the table names one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.config.model import Compression, HiveFormat, ParquetReaders
from etl.config.whole import Config
from etl.model.naming import REJECTED_FORMAT

# A bloom filter's false-positive rate: parquet-mr's and Spark's default (parquet.bloom.filter.fpp).
BLOOM_FPP = 0.01


@dataclass(frozen=True)
class FileLayout:
    """A table's file layout, built once from the config ([job] compression, [hive]
    parquet_readers, bloom_filter_columns, sort_by) and handed to every writer."""

    compression: Compression = Compression.SNAPPY
    readers: ParquetReaders = ParquetReaders.HIVE_2_3
    bloom_filter_columns: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    file_format: HiveFormat = HiveFormat.PARQUET

    @classmethod
    def of(cls, config: Config) -> FileLayout:
        return cls(config.job.compression, config.hive.parquet_readers, config.hive.bloom_filter_columns,
                   config.hive.sort_by, config.hive.format)

    def unsorted(self) -> FileLayout:
        """The layout of a file whose rows keep the order they come in: a merge's output, whose
        value checksums are taken in the order of its inputs (etl.compaction.merge)."""
        return replace(self, sort_by=())

    def without_columns(self) -> FileLayout:
        """The layout of a rejected-records file: the table's codec and readers, none of its
        columns, and Parquet whatever the table's format (etl/hive/rejected.sql is one table
        definition for every job)."""
        return replace(self, bloom_filter_columns=(), sort_by=(), file_format=REJECTED_FORMAT)

    @property
    def int96_timestamps(self) -> bool:
        return self.readers is ParquetReaders.HIVE_2_3

    def file_schema(self, schema: pa.Schema) -> pa.Schema:
        """The files' columns: for current readers, a timestamp is marked UTC (Parquet's
        isAdjustedToUTC), which Spark and Hive read as TIMESTAMP; unmarked, Spark reads it as
        TIMESTAMP_NTZ, which the table's `timestamp` columns are not. INT96 carries no mark."""
        if self.int96_timestamps:
            return schema
        return pa.schema([_in_utc(field) for field in schema], metadata=schema.metadata)

    def arrange(self, rows: pa.Table) -> pa.Table:
        """The rows of one row group, in the order the layout declares."""
        if not self.sort_by or rows.num_rows < 2:
            return rows
        return rows.sort_by([(column, "ascending") for column in self.sort_by])

    def writer_options(self, schema: pa.Schema, first: pa.Table) -> dict[str, Any]:
        """pyarrow.parquet.ParquetWriter's options for a file whose first row group is `first`."""
        dictionary, encodings = column_encodings(schema, first, self.readers)
        options: dict[str, Any] = {
            "compression": self.compression.value, "use_dictionary": dictionary, "column_encoding": encodings,
            "write_page_index": True, "write_statistics": True,
        }
        if self.int96_timestamps:
            options["use_deprecated_int96_timestamps"] = True
        else:
            options["coerce_timestamps"] = "us"  # Spark's and Hive 4's TIMESTAMP_MICROS; years 1..9999 fit
        if self.bloom_filter_columns:
            options["bloom_filter_options"] = {column: {"ndv": _distinct_hint(first, column), "fpp": BLOOM_FPP}
                                               for column in self.bloom_filter_columns}
        if self.sort_by:
            options["sorting_columns"] = pq.SortingColumn.from_ordering(
                schema, [(column, "ascending") for column in self.sort_by], null_placement="at_end")
        return options


def column_encodings(schema: pa.Schema, first: pa.Table, readers: ParquetReaders) -> tuple[list[str], dict[str, str]]:
    """(the columns given a dictionary, each other flat column's encoding), from what `first` holds."""
    dictionary: list[str] = []
    encodings: dict[str, str] = {}
    for field in schema:
        kind = field.type
        if pa.types.is_nested(kind) or pa.types.is_boolean(kind):
            continue  # booleans: PLAIN is one bit a value; nested: pyarrow's own choice without a dictionary
        if _values_repeat(first.column(field.name)):
            dictionary.append(field.name)
        else:
            encodings[field.name] = _plain_or_better(kind, readers)
    return dictionary, encodings


def _values_repeat(column: pa.ChunkedArray) -> bool:
    return 2 * pc.count_distinct(column, mode="all").as_py() <= max(len(column), 1)


def _plain_or_better(kind: pa.DataType, readers: ParquetReaders) -> str:
    if readers is ParquetReaders.HIVE_2_3:
        return "PLAIN"
    if pa.types.is_integer(kind) or pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        return "DELTA_BINARY_PACKED"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind):
        return "DELTA_BYTE_ARRAY"
    return "PLAIN"


def _in_utc(field: pa.Field) -> pa.Field:
    kind = field.type
    if pa.types.is_timestamp(kind) and kind.tz is None:
        return field.with_type(pa.timestamp(kind.unit, tz="UTC"))  # the values are UTC already
    return field


def _distinct_hint(first: pa.Table, column: str) -> int:
    """A bloom filter's expected distinct values: the first row group's (the filter is per row group)."""
    return max(1, pc.count_distinct(first.column(column), mode="only_valid").as_py())
