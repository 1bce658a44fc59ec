"""A rollup's columns against its table's DDL: each column it names exists, with a type its term
takes. Checked when the job starts (etl.job.assemble), before anything is read or written."""
from __future__ import annotations

from etl.config.rollup_filter import columns_of
from etl.config.rollup_terms import Function, TimeBucket
from etl.config.rollups import RollupConfig
from etl.model.schema import TableSchema

_NESTED = ("array", "map", "struct")
MAX_SUMMED_PRECISION = 28  # a sum is decimal(38,s): room for 10**10 values of the largest such decimal
_NUMBERS = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def rollup_column_problem(rollup: RollupConfig, schema: TableSchema) -> tuple[str, str] | None:
    """(the key at fault, why) for the first column the rollup cannot use; None when all can be."""
    types = {column.name: column.hive_type for column in schema.columns}
    named = [("where", name) for name in sorted(columns_of(rollup.where))] if rollup.where is not None else []
    named += [("group_by", key.column) for key in rollup.group_by]
    named += [("aggregates", a.column) for a in rollup.aggregates if a.column is not None]
    for key, name in named:
        if name not in types:
            return key, f"{name!r} is not a column of the table; its columns: {', '.join(types)}"
    for group in rollup.group_by:
        kind = types[group.column]
        if group.bucket is not None and not (kind == "timestamp" or kind == "date" and group.bucket is TimeBucket.DAY):
            return "group_by", (f"{group.bucket.value}({group.column}): {group.column} is {kind}; a time bucket takes "
                                f"a timestamp column (day also a date)")
        if group.bucket is None and kind.startswith((*_NESTED, "binary")):
            return "group_by", f"{group.column} is {kind}, which a group key cannot be"
    for aggregate in rollup.aggregates:
        kind = types.get(aggregate.column or "", "")
        if aggregate.function is Function.SUM and not kind.startswith(_NUMBERS):
            return "aggregates", f"sum({aggregate.column}): {aggregate.column} is {kind}; sum takes a number column"
        if aggregate.function is Function.SUM and _precision(kind) > MAX_SUMMED_PRECISION:
            return "aggregates", (f"sum({aggregate.column}): {aggregate.column} is {kind}; its sums are "
                                  f"decimal(38,s), which leaves a decimal of more than {MAX_SUMMED_PRECISION} digits "
                                  f"too little room: a batch's sum could overflow and stop the job. Sum a column "
                                  f"of at most decimal({MAX_SUMMED_PRECISION},s)")
        if aggregate.function in (Function.MIN, Function.MAX) and kind.startswith((*_NESTED, "binary")):
            return "aggregates", (f"{aggregate.function.value}({aggregate.column}): {aggregate.column} is {kind}, "
                                  f"which has no order")
    return None


def _precision(hive_type: str) -> int:
    """A decimal(p,s)'s p; 0 for any other type."""
    return int(hive_type[len("decimal("):].split(",")[0].rstrip(")")) if hive_type.startswith("decimal(") else 0
