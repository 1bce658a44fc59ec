"""The SQL of a rollup's PostgreSQL tables: its own, one row per group, and the two the job keeps
beside every rollup, the offsets it holds and the definition it was built by.

A group's keys are UNIQUE NULLS NOT DISTINCT (PostgreSQL 15): a NULL key is one group, as in
Hive's GROUP BY, and the upsert's ON CONFLICT finds it. Merging an incoming partial into a row
is what the Hive view does over partials: a sum of counts and sums (a NULL sum is no value),
LEAST of minimums, GREATEST of maximums (both skip NULLs).
"""
from __future__ import annotations

import re

from etl.config.rollup_terms import Function
from etl.errors import ConfigError
from etl.model.rollup_table import RollupSpec

OFFSETS_TABLE = "etl_rollup_offsets"
DEFINITIONS_TABLE = "etl_rollups"
_PLAIN = {"tinyint": "smallint", "smallint": "smallint", "int": "integer", "bigint": "bigint", "float": "real",
          "double": "double precision", "boolean": "boolean", "string": "text", "date": "date",
          "timestamp": "timestamp", "binary": "bytea"}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")
_TEXT = re.compile(r"^(varchar|char)\(\d+\)$")

SHARED_DDL = (
    f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (rollup_table text NOT NULL, topic text NOT NULL, "
    f"kafka_partition integer NOT NULL, next_offset bigint NOT NULL, batch_id bigint NOT NULL, "
    f"PRIMARY KEY (rollup_table, topic, kafka_partition))",
    f"CREATE TABLE IF NOT EXISTS {DEFINITIONS_TABLE} (rollup_table text PRIMARY KEY, job text NOT NULL, "
    f"definition text NOT NULL)",
)


def pg_type(hive_type: str, rollup: str) -> str:
    """The PostgreSQL type of a partials column of Hive type `hive_type`."""
    kind = hive_type.strip().lower()
    if kind in _PLAIN:
        return _PLAIN[kind]
    if _DECIMAL.match(kind) or kind == "decimal":
        return kind.replace("decimal", "numeric")
    if _TEXT.match(kind):
        return "text"
    raise ConfigError(f"[rollup {rollup}] target: a column of type {hive_type} has no PostgreSQL type here")


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_table(spec: RollupSpec) -> str:
    columns = ", ".join(f"{quoted(c.name)} {pg_type(c.hive_type, spec.rollup.name)}" for c in spec.columns)
    keys = ", ".join(quoted(key.name) for key in spec.rollup.group_by)
    return f"CREATE TABLE {quoted(spec.view)} ({columns}, UNIQUE NULLS NOT DISTINCT ({keys}))"


def upsert(spec: RollupSpec) -> str:
    """INSERT … ON CONFLICT DO UPDATE of one merged row, its columns in `spec.columns`' order."""
    names = [quoted(c.name) for c in spec.columns]
    keys = ", ".join(quoted(key.name) for key in spec.rollup.group_by)
    merges = ", ".join(f"{quoted(a.name)} = {_merge(a.function, quoted(a.name))}" for a in spec.rollup.aggregates)
    return (f"INSERT INTO {quoted(spec.view)} AS t ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))}) "
            f"ON CONFLICT ({keys}) DO UPDATE SET {merges}")


def _merge(function: Function, column: str) -> str:
    if function is Function.MIN:
        return f"LEAST(t.{column}, EXCLUDED.{column})"
    if function is Function.MAX:
        return f"GREATEST(t.{column}, EXCLUDED.{column})"
    return f"COALESCE(t.{column} + EXCLUDED.{column}, t.{column}, EXCLUDED.{column})"  # count, sum
