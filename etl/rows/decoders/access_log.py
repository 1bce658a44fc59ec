"""The access_log decoder: log4j-style lines '<date> <time> <LEVEL> <message>', matched by one
regex kernel over the whole chunk."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from etl.errors import SchemaError
from etl.model.schema import Column, TableSchema
from etl.rows.decoders.base import (
    EMPTY_MESSAGE, Decoded, Decoder, converted_where_possible, invalid_utf8_positions, mask_without, skipped_reason,
    wall_clock_to_utc,
)
from etl.rows.hive_values import out_of_range, outside_reason

ACCESS_LOG_FORMAT = "<date> <time> <LEVEL> <message>"
ACCESS_LOG_COLUMNS = (Column("log_time", "timestamp"), Column("level", "string"), Column("message", "string"))
# Padding after the level is log4j's %-5p. A greedy, unanchored-at-the-end message keeps RE2
# on its fast path (a lazy .*? with \r?\n?$ is ~7x slower); the line end is cut off after.
_ACCESS_LOG_RE = (
    r"(?s)^(?P<log_time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) +(?P<level>[A-Z]+)"
    r"(?:(?: +(?P<message>.*))|\r?\n)?$"
)
_LINE_END_RE = r"\r?\n$"


class AccessLogDecoder(Decoder):
    """Log lines '<date> <time> <LEVEL> <message>' into log_time, level and message."""

    def __init__(self, schema: TableSchema, zone: str = "UTC"):
        super().__init__(schema, zone)
        _check_access_log_columns(schema)

    def decode(self, values: Sequence[bytes | None]) -> Decoded:
        fields = pc.extract_regex(pa.array(values, pa.binary()), _ACCESS_LOG_RE)  # null where no match
        matched = fields.is_valid()
        time_text = pc.if_else(matched, fields.field("log_time").cast(pa.string()), pa.scalar(None, pa.string()))
        # The cast's ISO parser refuses 2017-02-30; pc.strptime would roll it over to March 2.
        times, bad_time = converted_where_possible(time_text, _as_log_time)
        times, skipped = wall_clock_to_utc(times, self.zone)  # log lines carry no zone
        bad_time = sorted(bad_time + skipped)
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
        errors = _access_log_errors(values, matched, good_mask, time_text, set(bad_utf8), set(unreadable),
                                    set(skipped), self.zone)
        return Decoded(table, good, errors)


def _access_log_errors(values, matched, good_mask, time_text, bad_utf8: set[int], unreadable: set[int],
                       skipped: set[int], zone: str) -> list[tuple[int, str]]:
    def reason(index: int) -> str:
        if not values[index]:
            return EMPTY_MESSAGE
        if not matched[index].as_py():
            return f"line does not match '{ACCESS_LOG_FORMAT}'"
        if index in bad_utf8:
            return "message is not valid UTF-8"
        if index in skipped:
            return skipped_reason("log time", time_text[index].as_py(), zone)
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


def _as_log_time(text: pa.Array) -> pa.Array:
    return text.cast(pa.timestamp("ms"))
