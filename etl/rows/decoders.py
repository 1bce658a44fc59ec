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
from etl.rows.hive_values import float_overflow, out_of_range, outside_reason, shown, too_large_for_float
from etl.model.schema import Column, TableSchema, data_arrow_schema

EMPTY_MESSAGE = "empty message"
ACCESS_LOG_FORMAT = "<date> <time> <LEVEL> <message>"
ACCESS_LOG_COLUMNS = (Column("log_time", "timestamp"), Column("level", "string"), Column("message", "string"))
# Padding after the level is log4j's %-5p. A greedy, unanchored-at-the-end message keeps RE2
# on its fast path (a lazy .*? with \r?\n?$ is ~7x slower); the line end is cut off after.
_ACCESS_LOG_RE = (
    r"(?s)^(?P<log_time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) +(?P<level>[A-Z]+)"
    r"(?:(?: +(?P<message>.*))|\r?\n)?$"
)
_LINE_END_RE = r"\r?\n$"
_JSON_OBJECT_START_RE = r"^[ \t\r\n]*\{"
_JSON_KINDS = {"[": "array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}
_ZONED_RE = r"(?:Z|[+-]\d{2}:?\d{2})$"
# RapidJSON, under pyarrow's reader, accepts NaN, Inf and Infinity (signed) as numbers; JSON does
# not. A literal is one outside any string: after the complete strings and other characters
# from the start, in a value's place. Screened for with a plain substring search first.
_NON_JSON_HINT_RE = r"NaN|Inf"
_NON_JSON_LITERAL_RE = r'^(?:[^"\\]|"(?:[^"\\]|\\.)*")*[\[:,][ \t\r\n]*-?(?:NaN|Inf)'
_NON_JSON_FIELD_RE = re.compile(
    rb'^(?:[^"\\]|"(?:[^"\\]|\\.)*")*?(?:"((?:[^"\\]|\\.)*)"[ \t\r\n]*:|[\[:,])[ \t\r\n]*(-?(?:NaN|Inf(?:inity)?))',
    re.S)
_MAX_BLOCK_SIZE = 2**31 - 1


@dataclass(frozen=True)
class Decoded:
    table: pa.Table  # the data columns in schema order; one row per good record
    good: pa.Int64Array  # indices into the input of table's rows, ascending
    errors: list[tuple[int, str]]  # (index into the input, reason), ascending


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


class JsonDecoder(Decoder):
    """One JSON object per message; its fields fill the data columns of the same name.

    A missing field is NULL and unknown fields are ignored. The whole chunk is parsed as one
    newline-delimited block. Values the reader does not convert itself (timestamps, dates,
    UTF-8 checks) are converted afterwards, column by column, so a bad one costs no re-parse.
    When the parse itself fails, the bad records are isolated by re-parsing parts of the
    block: cut out at the row a syntax error names, or where a second parse finds numbers
    that do not fit an integer column, or else found by bisection.
    """

    def __init__(self, schema: TableSchema):
        super().__init__(schema)
        self.read_schema = pa.schema([_json_read_field(field) for field in self.output_schema])

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        candidates, errors = _json_object_candidates(values)
        lines = _JsonLines(values if len(candidates) == len(values) else [values[i] for i in candidates])
        tables, line_errors = self._parse_isolating_errors(lines)
        errors = sorted(errors + [(candidates[position], reason) for position, reason in line_errors])
        good = arange(len(values)) if not errors else _good_indices(candidates, [p for p, _ in line_errors])
        return Decoded(pa.concat_tables(tables or [self.output_schema.empty_table()]), good, errors)

    def _parse_isolating_errors(self, lines: _JsonLines) -> tuple[list[pa.Table], list[tuple[int, str]]]:
        """Tables of the good lines in line order, and (line, reason) for the others.

        Every parse costs ~0.1 ms on top of its size, so the number of parses is what matters.
        A syntax error names its row; a number that does not fit an integer column is found
        by one more parse; each such record is cut out with one split. What is left (1e3 in
        an int column, a bad decimal) is bisected. The stack is explicit because one split
        per bad record would recurse as deep as there are bad records.
        """
        tables: list[pa.Table] = []
        errors: list[tuple[int, str]] = []
        pending = [_Range(0, len(lines))] if len(lines) else []
        while pending:
            part = pending.pop()
            failure = part.failure
            if failure is None or (part.size == 1 and failure.inferred):
                outcome = self._try_parse(lines.block(part.lo, part.hi), part.size)
                if isinstance(outcome, _Parsed):
                    tables.append(outcome.table)
                    errors.extend((part.lo + row, reason) for row, reason in outcome.row_errors)
                    continue
                failure = outcome
            if part.size == 1:
                errors.append((part.lo, self._reason(lines.block(part.lo, part.hi), failure)))
            else:
                pending.extend(reversed(self._split(lines, part, failure, tables, errors)))
        return tables, errors

    def _try_parse(self, block: pa.Buffer, lines: int) -> _Parsed | _ParseFailure:
        try:
            raw = _read_json(block, self.read_schema)
        except pa.ArrowInvalid as exc:
            return _ParseFailure(str(exc), _blamed_row(str(exc), lines))
        if raw.num_rows != lines:
            # A message holding two JSON values yields two rows; rows would no longer align.
            return _ParseFailure(rows=raw.num_rows)
        return self._convert(raw)

    def _convert(self, raw: pa.Table) -> _Parsed:
        """The read columns in their final types; rows with a value that does not convert are dropped."""
        arrays, bad = [], {}
        for column, field in zip(self.schema.data_columns, self.output_schema):
            read_values = raw.column(field.name).combine_chunks()
            array, failed = _convert_column(read_values, field.type)
            for row in failed:
                bad.setdefault(row, _value_reason(column, read_values, row))
            for row, reason in _unreadable(column, read_values, array):
                bad.setdefault(row, reason)
            arrays.append(array)
        table = pa.Table.from_arrays(arrays, schema=self.output_schema)
        if bad:
            table = table.filter(mask_without(table.num_rows, list(bad)))
        return _Parsed(table, sorted(bad.items()))

    def _split(self, lines: _JsonLines, part: _Range, failure: _ParseFailure, tables, errors) -> list[_Range]:
        """The ranges of `part` left to parse, left to right, with their failure if already known.

        Cuts out the records known to be bad. Otherwise bisects, parsing the left half at
        once: if it parses, the right half is known to fail and needs no parse of its own.
        """
        searched = part.searched or self._worth_searching(failure)
        culprits = self._blamed_rows(lines, part, failure)
        if culprits:
            errors.extend((part.lo + row, reason) for row, reason in culprits)
            bounds = [-1] + [row for row, _reason in culprits] + [part.size]
            return [_Range(part.lo + start + 1, part.lo + end, searched=searched)
                    for start, end in zip(bounds, bounds[1:]) if start + 1 < end]
        middle = (part.lo + part.hi) // 2
        left = self._try_parse(lines.block(part.lo, middle), middle - part.lo)
        if not isinstance(left, _Parsed):
            return [_Range(part.lo, middle, left, searched), _Range(middle, part.hi, searched=searched)]
        tables.append(left.table)
        errors.extend((part.lo + row, reason) for row, reason in left.row_errors)
        return [_Range(middle, part.hi, _ParseFailure(), searched)]

    def _blamed_rows(self, lines: _JsonLines, part: _Range, failure: _ParseFailure) -> list[tuple[int, str]]:
        """(row, reason) of records in `part` known to be bad without bisecting, ascending."""
        if failure.row is not None:
            culprit = part.lo + failure.row
            reason = self._explain(lines.block(culprit, culprit + 1))
            return [(failure.row, reason)] if reason else []
        if not part.searched and self._worth_searching(failure):
            return self._non_integers(lines.block(part.lo, part.hi), part.size)
        return []

    @staticmethod
    def _worth_searching(failure: _ParseFailure) -> bool:
        return bool(failure.message and re.match(r"Failed to convert JSON to u?int", failure.message))

    def _non_integers(self, block: pa.Buffer, lines: int) -> list[tuple[int, str]]:
        """Rows whose integer fields hold fractions or out-of-range numbers.

        The reader's message names no row; one parse reading integer columns as doubles finds
        them all. Only sure failures are reported: a double that is no whole number, or beyond
        the type's range. Others (1.0, 1e3) are left to bisection.
        """
        relaxed = pa.schema([f.with_type(pa.float64()) if pa.types.is_integer(f.type) else f for f in self.read_schema])
        try:
            raw = _read_json(block, relaxed)
        except pa.ArrowInvalid:
            return []
        if raw.num_rows != lines:
            return []  # a message holding two values shifts the rows: they no longer name lines
        bad: dict[int, str] = {}
        for column, field in zip(self.schema.data_columns, self.read_schema):
            if pa.types.is_integer(field.type):
                numbers = raw.column(field.name).combine_chunks()
                for row in _not_integers_of(numbers, field.type):
                    shown = _number_text(numbers[row].as_py())
                    bad.setdefault(row, f"field '{column.name}': cannot read {shown!r} as {column.hive_type}")
        return sorted(bad.items())

    def _explain(self, line: pa.Buffer) -> str | None:
        """Why one record fails on its own, or None if it does not."""
        outcome = self._try_parse(line, 1)
        if isinstance(outcome, _Parsed):
            return outcome.row_errors[0][1] if outcome.row_errors else None
        return self._reason(line, outcome)

    def _reason(self, line: pa.Buffer, failure: _ParseFailure) -> str:
        """The reason for a failure of parsing `line` alone."""
        if failure.message is None:
            return f"message holds {failure.rows} JSON values; expected exactly one object"
        named = re.search(r"Column\(/([^)]*)\) (changed from \w+ to (\w+)|was specified twice)", failure.message)
        if named and named[3] and named[1] in self.schema.column_names:
            return f"field '{named[1]}': expected {self.schema.column(named[1]).hive_type}, got {named[3]}"
        if named and not named[3]:
            return f"field '{named[1]}' appears more than once"
        if failure.message.startswith("JSON parse error:"):
            return "invalid JSON: " + _parse_error_detail(failure.message)
        return self._explain_conversion(line, failure.message) or f"cannot decode: {failure.message}"

    def _explain_conversion(self, line: pa.Buffer, message: str) -> str | None:
        """Which field the reader could not convert: the message names only the type."""
        target = re.match(r"Failed to convert JSON to ([^,:]+)", message)
        suspects = [f for f in self.read_schema if target and str(f.type) == target[1]] or list(self.read_schema)
        for field in suspects:
            try:
                _read_json(line, pa.schema([field]))
            except pa.ArrowInvalid as exc:
                return _conversion_reason(self.schema.column(field.name), str(exc))
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
        times, bad_time = _converted_where_possible(time_text, _as_log_time)
        unreadable = out_of_range(times)
        message = _without_line_end(fields.field("message"))
        bad_utf8 = invalid_utf8_positions(message)
        good_mask = pc.and_(matched, mask_without(len(values), bad_time + unreadable + bad_utf8))
        columns = {
            "log_time": times.filter(good_mask),
            "level": fields.field("level").filter(good_mask).cast(pa.string()),
            "message": message.filter(good_mask).cast(pa.string()),
        }
        table = pa.Table.from_arrays([columns[f.name] for f in self.output_schema], schema=self.output_schema)
        good = pc.indices_nonzero(good_mask).cast(pa.int64())
        errors = _access_log_errors(values, matched, good_mask, time_text, set(bad_utf8), set(unreadable))
        return Decoded(table, good, errors)


def _access_log_errors(values, matched, good_mask, time_text, bad_utf8: set[int],
                       unreadable: set[int]) -> list[tuple[int, str]]:
    def reason(index: int) -> str:
        if not values[index]:
            return EMPTY_MESSAGE
        if not matched[index].as_py():
            return f"line does not match '{ACCESS_LOG_FORMAT}'"
        if index in bad_utf8:
            return "message is not valid UTF-8"
        if index in unreadable:
            return outside_reason(f"log time {time_text[index].as_py()!r}", pa.timestamp("ms"))
        return f"invalid date or time {time_text[index].as_py()!r}"

    return [(index, reason(index)) for index in pc.indices_nonzero(pc.invert(good_mask)).to_pylist()]


def _check_access_log_columns(schema: TableSchema) -> None:
    if set(schema.data_columns) != set(ACCESS_LOG_COLUMNS):
        found = ", ".join(f"{c.name} {c.hive_type}" for c in schema.data_columns)
        raise SchemaError(
            f"the access_log decoder fills exactly log_time timestamp, level string, message string, "
            f"but the table's data columns are: {found}; change the DDL or use the json decoder"
        )


def _without_line_end(lines: pa.Array) -> pa.Array:
    if not pc.any(pc.ends_with(lines, "\n")).as_py():
        return lines
    return pc.replace_substring_regex(lines, _LINE_END_RE, "", max_replacements=1)


def _as_string(values: pa.Array) -> pa.Array:
    return values.cast(pa.string())


def _as_log_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("ms"))


def mask_without(length: int, positions: list[int]) -> pa.BooleanArray:
    """True everywhere except at `positions`."""
    return pc.invert(pc.is_in(arange(length), value_set=pa.array(positions, pa.int64())))


def _with_nulls_at(values: pa.Array, positions: list[int]) -> pa.Array:
    return pc.if_else(mask_without(len(values), positions), values, pa.scalar(None, values.type))


# --- JSON helpers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Parsed:
    table: pa.Table  # the rows that converted
    row_errors: list[tuple[int, str]]  # (row in the block, reason) of the rows that did not


@dataclass(frozen=True)
class _Range:
    """Lines lo..hi-1 still to be parsed."""

    lo: int
    hi: int
    failure: _ParseFailure | None = None  # known already, so the parse can be skipped
    searched: bool = False  # searched for non-integers: its parts hold no others

    @property
    def size(self) -> int:
        return self.hi - self.lo


@dataclass(frozen=True)
class _ParseFailure:
    message: str | None = None  # pyarrow's error, when it raised one
    row: int | None = None  # the row pyarrow blamed, counted from the start of the block
    rows: int | None = None  # how many rows it parsed into, when that was more than there are lines

    @property
    def inferred(self) -> bool:
        """Known to fail because the sibling half parsed, but never parsed itself."""
        return self.message is None and self.rows is None


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


def _json_read_field(field: pa.Field) -> pa.Field:
    """How the JSON reader reads a column: dates and timestamps as text, floats as doubles,
    converted afterwards (a double too large for float would silently become infinite)."""
    if field.type == pa.date32() or pa.types.is_timestamp(field.type):
        return field.with_type(pa.string())
    if field.type == pa.float32():
        return field.with_type(pa.float64())
    return field


def _read_json(block: pa.Buffer, read_schema: pa.Schema) -> pa.Table:
    """Newline-delimited JSON in the read types. Raises pa.ArrowInvalid."""
    reader = pa_json.open_json(  # much cheaper per call than read_json, which matters on the error path
        pa.BufferReader(block),
        # One block: the chunk is already in memory, and one block means no straddling.
        read_options=pa_json.ReadOptions(use_threads=False, block_size=min(block.size + 1, _MAX_BLOCK_SIZE)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=read_schema, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )
    return reader.read_all()


def _convert_column(values: pa.Array, final_type: pa.DataType) -> tuple[pa.Array, list[int]]:
    """values in final_type, NULL where they do not convert, and the positions of those."""
    if final_type == pa.string():
        return _converted_where_possible(values, _valid_utf8)  # the JSON reader does not check UTF-8
    if final_type == pa.date32():
        return _converted_where_possible(values, _as_date)
    if pa.types.is_timestamp(final_type):
        return _timestamps_from_text(values)
    if final_type == pa.float32():
        return values.cast(pa.float32()), []  # overflow is found by _unreadable, with its own reason
    return values, []


def _unreadable(column: Column, read_values: pa.Array, array: pa.Array) -> list[tuple[int, str]]:
    """(row, reason) of the values that converted but would not be read back as sent."""
    if array.type == pa.float32():
        return [(row, too_large_for_float(f"field '{column.name}': {read_values[row].as_py()!r}"))
                for row in float_overflow(read_values, array)]
    return [(row, outside_reason(f"field '{column.name}': {_as_sent(read_values[row])}", array.type))
            for row in out_of_range(array)]


def _as_sent(value: pa.Scalar) -> str:
    """A value as the message had it: dates and timestamps are still the text read."""
    return repr(value.as_py()) if pa.types.is_string(value.type) else shown(value)


def _converted_where_possible(values: pa.Array, convert: Callable[[pa.Array], pa.Array]):
    """convert(values), NULL where a value does not convert, and the positions of those."""
    try:
        return convert(values), []
    except pa.ArrowInvalid:
        failed = failing_positions(values, convert)
        return convert(_with_nulls_at(values, failed)), failed


def _valid_utf8(values: pa.Array) -> pa.Array:
    values.validate(full=True)
    return values


def _as_date(text: pa.Array) -> pa.Array:
    return text.cast(pa.date32())


def _as_naive_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("us"))


def _as_utc_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("us", tz="UTC"))


def _timestamps_from_text(text: pa.Array) -> tuple[pa.Array, list[int]]:
    """ISO 8601 text as timestamp[ms]: zoned values converted to UTC, others taken as written.

    Arrow's cast parses either zoned or naive text, never both, so the two are split by
    their ending. Microseconds are read, then truncated to the column's milliseconds.
    """
    zoned = pc.match_substring_regex(text, _ZONED_RE)
    if not pc.any(zoned).as_py():
        times, failed = _converted_where_possible(text, _as_naive_time)
    else:
        no_text = pa.scalar(None, pa.string())
        naive, failed_naive = _converted_where_possible(pc.if_else(zoned, no_text, text), _as_naive_time)
        utc, failed_utc = _converted_where_possible(pc.if_else(zoned, text, no_text), _as_utc_time)
        times, failed = pc.coalesce(naive, utc.cast(pa.timestamp("us"))), sorted(failed_naive + failed_utc)
    # Floor, not the cast's truncation toward zero, so that times before 1970 do not round up.
    return pc.floor_temporal(times, unit="millisecond").cast(pa.timestamp("ms")), failed


def _json_object_candidates(values: Sequence[bytes | None]) -> tuple[Sequence[int], list[tuple[int, str]]]:
    """Indices of the values that start like a JSON object, and errors for the others.

    Screening matters for correctness, not only speed: pyarrow reads a top-level `null`
    as an all-NULL row (or crashes when it comes first), which would misalign the rows.
    """
    binary = pa.array(values, pa.binary())
    starts_ok = pc.match_substring_regex(binary, _JSON_OBJECT_START_RE)
    literals = _non_json_literal_positions(binary)
    if starts_ok.null_count == 0 and pc.all(starts_ok).as_py() and not literals:
        return range(len(values)), []
    flags = pc.and_kleene(starts_ok, mask_without(len(values), literals)).to_pylist()
    errors = [(i, _non_json_literal_reason(values[i]) if starts_ok[i].as_py() else _not_an_object_reason(values[i]))
              for i, ok in enumerate(flags) if not ok]
    return [i for i, ok in enumerate(flags) if ok], errors


def _non_json_literal_positions(binary: pa.BinaryArray) -> list[int]:
    """Positions of the messages using NaN or Infinity as a value, which RapidJSON accepts."""
    hinted = pc.match_substring_regex(binary, _NON_JSON_HINT_RE)
    if not pc.any(hinted).as_py():
        return []
    positions = pc.indices_nonzero(hinted)
    found = pc.match_substring_regex(binary.take(positions), _NON_JSON_LITERAL_RE)
    return positions.filter(found).to_pylist()


def _non_json_literal_reason(value: bytes) -> str:
    match = _NON_JSON_FIELD_RE.search(value)
    literal = match[2].decode() if match else "NaN or Infinity"
    text = f"{literal} is not valid JSON (JSON has no NaN or Infinity); send null"
    if match and match[1] is not None:
        return f"field '{match[1].decode('utf-8', 'replace')}': {text}"
    return f"invalid JSON: {text}"


def _not_an_object_reason(value: bytes | None) -> str:
    text = (value or b"").lstrip(b" \t\r\n")
    if not text:
        return EMPTY_MESSAGE
    first = chr(text[0])
    kind = "number" if first in "-0123456789" else _JSON_KINDS.get(first)
    return f"expected a JSON object, got {kind}" if kind else "invalid JSON: expected a JSON object"


def _not_integers_of(numbers: pa.Array, integer_type: pa.DataType) -> list[int]:
    """Positions of doubles that cannot have been whole numbers of integer_type.

    Strict comparisons with the limits as doubles: 2**63 - 1 rounds up to 2.0**63, so a
    valid maximum must not count as beyond it.
    """
    bits = integer_type.bit_width - (0 if pa.types.is_unsigned_integer(integer_type) else 1)
    low = 0.0 if pa.types.is_unsigned_integer(integer_type) else float(-(2**bits))
    beyond = pc.or_(pc.less(numbers, low), pc.greater(numbers, float(2**bits - 1)))
    fraction = pc.not_equal(pc.floor(numbers), numbers)
    return pc.indices_nonzero(pc.fill_null(pc.or_(beyond, fraction), False)).to_pylist()


def _number_text(number: float) -> str:
    return str(int(number)) if number.is_integer() else repr(number)


def _blamed_row(message: str, rows: int) -> int | None:
    """The row a JSON parse error names; only parse errors name one, conversion errors do not."""
    match = re.search(r" in row (\d+)$", message)
    return int(match[1]) if match and int(match[1]) < rows else None


def _good_indices(candidates: Sequence[int], bad_positions: list[int]) -> pa.Int64Array:
    """The candidates but those at bad_positions: what the parsed tables hold, in order."""
    positions = pc.indices_nonzero(mask_without(len(candidates), bad_positions)).cast(pa.int64())
    return positions if isinstance(candidates, range) else pc.take(pa.array(candidates, pa.int64()), positions)


def _parse_error_detail(message: str) -> str:
    detail = re.sub(r"^JSON parse error: (Column\(\) )?| in row \d+$", "", message)
    if detail.startswith("Invalid encoding in string"):
        # What RapidJSON says about a raw control character (tab, newline) inside a string.
        return f"{detail} (a raw control character inside a string? escape it, e.g. as \\n)"
    return detail


def _value_reason(column: Column, read_values: pa.Array, row: int) -> str:
    try:
        text = read_values[row].as_py()
    except UnicodeDecodeError:
        return f"field '{column.name}': invalid UTF-8"
    return f"field '{column.name}': cannot read {text!r} as {column.hive_type}"


def _conversion_reason(column: Column, message: str) -> str:
    value = re.search(r"couldn't parse:(.*)$", message, re.S)
    if value:
        return f"field '{column.name}': cannot read {value[1]!r} as {column.hive_type}"
    detail = re.sub(r"^Failed to convert JSON to [^:]*: ", "", message)
    return f"field '{column.name}': expected {column.hive_type}: {detail}"
