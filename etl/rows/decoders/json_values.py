"""The JSON decoder's conversions: the columns as read (dates and timestamps as text, floats as
doubles) into their final types, and the reasons given for the values that do not convert."""
from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.compute as pc

from etl.model.schema import Column
from etl.rows.decoders.base import converted_where_possible, wall_clock_to_utc
from etl.rows.decoders.json_lines import refuse_constant
from etl.rows.hive_values import float_overflow, out_of_range, outside_reason, shown, too_large_for_float

_ZONED_RE = r"(?:Z|[+-]\d{2}:?\d{2})$"


def convert_column(values: pa.Array, final_type: pa.DataType, zone: str = "UTC") -> tuple[pa.Array, list[int],
                                                                                           list[int]]:
    """values in final_type, NULL where they do not convert, the positions of those, and among
    them the naive times `zone` never had."""
    if final_type == pa.string():
        return *converted_where_possible(values, _valid_utf8), []  # the JSON reader does not check UTF-8
    if final_type == pa.date32():
        return *converted_where_possible(values, _as_date), []
    if pa.types.is_timestamp(final_type):
        return _timestamps_from_text(values, zone)
    if final_type == pa.float32():
        return values.cast(pa.float32()), [], []  # overflow is found by unreadable, with its own reason
    return values, [], []


def unreadable(column: Column, read_values: pa.Array, array: pa.Array) -> list[tuple[int, str]]:
    """(row, reason) of the values that converted but would not be read back as sent."""
    if array.type == pa.float32():
        return [(row, too_large_for_float(f"field '{column.name}': {read_values[row].as_py()!r}"))
                for row in float_overflow(read_values, array)]
    return [(row, outside_reason(f"field '{column.name}': {_as_sent(read_values[row])}", array.type))
            for row in out_of_range(array)]


def _as_sent(value: pa.Scalar) -> str:
    """A value as the message had it: dates and timestamps are still the text read."""
    return repr(value.as_py()) if pa.types.is_string(value.type) else shown(value)


def _valid_utf8(values: pa.Array) -> pa.Array:
    values.validate(full=True)
    return values


def _as_date(text: pa.Array) -> pa.Array:
    return text.cast(pa.date32())


def _as_naive_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("us"))


def _as_utc_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("us", tz="UTC"))


def _timestamps_from_text(text: pa.Array, zone: str = "UTC") -> tuple[pa.Array, list[int], list[int]]:
    """ISO 8601 text as timestamp[ms]: zoned values converted to UTC, others read as wall-clock
    time in `zone` ([hive] partition_timezone) and converted to UTC too (as written under UTC).

    Arrow's cast parses either zoned or naive text, never both, so the two are split by
    their ending. Microseconds are read, then truncated to the column's milliseconds.
    """
    zoned = pc.match_substring_regex(text, _ZONED_RE)
    if not pc.any(zoned).as_py():
        times, failed = converted_where_possible(text, _as_naive_time)
        times, skipped = wall_clock_to_utc(times, zone)
    else:
        no_text = pa.scalar(None, pa.string())
        naive, failed_naive = converted_where_possible(pc.if_else(zoned, no_text, text), _as_naive_time)
        naive, skipped = wall_clock_to_utc(naive, zone)
        utc, failed_utc = converted_where_possible(pc.if_else(zoned, text, no_text), _as_utc_time)
        times, failed = pc.coalesce(naive, utc.cast(pa.timestamp("us"))), sorted(failed_naive + failed_utc)
    # Floor, not the cast's truncation toward zero, so that times before 1970 do not round up.
    floored = pc.floor_temporal(times, unit="millisecond").cast(pa.timestamp("ms"))
    return floored, sorted(failed + skipped), skipped


def not_integers_of(numbers: pa.Array, integer_type: pa.DataType) -> list[int]:
    """Positions of doubles that cannot have been whole numbers of integer_type.

    Strict comparisons with the limits as doubles: 2**63 - 1 rounds up to 2.0**63, so a
    valid maximum must not count as beyond it.
    """
    bits = integer_type.bit_width - (0 if pa.types.is_unsigned_integer(integer_type) else 1)
    low = 0.0 if pa.types.is_unsigned_integer(integer_type) else float(-(2**bits))
    beyond = pc.or_(pc.less(numbers, low), pc.greater(numbers, float(2**bits - 1)))
    fraction = pc.not_equal(pc.floor(numbers), numbers)
    return pc.indices_nonzero(pc.fill_null(pc.or_(beyond, fraction), False)).to_pylist()


def number_text(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def value_reason(column: Column, read_values: pa.Array, row: int) -> str:
    try:
        text = read_values[row].as_py()
    except UnicodeDecodeError:
        return f"field '{column.name}': invalid UTF-8"
    return f"field '{column.name}': cannot read {text!r} as {column.hive_type}"


def conversion_reason(column: Column, message: str) -> str:
    value = re.search(r"couldn't parse:(.*)$", message, re.S)
    if value:
        return f"field '{column.name}': cannot read {value[1]!r} as {column.hive_type}"
    detail = re.sub(r"^Failed to convert JSON to [^:]*: ", "", message)
    return f"field '{column.name}': expected {column.hive_type}: {detail}"


class _Number(str):
    """A JSON number's text, as the message writes it."""


class _Members(list):
    """A JSON object's (name, value) pairs, in order, repeated names kept."""


def scalar_text(value: bytes | None, field: str) -> str | None:
    """The text of `field` in the JSON object `value` when it is a number or a boolean, as the
    message writes it (`7`, `1.5`, `1.0`, `true`); None when it is anything else, is missing or
    repeated, or `value` is no JSON object. Python's parser, for single records: pyarrow's reader
    has no type that takes a number and a string alike."""
    if value is None:
        return None
    try:
        members = json.loads(value.decode("utf-8-sig"), parse_int=_Number, parse_float=_Number,
                             parse_constant=refuse_constant, object_pairs_hook=_Members)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None
    found = [v for name, v in members if name == field] if isinstance(members, _Members) else []
    if len(found) != 1:
        return None
    if isinstance(found[0], bool):
        return "true" if found[0] else "false"
    return str(found[0]) if isinstance(found[0], _Number) else None
