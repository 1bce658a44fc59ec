"""Decoders turn a chunk of raw Kafka message values into Arrow rows of a table's data columns.

Decoding is vectorised: a whole chunk goes through pyarrow's C++ JSON reader or regex kernels
at once. Python only touches single records on the error path, so a clean chunk costs a
handful of calls whatever its size. A record that cannot become a row is never dropped: it
is reported with its index and a reason, and ends up in the <table>_rejected table.

Decoders hold nothing but their schema, so they pickle cheaply into Spark tasks.
"""
from __future__ import annotations

import itertools
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from etl.errors import ConfigError, SchemaError
from etl.schema import Column, TableSchema, data_arrow_schema

EMPTY_MESSAGE = "empty message"
ACCESS_LOG_FORMAT = "<date> <time> <LEVEL> <message>"
ACCESS_LOG_COLUMNS = (Column("log_time", "timestamp"), Column("level", "string"), Column("message", "string"))
# Group names are the output columns. Padding after the level is log4j's %-5p; one trailing
# "\n" or "\r\n" is the line end, not part of the message.
_ACCESS_LOG_RE = (
    r"(?s)^(?P<log_time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) +(?P<level>[A-Z]+)"
    r"(?: +(?P<message>.*?))?\r?\n?$"
)
_JSON_OBJECT_START_RE = r"^[ \t\r\n]*\{"
_JSON_KINDS = {"[": "array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}
# pyarrow's reader keeps microseconds and reads zoned ISO 8601 strings as UTC; the
# millisecond column then drops the sub-millisecond digits.
_JSON_TIMESTAMP_READ_TYPE = pa.timestamp("us")
_MAX_BLOCK_SIZE = 2**31 - 1


@dataclass(frozen=True)
class Decoded:
    table: pa.Table  # the data columns in schema order; one row per good record
    good: pa.Int64Array  # indices into the input of table's rows, ascending
    errors: list[tuple[int, str]]  # (index into the input, reason), ascending

    @property
    def rejected_indices(self) -> list[int]:
        return [index for index, _reason in self.errors]


class Decoder(ABC):
    """Decodes message values into rows of `schema.data_columns`."""

    def __init__(self, schema: TableSchema):
        self.schema = schema
        self.output_schema = data_arrow_schema(schema)

    @abstractmethod
    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        """Rows for the decodable values; an (index, reason) for each of the others."""


def make_decoder(name: str, schema: TableSchema) -> Decoder:
    decoders = {"json": JsonDecoder, "access_log": AccessLogDecoder}
    if name not in decoders:
        raise ConfigError(f"unknown decoder {name!r}; set [job] decoder to one of {', '.join(decoders)}")
    return decoders[name](schema)


def arange(length: int) -> pa.Int64Array:
    """0, 1, ..., length-1, without a Python loop."""
    return pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), length)), 1)


def failing_positions(values: pa.Array, convert: Callable[[pa.Array], object]) -> list[int]:
    """Positions of the values that `convert` refuses with pa.ArrowInvalid, found by bisection.

    For conversions that fail a whole array over one bad value; a clean array costs one call.
    """
    try:
        convert(values)
        return []
    except pa.ArrowInvalid:
        if len(values) == 1:
            return [0]
    middle = len(values) // 2
    right = failing_positions(values[middle:], convert)
    return failing_positions(values[:middle], convert) + [middle + position for position in right]


def invalid_utf8_positions(values: pa.Array) -> list[int]:
    """Positions of the binary values that are not valid UTF-8."""
    return failing_positions(values, _as_string)


class JsonDecoder(Decoder):
    """One JSON object per message; its fields fill the data columns of the same name.

    A missing field is NULL and unknown fields are ignored. The whole chunk is parsed as one
    newline-delimited block. When that fails, the bad records are isolated by re-parsing
    parts of the block: at the row a syntax error names, or else by bisection.
    """

    def __init__(self, schema: TableSchema):
        super().__init__(schema)
        self.read_schema = pa.schema([_json_read_field(field) for field in self.output_schema])

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        candidates, errors = _json_object_candidates(values)
        lines = _JsonLines(values if len(candidates) == len(values) else [values[i] for i in candidates])
        segments, parse_errors = self._parse_isolating_errors(lines)
        errors = sorted(errors + [(candidates[position], reason) for position, reason in parse_errors])
        good = arange(len(values)) if not errors else _good_indices(candidates, [p for p, _r in parse_errors])
        tables = [table for _lo, _hi, table in segments] or [self.output_schema.empty_table()]
        return Decoded(pa.concat_tables(tables), good, errors)

    def _parse_isolating_errors(self, lines: _JsonLines):
        """Tables of the parsable ranges of lines, ascending, and (position, reason) of the rest.

        Every parse costs ~0.1 ms on top of its size, so the number of parses is what matters.
        A syntax error names its row: that record is tried alone and, if it fails alone, is
        cut out with one split. Other failures (a value that does not convert) are bisected.
        The stack is explicit because one split per bad record would recurse that deep.
        """
        segments: list[tuple[int, int, pa.Table]] = []
        errors: list[tuple[int, str]] = []
        pending: list[tuple[int, int]] = [(0, len(lines))]
        while pending:
            lo, hi = pending.pop()
            outcome = self._try_parse(lines.block(lo, hi), hi - lo)
            if isinstance(outcome, pa.Table):
                segments.append((lo, hi, outcome))
            elif hi - lo == 1:
                errors.append((lo, self._reason(lines.block(lo, hi), outcome)))
            else:
                pending.extend(reversed(self._split(lines, lo, hi, outcome, errors)))
        return segments, errors

    def _try_parse(self, block: pa.Buffer, lines: int) -> pa.Table | _ParseFailure:
        try:
            table = _parse_json_block(block, self.read_schema, self.output_schema)
        except pa.ArrowInvalid as exc:
            return _ParseFailure(str(exc), _blamed_row(str(exc), lines))
        # A message holding two JSON values yields two rows; rows would no longer align.
        return table if table.num_rows == lines else _ParseFailure(None, None, table.num_rows)

    def _split(self, lines: _JsonLines, lo: int, hi: int, failure: _ParseFailure, errors) -> list[tuple[int, int]]:
        """The non-empty ranges left to parse, left to right; records the blamed row if it is bad."""
        culprit = None if failure.row is None else lo + failure.row
        reason = None if culprit is None else self._explain(lines.block(culprit, culprit + 1))
        if reason:
            errors.append((culprit, reason))
            ranges = [(lo, culprit), (culprit + 1, hi)]
        else:
            ranges = [(lo, (lo + hi) // 2), ((lo + hi) // 2, hi)]
        return [(start, end) for start, end in ranges if start < end]

    def _explain(self, line: pa.Buffer) -> str | None:
        """Why one record fails on its own, or None if it does not."""
        outcome = self._try_parse(line, 1)
        return None if isinstance(outcome, pa.Table) else self._reason(line, outcome)

    def _reason(self, line: pa.Buffer, failure: _ParseFailure) -> str:
        """The reason for a failure of parsing `line` alone."""
        if failure.message is None:
            return f"message holds {failure.rows} JSON values; expected exactly one object"
        return self._explain_failure(line, failure.message)

    def _explain_failure(self, line: pa.Buffer, message: str) -> str:
        named = re.search(r"Column\(/([^)]*)\) (changed from \w+ to (\w+)|was specified twice)", message)
        if named and named[3] and named[1] in self.schema.column_names:
            return f"field '{named[1]}': expected {self.schema.column(named[1]).hive_type}, got {named[3]}"
        if named and not named[3]:
            return f"field '{named[1]}' appears more than once"
        if message.startswith("JSON parse error:"):
            return "invalid JSON: " + _parse_error_detail(message)
        return self._explain_field(line) or f"cannot decode: {message}"

    def _explain_field(self, line: pa.Buffer) -> str | None:
        """The first field that fails on its own, with why."""
        for read_field, field in zip(self.read_schema, self.output_schema):
            try:
                _parse_json_block(line, pa.schema([read_field]), pa.schema([field]))
            except pa.ArrowInvalid as exc:
                return _field_reason(self.schema.column(field.name), str(exc))
        return None


class AccessLogDecoder(Decoder):
    """Log lines '<date> <time> <LEVEL> <message>' into log_time, level and message."""

    def __init__(self, schema: TableSchema):
        super().__init__(schema)
        _check_access_log_columns(schema)

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        fields = pc.extract_regex(pa.array(values, pa.binary()), _ACCESS_LOG_RE)  # null where no match
        matched = fields.is_valid()
        time_text = pc.if_else(matched, fields.field("log_time").cast(pa.string()), pa.scalar(None, pa.string()))
        # The cast's ISO parser refuses 2017-02-30; pc.strptime would roll it over to March 2.
        bad_time = failing_positions(time_text, _as_log_time)
        bad_utf8 = invalid_utf8_positions(fields.field("message"))
        good_mask = pc.and_(matched, _mask_without(len(values), bad_time + bad_utf8))
        columns = {
            "log_time": _as_log_time(time_text.filter(good_mask)),
            "level": fields.field("level").filter(good_mask).cast(pa.string()),
            "message": fields.field("message").filter(good_mask).cast(pa.string()),
        }
        table = pa.Table.from_arrays([columns[f.name] for f in self.output_schema], schema=self.output_schema)
        good = pc.indices_nonzero(good_mask).cast(pa.int64())
        return Decoded(table, good, self._errors(values, fields, good_mask, set(bad_utf8)))

    @staticmethod
    def _errors(values, fields: pa.StructArray, good_mask: pa.BooleanArray, bad_utf8: set[int]) -> list[tuple[int, str]]:
        bad = pc.indices_nonzero(pc.invert(good_mask)).to_pylist()
        return [(index, _access_log_reason(values[index], fields, index, bad_utf8)) for index in bad]


def _access_log_reason(value: bytes | None, fields: pa.StructArray, index: int, bad_utf8: set[int]) -> str:
    if not value:
        return EMPTY_MESSAGE
    if not fields[index].is_valid:
        return f"line does not match '{ACCESS_LOG_FORMAT}'"
    if index in bad_utf8:
        return "message is not valid UTF-8"
    return f"invalid date or time {fields.field('log_time')[index].as_py().decode()!r}"


def _as_string(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())


def _as_log_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("ms"))


def _check_access_log_columns(schema: TableSchema) -> None:
    if set(schema.data_columns) != set(ACCESS_LOG_COLUMNS):
        found = ", ".join(f"{c.name} {c.hive_type}" for c in schema.data_columns)
        raise SchemaError(
            f"the access_log decoder fills exactly log_time timestamp, level string, message string, "
            f"but the table's data columns are: {found}; change the DDL or use the json decoder"
        )


def _mask_without(length: int, positions: list[int]) -> pa.BooleanArray:
    """True everywhere except at `positions`."""
    return pc.invert(pc.is_in(arange(length), value_set=pa.array(positions, pa.int64())))


def _json_read_field(field: pa.Field) -> pa.Field:
    """How the JSON reader should read a column before it is converted to its final type."""
    if field.type == pa.date32():
        return field.with_type(pa.string())  # the reader reads dates as day numbers, not text
    if pa.types.is_timestamp(field.type):
        return field.with_type(_JSON_TIMESTAMP_READ_TYPE)
    return field


@dataclass(frozen=True)
class _ParseFailure:
    message: str | None  # pyarrow's error; None when it parsed into more rows than lines
    row: int | None = None  # the row pyarrow blamed, counted from the start of the block
    rows: int | None = None  # how many rows it parsed into, when message is None


class _JsonLines:
    """Messages as newline-delimited JSON, joined once so that any range is a zero-copy slice."""

    def __init__(self, messages: Sequence[bytes]):
        data = b"\n".join(messages)
        if data.count(b"\n") != max(len(messages) - 1, 0):
            # b"\r", not a space: both are whitespace between JSON tokens, and a raw CR inside
            # a string is as invalid as the raw LF it replaces, so no bad record turns good.
            messages = [message.replace(b"\n", b"\r") for message in messages]
            data = b"\n".join(messages)
        self.messages = messages
        self.data = pa.py_buffer(data)
        self._starts: list[int] | None = None

    def __len__(self) -> int:
        return len(self.messages)

    def block(self, lo: int, hi: int) -> pa.Buffer:
        """Messages lo..hi-1 as one buffer."""
        if lo == 0 and hi == len(self.messages):
            return self.data
        starts = self._line_starts()
        return self.data.slice(starts[lo], starts[hi] - 1 - starts[lo])

    def _line_starts(self) -> list[int]:
        # Computed on the error path only; map/accumulate keep the loop in C.
        if self._starts is None:
            self._starts = list(itertools.accumulate(map((1).__add__, map(len, self.messages)), initial=0))
        return self._starts


def _parse_json_block(block: pa.Buffer, read_schema: pa.Schema, output_schema: pa.Schema) -> pa.Table:
    """Newline-delimited JSON as a table of output_schema. Raises pa.ArrowInvalid."""
    reader = pa_json.open_json(  # much cheaper per call than read_json, which matters on the error path
        pa.BufferReader(block),
        # One block: the chunk is already in memory, and one block means no straddling.
        read_options=pa_json.ReadOptions(use_threads=False, block_size=min(block.size + 1, _MAX_BLOCK_SIZE)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=read_schema, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )
    table = reader.read_all()
    return pa.Table.from_arrays([_converted(table.column(f.name), f.type) for f in output_schema], schema=output_schema)


def _converted(column: pa.ChunkedArray, final_type: pa.DataType) -> pa.ChunkedArray:
    if column.type == pa.string():
        column.validate(full=True)  # the JSON reader does not check UTF-8
    if column.type == final_type:
        return column
    # safe=False only lets microseconds truncate to milliseconds; text that is no date still fails.
    return column.cast(final_type, safe=not pa.types.is_timestamp(final_type))


def _json_object_candidates(values: Sequence[bytes | None]) -> tuple[Sequence[int], list[tuple[int, str]]]:
    """Indices of the values that start like a JSON object, and errors for the others.

    Screening matters for correctness, not only speed: pyarrow reads a top-level `null`
    as an all-NULL row (or crashes when it comes first), which would misalign the rows.
    """
    starts_ok = pc.match_substring_regex(pa.array(values, pa.binary()), _JSON_OBJECT_START_RE)
    if starts_ok.null_count == 0 and pc.all(starts_ok).as_py():
        return range(len(values)), []
    flags = starts_ok.to_pylist()
    errors = [(i, _not_an_object_reason(values[i])) for i, ok in enumerate(flags) if not ok]
    return [i for i, ok in enumerate(flags) if ok], errors


def _not_an_object_reason(value: bytes | None) -> str:
    text = (value or b"").lstrip(b" \t\r\n")
    if not text:
        return EMPTY_MESSAGE
    first = chr(text[0])
    kind = "number" if first in "-0123456789" else _JSON_KINDS.get(first)
    return f"expected a JSON object, got {kind}" if kind else "invalid JSON: expected a JSON object"


def _blamed_row(message: str, rows: int) -> int | None:
    """The row a JSON parse error names; only parse errors name one, conversion errors do not."""
    match = re.search(r" in row (\d+)$", message)
    return int(match[1]) if match and int(match[1]) < rows else None


def _good_indices(candidates: Sequence[int], bad_positions: list[int]) -> pa.Int64Array:
    """The candidates but those at bad_positions: what the parsed segments hold, in order."""
    positions = pc.indices_nonzero(_mask_without(len(candidates), bad_positions)).cast(pa.int64())
    return positions if isinstance(candidates, range) else pc.take(pa.array(candidates, pa.int64()), positions)


def _parse_error_detail(message: str) -> str:
    detail = re.sub(r"^JSON parse error: (Column\(\) )?| in row \d+$", "", message)
    if detail.startswith("Invalid encoding in string"):
        # What RapidJSON says about a raw control character (tab, newline) inside a string.
        return f"{detail} (a raw control character inside a string? escape it, e.g. as \\n)"
    return detail


def _field_reason(column: Column, message: str) -> str:
    if "Invalid UTF8" in message:
        return f"field '{column.name}': invalid UTF-8"
    value = re.search(r"couldn't parse:(.*)$|Failed to parse string: '(.*)' as a scalar", message, re.S)
    if value:
        text = value[1] if value[1] is not None else value[2]
        return f"field '{column.name}': cannot read {text!r} as {column.hive_type}"
    detail = re.sub(r"^Failed to convert JSON to [^:]*: ", "", message)
    return f"field '{column.name}': expected {column.hive_type}: {detail}"
