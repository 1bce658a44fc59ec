"""The json decoder: one JSON object per message, read by pyarrow's C++ reader a whole chunk at
a time, with the bad records isolated by as few re-parses as possible."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa

from etl.model.schema import TableSchema
from etl.rows.decoders.base import Decoded, Decoder, arange, mask_without, skipped_reason
from etl.rows.decoders.json_lines import (
    JsonLines, blamed_row, good_indices, json_object_candidates, json_read_field, parse_error_detail, read_json,
)
from etl.rows.decoders.json_values import (
    conversion_reason, convert_column, not_integers_of, number_text, unreadable, value_reason,
)


class JsonDecoder(Decoder):
    """One JSON object per message; its fields fill the data columns of the same name.

    A missing field is NULL and unknown fields are ignored. The whole chunk is parsed as one
    newline-delimited block. Values the reader does not convert itself (timestamps, dates,
    UTF-8 checks) are converted afterwards, column by column, so a bad one costs no re-parse.
    When the parse itself fails, the bad records are isolated by re-parsing parts of the
    block: cut out at the row a syntax error names, or where a second parse finds numbers
    that do not fit an integer column, or else found by bisection.
    """

    def __init__(self, schema: TableSchema, zone: str = "UTC"):
        super().__init__(schema, zone)
        self.read_schema = pa.schema([json_read_field(field) for field in self.output_schema])

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        candidates, errors, values = json_object_candidates(values)
        lines = JsonLines(values if len(candidates) == len(values) else [values[i] for i in candidates])
        tables, line_errors = self._parse_isolating_errors(lines)
        errors = sorted(errors + [(candidates[position], reason) for position, reason in line_errors])
        good = arange(len(values)) if not errors else good_indices(candidates, [p for p, _ in line_errors])
        return Decoded(pa.concat_tables(tables or [self.output_schema.empty_table()]), good, errors)

    def _parse_isolating_errors(self, lines: JsonLines) -> tuple[list[pa.Table], list[tuple[int, str]]]:
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
            raw = read_json(block, self.read_schema)
        except pa.ArrowInvalid as exc:
            return _ParseFailure(str(exc), blamed_row(str(exc), lines))
        if raw.num_rows != lines:
            # A message holding two JSON values yields two rows; rows would no longer align.
            return _ParseFailure(rows=raw.num_rows)
        return self._convert(raw)

    def _convert(self, raw: pa.Table) -> _Parsed:
        """The read columns in their final types; rows with a value that does not convert are dropped."""
        arrays, bad = [], {}
        for column, field in zip(self.schema.data_columns, self.output_schema):
            read_values = raw.column(field.name).combine_chunks()
            array, failed, skipped = convert_column(read_values, field.type, self.zone)
            for row in skipped:
                bad.setdefault(row, skipped_reason(f"field '{column.name}':", read_values[row].as_py(), self.zone))
            for row in failed:
                bad.setdefault(row, value_reason(column, read_values, row))
            for row, reason in unreadable(column, read_values, array):
                bad.setdefault(row, reason)
            arrays.append(array)
        table = pa.Table.from_arrays(arrays, schema=self.output_schema)
        if bad:
            table = table.filter(mask_without(table.num_rows, list(bad)))
        return _Parsed(table, sorted(bad.items()))

    def _split(self, lines: JsonLines, part: _Range, failure: _ParseFailure, tables, errors) -> list[_Range]:
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

    def _blamed_rows(self, lines: JsonLines, part: _Range, failure: _ParseFailure) -> list[tuple[int, str]]:
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
            raw = read_json(block, relaxed)
        except pa.ArrowInvalid:
            return []
        if raw.num_rows != lines:
            return []  # a message holding two values shifts the rows: they no longer name lines
        bad: dict[int, str] = {}
        for column, field in zip(self.schema.data_columns, self.read_schema):
            if pa.types.is_integer(field.type):
                numbers = raw.column(field.name).combine_chunks()
                for row in not_integers_of(numbers, field.type):
                    shown = number_text(numbers[row].as_py())
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
            return "invalid JSON: " + parse_error_detail(failure.message)
        return self._explain_conversion(line, failure.message) or f"cannot decode: {failure.message}"

    def _explain_conversion(self, line: pa.Buffer, message: str) -> str | None:
        """Which field the reader could not convert: the message names only the type."""
        target = re.match(r"Failed to convert JSON to ([^,:]+)", message)
        suspects = [f for f in self.read_schema if target and str(f.type) == target[1]] or list(self.read_schema)
        for field in suspects:
            try:
                read_json(line, pa.schema([field]))
            except pa.ArrowInvalid as exc:
                return conversion_reason(self.schema.column(field.name), str(exc))
        return None


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
