"""A rollup's partial aggregates of a data file's rows, and partials merged into one row per group:
what one partition-batch writes beside its data file (etl.job.rollup_task), and what the view
folds them into with the same functions in SQL (etl.model.rollup_table).

A time bucket is the start of the minute, hour or day the value falls in, in UTC, as the table
stores its timestamps. Groups follow SQL's GROUP BY: rows whose key is NULL form one group.
`count(*)` counts rows, `count(c)` the rows where c is not NULL; `sum`, `min` and `max` skip
NULLs, and are NULL for a group with no value. Merging partials (a sum of counts and sums, a min
of minimums, a max of maximums) gives what one pass over every row gives.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from etl.config.rollup_terms import Aggregate, Function, GroupKey
from etl.model.rollup_table import folded

_ROWS = "__rows"  # a column of ones that count(*) counts, whatever the other columns hold


def partials(rows: pa.Table, keys: tuple[GroupKey, ...], aggregates: tuple[Aggregate, ...]) -> pa.Table:
    """One row per group of `rows`: its keys, then each aggregate, named as the terms name them."""
    grouped = pa.table({**{key.name: _key_values(rows, key) for key in keys},
                        **{f"__in{i}": rows.column(a.column) for i, a in enumerate(aggregates) if a.column},
                        _ROWS: pa.repeat(pa.scalar(1, pa.int64()), rows.num_rows)})
    specs = [(_input(i, a), a.function.value) for i, a in enumerate(aggregates)]  # Arrow's names too
    return _named(grouped.group_by([key.name for key in keys]).aggregate(specs), keys, aggregates, specs)


def merged(tables: list[pa.Table], keys: tuple[GroupKey, ...], aggregates: tuple[Aggregate, ...]) -> pa.Table:
    """Partials (each `partials`' shape) folded into one row per group."""
    return folded(tables, [key.name for key in keys], [(a.name, a.function.merged_by.value) for a in aggregates])


def _key_values(rows: pa.Table, key: GroupKey):
    values = rows.column(key.column)
    if key.bucket is None:
        return values
    return pc.floor_temporal(values, unit=key.bucket.value)  # minute, hour, day: Arrow's names too


def _input(index: int, aggregate: Aggregate) -> str:
    return _ROWS if aggregate.column is None else f"__in{index}"


def _named(found: pa.Table, keys: tuple[GroupKey, ...], aggregates: tuple[Aggregate, ...], specs) -> pa.Table:
    """Arrow names an aggregate `<column>_<function>`: the terms' names instead, keys first."""
    columns = {key.name: found.column(key.name) for key in keys}
    for aggregate, (column, function) in zip(aggregates, specs):
        value = found.column(f"{column}_{function}")
        columns[aggregate.name] = value.cast(pa.int64()) if aggregate.function is Function.COUNT else value
    return pa.table(columns)
