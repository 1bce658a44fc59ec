"""What every decoder shares: the Decoded result, the Decoder contract, and vectorised helpers
for finding the values an Arrow kernel refuses without a Python loop over the chunk.

Decoders turn a chunk of raw Kafka message values into Arrow rows of a table's data columns.
Decoding is vectorised: a whole chunk goes through pyarrow's C++ JSON reader or regex kernels
at once. Python only touches single records on the error path, so a clean chunk costs a
handful of calls whatever its size. A record that cannot become a row is never dropped: it
is reported with its index and a reason, and ends up in the <table>_rejected table.

Decoders hold nothing but their schema, so they pickle cheaply into Spark tasks.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from etl.model.schema import TableSchema, data_arrow_schema

EMPTY_MESSAGE = "empty message"
INTEGER_COLUMNS = ("tinyint", "smallint", "int", "bigint")


class Unsupported(ValueError):
    """A writer schema's field that no column of the table can hold (the message says why):
    refused at start-up, or the reason its records are rejected."""


@dataclass(frozen=True)
class Decoded:
    table: pa.Table  # the data columns in schema order; one row per good record
    good: pa.Int64Array  # indices into the input of table's rows, ascending
    errors: list[tuple[int, str]]  # (index into the input, reason), ascending
    # Fields the writer's schema has and the table lacks -> records that carried them (avro,
    # protobuf): counted into the batch summary, so that a new field is noticed, not lost unseen.
    ignored_fields: Mapping[str, int] = field(default_factory=dict)


class Decoder(ABC):
    """Decodes message values into rows of `schema.data_columns`."""

    def __init__(self, schema: TableSchema, zone: str = "UTC"):
        self.schema = schema
        self.output_schema = data_arrow_schema(schema)
        # [hive] partition_timezone: a timestamp written without a zone is wall-clock time in it.
        self.zone = zone

    @abstractmethod
    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        """Rows for the decodable values; an (index, reason) for each of the others."""


def arange(length: int) -> pa.Int64Array:
    """0, 1, ..., length-1, without a Python loop."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), length)), 1)


def failing_positions(values: pa.Array, convert: Callable[[pa.Array], object]) -> list[int]:
    """Positions of the values that `convert` refuses with pa.ArrowInvalid, found by bisection.

    For array kernels that fail a whole array over one bad value: a clean array costs one
    call, and the slices are zero-copy, so isolating k bad values costs O(k log n) kernel calls.
    """
    try:
        convert(values)
        return []
    except pa.ArrowInvalid:
        return _failing_positions_of_failing(values, convert)


def _failing_positions_of_failing(values: pa.Array, convert: Callable[[pa.Array], object]) -> list[int]:
    if len(values) == 1:
        return [0]
    middle = len(values) // 2
    left = failing_positions(values[:middle], convert)
    # The conversion is per value: if the left half converts, the right half must be what failed.
    right_half = values[middle:]
    right = failing_positions(right_half, convert) if left else _failing_positions_of_failing(right_half, convert)
    return left + [middle + position for position in right]


def invalid_utf8_positions(values: pa.Array) -> list[int]:
    """Positions of the binary values that are not valid UTF-8."""
    return failing_positions(values, _as_string)


def mask_without(length: int, positions: list[int]) -> pa.BooleanArray:
    """True everywhere except at `positions`."""
    return pc.invert(pc.is_in(arange(length), value_set=pa.array(positions, pa.int64())))


def with_nulls_at(values: pa.Array, positions: list[int]) -> pa.Array:
    return pc.if_else(mask_without(len(values), positions), values, pa.scalar(None, values.type))


def wall_clock_to_utc(naive: pa.Array, zone: str) -> tuple[pa.Array, list[int]]:
    """Naive wall-clock times in `zone` as the UTC times they are (still naive, as stored), and
    the positions of the times the zone never had (skipped by a spring daylight-saving change),
    NULL in the result. A time an autumn change repeats takes its first occurrence."""
    if zone == "UTC" or not len(naive):
        return naive, []
    early = pc.assume_timezone(naive, zone, ambiguous="earliest", nonexistent="earliest")
    late = pc.assume_timezone(naive, zone, ambiguous="earliest", nonexistent="latest")
    skipped = pc.indices_nonzero(pc.fill_null(pc.not_equal(early, late), False)).to_pylist()
    utc = early.cast(naive.type)
    return (with_nulls_at(utc, skipped) if skipped else utc), skipped


def skipped_reason(what: str, text, zone: str) -> str:
    return f"{what} {text!r} does not exist in {zone} (skipped by a daylight-saving change)"


def converted_where_possible(values: pa.Array, convert: Callable[[pa.Array], pa.Array]):
    """convert(values), NULL where a value does not convert, and the positions of those."""
    try:
        return convert(values), []
    except pa.ArrowInvalid:
        failed = failing_positions(values, convert)
        return convert(with_nulls_at(values, failed)), failed


def _as_string(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())
