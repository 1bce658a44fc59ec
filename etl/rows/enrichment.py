"""Enrichment by lookup: each record's join_key looked up in a dimension, its columns added.

Runs in the Spark task, on each decoded chunk, vectorised: one hash lookup of the chunk's keys
in the dimension's (unique) keys gives, per row, the matching dimension row or NULL; `take`
then gathers the dimension's columns in the chunk's own row order. That is a left outer join
on a unique key that keeps the rows aligned with their Kafka offsets without the row-number
column and re-sort that Table.join (whose output order is unspecified) would need.

The start-up checks against the DDL live here too: which columns a dimension may fill.
"""
from __future__ import annotations

from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from etl.config import DimensionConfig
from etl.errors import ConfigError
from etl.model.schema import LINEAGE_COLUMNS, TableSchema


def enriched_columns(dimensions: tuple[DimensionConfig, ...]) -> tuple[str, ...]:
    """The table columns the joined dimensions fill (the decoder leaves them to enrichment)."""
    return tuple(column for d in dimensions if d.joined for column in d.columns)


def enrich(rows: pa.Table, dimensions: tuple[DimensionConfig, ...],
           tables: Mapping[str, pa.Table]) -> tuple[pa.Table, dict[str, int]]:
    """`rows` (the file schema) with each joined dimension's columns filled in, and per
    dimension the number of rows whose key found no match (their columns stay NULL)."""
    unmatched = {}
    for dimension in dimensions:
        if not dimension.joined:
            continue
        table = tables[dimension.name]
        positions = pc.index_in(rows.column(dimension.join_key), value_set=table.column(dimension.dimension_key))
        unmatched[dimension.name] = positions.null_count
        for name in dimension.columns:
            index = rows.schema.get_field_index(name)
            rows = rows.set_column(index, rows.schema.field(index), table.column(name).take(positions))
    return rows, unmatched


def check_against_schema(dimensions: tuple[DimensionConfig, ...], schema: TableSchema, config_path,
                         ddl_file) -> None:
    """Start-up: every joined dimension reads an event column and fills declared columns."""
    enriched = set(enriched_columns(dimensions))
    owned = {c.name for c in LINEAGE_COLUMNS} | {schema.key_column}
    declared = {c.name: c.hive_type for c in schema.columns}
    for dimension in dimensions:
        if not dimension.joined:
            continue
        where = f"{config_path}: [dimension {dimension.name}]"
        if dimension.join_key not in declared:
            raise ConfigError(f"{where} join_key: {dimension.join_key!r} is not a column of {ddl_file}; name the "
                              f"event column whose value is looked up")
        if dimension.join_key in enriched:
            raise ConfigError(f"{where} join_key: {dimension.join_key!r} is itself filled by a dimension; join on "
                              f"a column the decoder fills")
        for name in dimension.columns:
            if name not in declared:
                raise ConfigError(f"{where} columns: {name!r} is not declared in {ddl_file}; add '{name} <type>' "
                                  f"to its column list, with a type the source's values can be cast to without loss")
            if name in owned:
                raise ConfigError(f"{where} columns: {name!r} is a lineage or key column, which the ETL fills; "
                                  f"choose another column")
