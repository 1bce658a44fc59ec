"""Checksums of a data file's values (Parquet or ORC), column by column: how a rewritten file proves that it
holds the values it was made from (etl.compaction.merge, before it publishes; `etl verify --deep`, after).

A merged file's footer records, under `etl.checksums`, its row count and one checksum per
column, taken from its INPUTS by a read of their own (not the merge's), in the order the merge
writes them. The merge then reads what it wrote back and refuses to publish it unless every
column's checksum is the same; `etl verify --deep` reads every merged file again and compares.
So a merge that alters a value (as reading INT96 as nanoseconds did: 9999-12-30 became
1816-03-28) is caught twice, and so is a merged file changed by hand afterwards, or an input
that was itself merged and changed since (its own record no longer matches).

Batch files carry no checksum: taking one as they are written would cost every record a pass
over its bytes on the hot path, and nothing rewrites a batch file but a merge.

A column's checksum is four CRC-32s, over: the row numbers of its NULLs; its values in a
canonical form (integers as int64, floats as float64, booleans as a byte, dates as days,
timestamps as int64 microseconds, decimals as their 16 bytes); the lengths of its strings and
binaries; their bytes. None depends on how the rows are split in row groups or chunks, on the
unit a timestamp was read in, or on the file's format, encoding, compression or physical type.
Microseconds: INT96 read so holds every year 0001..9999 Hive accepts (nanoseconds end in 2262).
Files are read through etl.sink.file_format, every timestamp as it was written.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.model import HiveFormat
from etl.sink.file_format import open_data
from etl.sink.fs import WarehouseFileSystem

CHECKSUMS_KEY = b"etl.checksums"
CANONICAL_TIME_UNIT = "us"


@dataclass(frozen=True)
class Checksums:
    """A file's rows, and each column's checksum by name."""

    rows: int
    columns: dict[str, str]

    def to_footer(self) -> bytes:
        return json.dumps({"rows": self.rows, "columns": self.columns}, sort_keys=True).encode()

    def differing(self, found: Checksums) -> list[str]:
        """The columns whose checksum in `found` is not this one (a recorded column missing from
        `found` differs too)."""
        return [name for name, value in self.columns.items() if found.columns.get(name) != value]


def recorded(footer: Mapping[bytes, bytes]) -> Checksums | None:
    """The checksums a file's footer records (None: a batch file, or merged before they were)."""
    raw = footer.get(CHECKSUMS_KEY)
    if raw is None:
        return None
    found = json.loads(raw)
    return Checksums(int(found["rows"]), {str(k): str(v) for k, v in found["columns"].items()})


class ColumnDigest:
    """The running checksum of one column, fed its chunks in row order."""

    def __init__(self) -> None:
        self.rows = 0
        self._crcs = [0, 0, 0, 0]  # NULL positions, values, lengths, bytes

    def add(self, values: pa.Array) -> None:
        count = len(values)
        if values.null_count:
            nulls = pc.add(pc.indices_nonzero(pc.is_null(values)).cast(pa.int64()), pa.scalar(self.rows, pa.int64()))
            self._feed(0, _fixed_width_bytes(nulls))
            values = pc.drop_null(values)
        for stream, data in _canonical(values):
            self._feed(stream, data)
        self.rows += count

    def hexdigest(self) -> str:
        return "".join(f"{crc:08x}" for crc in self._crcs)

    def _feed(self, stream: int, data) -> None:
        self._crcs[stream] = zlib.crc32(data, self._crcs[stream])


class TableDigest:
    """The running checksums of the columns of `schema`, fed tables in row order; a column a
    table lacks (a file written before the column was added) counts as NULL, as Hive reads it."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.rows = 0
        self._columns = {f.name: ColumnDigest() for f in schema}

    def add(self, table: pa.Table) -> None:
        for f in self.schema:
            column = table.column(f.name) if f.name in table.column_names else \
                pa.chunked_array([pa.nulls(table.num_rows, f.type)])
            for chunk in column.chunks:
                self._columns[f.name].add(chunk)
        self.rows += table.num_rows

    def result(self) -> Checksums:
        return Checksums(self.rows, {name: digest.hexdigest() for name, digest in self._columns.items()})


def digest_file(fs: WarehouseFileSystem, path: str, digests: list[TableDigest], file_format: HiveFormat) -> int:
    """Feed every row of `path`, a row group or stripe at a time, to each of `digests`; return its rows."""
    with open_data(fs, path, file_format, int96_unit=CANONICAL_TIME_UNIT) as data:
        for table in data.tables():
            for digest in digests:
                digest.add(table)
        return data.footer.rows


def file_checksums(fs: WarehouseFileSystem, path: str, schema: pa.Schema, file_format: HiveFormat) -> Checksums:
    digest = TableDigest(schema)
    digest_file(fs, path, [digest], file_format)
    return digest.result()


def _canonical(values: pa.Array):
    """(stream, bytes) of the valid values of `values` in their canonical form (see the module)."""
    kind = values.type
    if pa.types.is_dictionary(kind):
        values, kind = values.dictionary_decode(), kind.value_type
    if pa.types.is_binary_view(kind) or pa.types.is_string_view(kind):
        values, kind = values.cast(pa.large_binary()), pa.large_binary()
    if _variable_width(kind):
        yield 2, _fixed_width_bytes(pc.binary_length(values).cast(pa.int64()))
        yield 3, _variable_bytes(values)
    elif pa.types.is_timestamp(kind):
        yield 1, _fixed_width_bytes(values.cast(pa.timestamp(CANONICAL_TIME_UNIT, kind.tz)).cast(pa.int64()))
    elif pa.types.is_date(kind):
        yield 1, _fixed_width_bytes(values.cast(pa.date32()).cast(pa.int32()))
    elif pa.types.is_boolean(kind):
        yield 1, _fixed_width_bytes(values.cast(pa.uint8()))
    elif pa.types.is_integer(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        yield 1, _fixed_width_bytes(values.cast(pa.int64(), safe=False))
    elif pa.types.is_floating(kind):
        yield 1, _fixed_width_bytes(values.cast(pa.float64()))
    elif pa.types.is_decimal(kind) or pa.types.is_fixed_size_binary(kind):
        yield 1, _fixed_width_bytes(values)
    else:  # nested types: the ETL writes none; slow but exact
        yield 3, b"".join(repr(v).encode() + b"\0" for v in values.to_pylist())


def _variable_width(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind))


def _fixed_width_bytes(values: pa.Array) -> memoryview:
    width = values.type.byte_width
    data = values.buffers()[1]
    if data is None or not len(values):
        return memoryview(b"")
    return memoryview(data)[values.offset * width:(values.offset + len(values)) * width]


def _variable_bytes(values: pa.Array) -> memoryview:
    offsets, data = values.buffers()[1], values.buffers()[2]
    if data is None or not len(values):
        return memoryview(b"")
    large = pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)
    positions = memoryview(offsets).cast("q" if large else "i")
    return memoryview(data)[positions[values.offset]:positions[values.offset + len(values)]]
