"""[job] header_columns: which Kafka record headers fill which columns of the table.

Written `header:column, header:column`. A header name is whatever precedes the entry's last
':' (Kafka allows any string, ':' included, but not ',' here, which separates entries); the
column is a plain Hive column name. The columns are checked against the DDL at start-up
(etl.rows.headers), where the table is known.
"""
from __future__ import annotations

from etl.config.model import HIVE_NAME_RE, HeaderColumn


def header_columns(raw: str) -> tuple[HeaderColumn, ...]:
    entries = tuple(_entry(item.strip()) for item in raw.split(",") if item.strip())
    columns = [entry.column for entry in entries]
    repeated = sorted({column for column in columns if columns.count(column) > 1})
    if repeated:
        raise ValueError(f"column {repeated[0]!r} is filled by two headers; give each header a column of its own")
    return entries


def _entry(item: str) -> HeaderColumn:
    header, colon, column = item.rpartition(":")
    header, column = header.strip(), column.strip()
    if not colon or not header:
        raise ValueError(f"{item!r} is not header:column (e.g. trace_id:trace_id); name the Kafka header, then "
                         f"the string or binary column it fills")
    if not HIVE_NAME_RE.match(column):
        raise ValueError(f"{item!r}: {column!r} is not a column name (letters, digits and _)")
    return HeaderColumn(header, column)
