"""Which values Hive and Spark read back, so that one bad value never makes a table unreadable.

Arrow and Parquet store far more than the readers can show. Measured on the local stack
(Spark 4 Thrift Server with Hive's JDBC driver, and PySpark), a single such value fails or
corrupts every `SELECT *` of its table:
  - a timestamp after year 9999 ("Unrecognized column type: TIMESTAMP_TYPE" over JDBC, "year
    10000 is out of range" in PySpark); one in year 0 is shown as year 1, silently wrong;
  - the readers show timestamps in the session time zone, which shifts the edges: 9999-12-31
    23:00 UTC is year 10000 in Asia/Tokyo and fails there, 0001-01-01 00:00 UTC is year 0 in
    America/Los_Angeles (its LMT offset, -7:52). PySpark also refuses any time in the first
    day of year 1 (its local-time conversion). So timestamps keep one day inside Hive's and
    Spark's 0001-01-01 .. 9999-12-31, which every zone (offsets up to 16 h) and client reads;
  - dates have no zone: 0001-01-01 .. 9999-12-31 read back everywhere; year 0 does not;
  - a decimal beyond its declared precision (an Arrow decimal128(10,2) can hold 10^10) is
    written by Parquet as another number.
A float32 column cannot hold a double beyond 3.4e38: the cast makes it infinite, silently.

A table stored as ORC reads back less (`ORC_FILES`): pyarrow, which compaction and `verify
--deep` read files with, reads ORC timestamps only as nanoseconds (1677-09-21 .. 2262-04-11),
and Spark's ORC reader shows a date before 1582-10-15 that pyarrow wrote in the Julian calendar
(0001-01-01 as 0001-01-03), so those dates are refused there too.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.model import HiveFormat

TIMESTAMP_MIN_MS = -62_135_510_400_000  # 0001-01-02 00:00:00 UTC
TIMESTAMP_MAX_MS = 253_402_214_399_999  # 9999-12-30 23:59:59.999 UTC
DATE_MIN_DAYS = -719_162  # 0001-01-01
DATE_MAX_DAYS = 2_932_896  # 9999-12-31
TIMESTAMP_RANGE = "0001-01-02 00:00:00 .. 9999-12-30 23:59:59.999 UTC"
DATE_RANGE = "0001-01-01 .. 9999-12-31"
FLOAT_MAX = "3.4028235e+38"


@dataclass(frozen=True)
class ReadableRange:
    """The timestamps and dates a table's files are read back in, by every reader of its format."""

    timestamp_min_ms: int
    timestamp_max_ms: int
    date_min_days: int
    date_max_days: int
    shown_timestamps: str
    shown_dates: str
    readers: str  # who reads the range back, as a reason says it


HIVE_AND_SPARK = ReadableRange(TIMESTAMP_MIN_MS, TIMESTAMP_MAX_MS, DATE_MIN_DAYS, DATE_MAX_DAYS, TIMESTAMP_RANGE,
                               DATE_RANGE, "Hive and Spark")
# A day inside pyarrow's nanosecond range, as the range above keeps a day inside Hive's.
ORC_FILES = ReadableRange(-9_223_286_400_000, 9_223_286_399_999, -141_427, DATE_MAX_DAYS,
                          "1677-09-22 00:00:00 .. 2262-04-10 23:59:59.999 UTC", "1582-10-15 .. 9999-12-31",
                          "every reader of an ORC table")


def readable_in(file_format: HiveFormat) -> ReadableRange:
    """The range a table of `file_format` reads back."""
    return ORC_FILES if file_format is HiveFormat.ORC else HIVE_AND_SPARK


def out_of_range(values: pa.Array | pa.ChunkedArray, readable: ReadableRange = HIVE_AND_SPARK) -> list[int]:
    """Positions of the values the table's readers cannot read back; [] for types without
    limits. A column without any costs three vectorised calls."""
    bounds = _bounds(values.type, readable)
    if bounds is None or not len(values):
        return []
    low, high = bounds
    outside = pc.or_(pc.less(values, low), pc.greater(values, high))
    if not pc.any(outside).as_py():
        return []
    return pc.indices_nonzero(outside).to_pylist()


def outside_reason(subject: str, arrow_type: pa.DataType, readable: ReadableRange = HIVE_AND_SPARK) -> str:
    """Why a value of arrow_type is refused; `subject` names the value, e.g. "field 'ts': '0000-06-01'"."""
    if pa.types.is_decimal(arrow_type):
        largest = largest_decimal(arrow_type)
        return (f"{subject} does not fit decimal({arrow_type.precision},{arrow_type.scale}), which holds "
                f"{largest.copy_negate()} .. {largest}")
    shown = readable.shown_timestamps if pa.types.is_timestamp(arrow_type) else readable.shown_dates
    return f"{subject} is outside the range {readable.readers} read back ({shown})"


def unreadable_rows(table: pa.Table, readable: ReadableRange = HIVE_AND_SPARK) -> list[tuple[int, str]]:
    """(row, reason) of the rows holding a value the table's readers cannot read back,
    ascending; the first such column names the reason. The last check before rows are written."""
    found: dict[int, str] = {}
    for field in table.schema:
        column = table.column(field.name)
        for row in out_of_range(column, readable):
            found.setdefault(row, outside_reason(f"column '{field.name}': {shown(column[row])}", field.type, readable))
    return sorted(found.items())


def float_overflow(doubles: pa.Array | pa.ChunkedArray, floats: pa.Array | pa.ChunkedArray) -> list[int]:
    """Positions where a finite double became infinite as float32: too large for the column."""
    lost = pc.and_(pc.is_finite(doubles), pc.invert(pc.is_finite(floats)))
    if not pc.any(lost).as_py():
        return []
    return pc.indices_nonzero(lost).to_pylist()


def too_large_for_float(subject: str) -> str:
    return f"{subject} is too large for float (largest magnitude {FLOAT_MAX}); declare the column as double"


def shown(value: pa.Scalar) -> str:
    """A value as Arrow writes it; Arrow cannot format years beyond its calendar, so those as a number."""
    text = value.cast(pa.string()).as_py()
    if text.startswith("<value out of range"):
        unit = "ms" if pa.types.is_timestamp(value.type) else "days"
        return f"{value.cast(pa.int64()).as_py()} {unit} after 1970-01-01"
    return text


def _bounds(arrow_type: pa.DataType, readable: ReadableRange) -> tuple[pa.Scalar, pa.Scalar] | None:
    if arrow_type == pa.timestamp("ms"):
        return pa.scalar(readable.timestamp_min_ms, arrow_type), pa.scalar(readable.timestamp_max_ms, arrow_type)
    if arrow_type == pa.date32():
        return (pa.scalar(readable.date_min_days, pa.int32()).cast(arrow_type),
                pa.scalar(readable.date_max_days, pa.int32()).cast(arrow_type))
    if pa.types.is_decimal(arrow_type):
        largest = largest_decimal(arrow_type)
        return pa.scalar(largest.copy_negate(), arrow_type), pa.scalar(largest, arrow_type)
    return None


def largest_decimal(arrow_type: pa.Decimal128Type) -> Decimal:
    """The largest value the decimal type's precision allows, exactly: built from its digits,
    since arithmetic (scaleb) rounds to the context's 28 digits."""
    return Decimal(f"{10 ** arrow_type.precision - 1}E-{arrow_type.scale}")
