"""Kafka record headers into columns ([job] header_columns): checked against the DDL at start-up,
picked from each chunk in one pass, and refused where a string column cannot hold the bytes.

The ETL fills these columns, not the decoder (which never sees them), as it fills the key
column. Kafka lets a header name repeat within a record: the last value counts, as with Kafka's
own Headers.lastHeader. A record without the header gets NULL. A value that is not UTF-8,
for a string column, sends the record to the rejected table with the header named: it is
never dropped, and never fails the batch.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from etl.config import HeaderColumn
from etl.errors import ConfigError
from etl.model.schema import LINEAGE_COLUMNS, TableSchema
from etl.rows.decoders import invalid_utf8_positions

HEADER_COLUMN_TYPES = ("string", "binary")
RecordHeaders = Sequence[tuple[str, bytes | None]] | None  # one record's, as confluent-kafka gives them


def check_header_columns(header_columns: tuple[HeaderColumn, ...], schema: TableSchema, enriched: Iterable[str],
                         config_path, ddl_file) -> None:
    """Start-up: each header fills a string or binary column of the DDL that nothing else fills."""
    declared = {c.name: c.hive_type for c in schema.columns}
    lineage, enriched = {c.name for c in LINEAGE_COLUMNS}, set(enriched)
    for entry in header_columns:
        where = f"{config_path}: [job] header_columns: {entry.header}:{entry.column}:"
        if entry.column not in declared:
            raise ConfigError(f"{where} column {entry.column!r} is not declared in {ddl_file}; add "
                              f"'{entry.column} string' (or binary) to its column list")
        if entry.column in lineage or entry.column == schema.key_column:
            raise ConfigError(f"{where} {entry.column!r} is a lineage or the key column, which the ETL fills from "
                              f"the record itself; choose another column")
        if entry.column in enriched:
            raise ConfigError(f"{where} {entry.column!r} is filled by a dimension; choose another column")
        if declared[entry.column] not in HEADER_COLUMN_TYPES:
            raise ConfigError(f"{where} column {entry.column!r} is {declared[entry.column]} in {ddl_file}; a header "
                              f"column must be string (the value as UTF-8 text) or binary (the bytes as sent)")


def header_values(headers: Sequence[RecordHeaders], names: Iterable[str]) -> dict[str, pa.BinaryArray]:
    """Per wanted header name, each record's value: its last occurrence, NULL where it has none.
    One Python pass over the chunk's headers; everything after it is vectorised."""
    picked: dict[str, list[bytes | None]] = {name: [None] * len(headers) for name in names}
    for index, record in enumerate(headers):
        for name, value in record or ():
            values = picked.get(name)
            if values is not None:
                values[index] = value  # a later occurrence replaces an earlier one
    return {name: pa.array(values, pa.binary()) for name, values in picked.items()}


def not_utf8_reason(entry: HeaderColumn) -> str:
    return (f"kafka header {entry.header!r} is not valid UTF-8; declare column {entry.column} as binary to keep "
            f"such values")


def invalid_header_rows(values: dict[str, pa.BinaryArray], header_columns: tuple[HeaderColumn, ...],
                        string_columns: set[str], good: pa.Int64Array) -> list[tuple[int, str]]:
    """(position in `good`, reason) of each record whose header cannot fill its string column;
    a record bad in several headers is named once, by the first."""
    bad: dict[int, str] = {}
    for entry in header_columns:
        if entry.column in string_columns:
            for position in invalid_utf8_positions(pc.take(values[entry.header], good)):
                bad.setdefault(position, not_utf8_reason(entry))
    return sorted(bad.items())
