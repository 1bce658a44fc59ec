"""A rollup's two Hive objects: the table of its partials, and the view analysts query.

Each partition-batch writes one partials file (etl.job.rollup_task): a row per group of its
rows, keys first, then each aggregate's partial. The table `<rollup>_partials` holds those files,
partitioned as the rollup's source table is, one file per data file under the data file's own
name (a range's, so that a replay finds its partial in place as it finds its data file; a
merged file's, whose partial a compaction folds: etl.compaction.partials). The view `<rollup>` folds
them: a sum of counts and sums, a min of minimums, a max of maximums, grouped by the keys.

A partial column's type: a time bucket is a timestamp; count is bigint; sum is bigint over
integers, double over floats, decimal(38,s) over decimal(p,s) (so that adding cannot overflow
where one file's sum did not); min and max keep their column's type.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa

from etl.config.model import HiveFormat
from etl.config.rollup_filter import columns_of
from etl.config.rollup_terms import Aggregate, Function
from etl.config.rollups import RollupConfig
from etl.model.schema import Column, TableSchema

PARTIALS_FORMAT = HiveFormat.PARQUET  # the partials table is STORED AS PARQUET whatever its source's format
_INTEGERS = ("tinyint", "smallint", "int", "bigint")


@dataclass(frozen=True)
class RollupSpec:
    """A rollup as the tasks and the registrar need it: its terms, and its partials' columns
    typed from its source table's DDL (built once, when the job starts: etl.job.assemble)."""

    rollup: RollupConfig
    source_table: str  # the table whose rows it reads
    columns: tuple[Column, ...]  # the partials' columns: keys, then aggregates
    partition_columns: tuple[Column, ...]  # the source table's

    @classmethod
    def of(cls, rollup: RollupConfig, source_table: str, source: TableSchema) -> "RollupSpec":
        types = {column.name: column.hive_type for column in source.columns}
        keys = tuple(Column(key.name, "timestamp" if key.bucket else types[key.column]) for key in rollup.group_by)
        values = tuple(Column(a.name, _partial_type(a, types)) for a in rollup.aggregates)
        return cls(rollup, source_table, keys + values, source.partition_columns)

    @property
    def definition(self) -> str:
        """What the partials were computed by, kept as the partials table's etl.rollup property:
        files computed by another definition, or of another table's rows (the job moved by `etl
        bind`), would not add up with this one's (etl.hive.registrar)."""
        rollup = self.rollup
        terms = repr((self.source_table, rollup.where, rollup.group_by, rollup.aggregates, self.columns))
        return hashlib.sha256(terms.encode()).hexdigest()[:16]

    @property
    def partials_table(self) -> str:
        return self.rollup.partials_table

    @property
    def view(self) -> str:
        return self.rollup.table

    @property
    def source_columns(self) -> list[str]:
        """The source table's columns a partial is computed from."""
        named = {key.column for key in self.rollup.group_by} | {a.column for a in self.rollup.aggregates if a.column}
        return sorted(named | (columns_of(self.rollup.where) if self.rollup.where is not None else set()))

    def ddl_template(self) -> str:
        """The partials table's DDL, with ${database}, ${table} and ${location} (etl.model.table_ddl)."""
        columns = ",\n".join(f"  `{c.name}` {c.hive_type}" for c in self.columns)
        partitions = ", ".join(f"`{c.name}` {c.hive_type}" for c in self.partition_columns)
        return (f"CREATE EXTERNAL TABLE IF NOT EXISTS ${{database}}.${{table}} (\n{columns}\n)\n"
                f"PARTITIONED BY ({partitions})\nSTORED AS PARQUET\nLOCATION '${{location}}'\n")

    def view_sql(self, database: str) -> str:
        """CREATE VIEW of the merged partials: one row per group."""
        keys = [f"`{key.name}`" for key in self.rollup.group_by]
        merged = [f"{a.function.merged_by.value.upper()}(`{a.name}`) AS `{a.name}`" for a in self.rollup.aggregates]
        return (f"CREATE VIEW IF NOT EXISTS `{database}`.`{self.view}` AS SELECT {', '.join(keys + merged)} "
                f"FROM `{database}`.`{self.partials_table}` GROUP BY {', '.join(keys)}")


def partial_name(stem: str) -> str:
    """A range's partials file: its data file's stem (topic+partition+from+until), as Parquet."""
    return f"{stem}.{PARTIALS_FORMAT.value}"


def _partial_type(aggregate: Aggregate, types: dict[str, str]) -> str:
    if aggregate.function is Function.COUNT:
        return "bigint"
    kind = types[aggregate.column or ""]
    if aggregate.function is Function.SUM:
        if kind in _INTEGERS:
            return "bigint"
        if kind.startswith("decimal"):
            return f"decimal(38,{kind.rstrip(')').split(',')[1]})" if "," in kind else "decimal(38,0)"
        return "double"
    return kind


def folded(tables: list[pa.Table], keys: list[str], merges: list[tuple[str, str]]) -> pa.Table:
    """Partials folded into one row per group by their column names and merge functions, each
    column in the first table's type, keys first: a batch's (etl.rows.rollup_partials.merged), and
    a compaction's, whose record holds the names and functions (etl.model.compaction.PartialsFold)."""
    whole = pa.concat_tables(tables)  # of one schema: the caller casts them to it
    found = whole.group_by(keys).aggregate(list(merges))
    columns = {key: found.column(key) for key in keys}
    columns |= {name: found.column(f"{name}_{function}") for name, function in merges}
    return pa.table(columns).cast(pa.schema([whole.schema.field(name) for name in columns]))
