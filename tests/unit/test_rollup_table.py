"""A rollup's partials table and view (etl.model.rollup_table), and a range's partial computed
from a data file's columns (etl.job.rollup_task.partial_rows): the types that keep sums from
overflowing, the filter, and the DDL and view text the registrar runs."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from etl.config.rollup_filter import parse_filter
from etl.config.rollup_terms import parse_aggregates, parse_group_by
from etl.config.rollups import RollupConfig
from etl.job.rollup_task import partial_rows
from etl.model.rollup_table import RollupSpec, partial_name
from etl.model.schema import Column, TableSchema

SOURCE = TableSchema((Column("n", "int"), Column("price", "decimal(10,2)"), Column("ratio", "float"),
                      Column("level", "string"), Column("ts", "timestamp"), Column("day", "date")),
                     (Column("dt", "string"), Column("hour", "string")))


def _spec(group_by: str, aggregates: str, where: str | None = None) -> RollupSpec:
    rollup = RollupConfig("r", "per_minute", "", parse_filter(where) if where else None, parse_group_by(group_by),
                          parse_aggregates(aggregates))
    return RollupSpec.of(rollup, "events", SOURCE)


def test_partial_columns_are_typed_so_that_adding_partials_cannot_overflow():
    spec = _spec("minute(ts), level, day(day)", "count(*) as rows, count(n) as ns, sum(n) as n_sum, "
                 "sum(price) as spent, sum(ratio) as ratios, min(ts) as first, max(level) as last")
    assert [(c.name, c.hive_type) for c in spec.columns] == [
        ("ts_minute", "timestamp"), ("level", "string"), ("day_day", "timestamp"), ("rows", "bigint"),
        ("ns", "bigint"), ("n_sum", "bigint"), ("spent", "decimal(38,2)"), ("ratios", "double"),
        ("first", "timestamp"), ("last", "string")]
    assert spec.source_columns == ["day", "level", "n", "price", "ratio", "ts"]
    assert partial_name("t+0+00000000000000000000+00000000000000000150") == \
        "t+0+00000000000000000000+00000000000000000150.parquet"


def test_the_ddl_and_the_view_name_every_column_and_merge_each_aggregate_its_own_way():
    spec = _spec("minute(ts), level", "count(*) as rows, sum(n) as total, min(ts) as first, max(n) as top")
    ddl = spec.ddl_template()
    assert "`ts_minute` timestamp" in ddl and "`total` bigint" in ddl
    assert "PARTITIONED BY (`dt` string, `hour` string)" in ddl and "STORED AS PARQUET" in ddl
    assert spec.view_sql("db") == (
        "CREATE VIEW IF NOT EXISTS `db`.`per_minute` AS SELECT `ts_minute`, `level`, SUM(`rows`) AS `rows`, "
        "SUM(`total`) AS `total`, MIN(`first`) AS `first`, MAX(`top`) AS `top` FROM `db`.`per_minute_partials` "
        "GROUP BY `ts_minute`, `level`")


def test_the_definition_changes_with_any_term_and_only_with_them():
    base = _spec("minute(ts)", "count(*) as rows", "level = 'ERROR'")
    assert base.definition == _spec("minute(ts)", "count(*) as rows", "level = 'ERROR'").definition
    others = [_spec("hour(ts)", "count(*) as rows", "level = 'ERROR'"),
              _spec("minute(ts)", "count(n) as rows", "level = 'ERROR'"),
              _spec("minute(ts)", "count(*) as rows", "level = 'WARN'"),
              _spec("minute(ts)", "count(*) as rows")]
    moved = RollupSpec.of(base.rollup, "events_v2", SOURCE)  # the job bound to another table
    assert len({base.definition, moved.definition, *(o.definition for o in others)}) == 6


def test_a_partial_of_a_data_file_s_columns_filters_groups_and_sums_in_the_partial_s_type():
    at = dt.datetime(2026, 11, 29, 10, 0, 5)
    rows = pa.table({
        "n": pa.array([2**31 - 1, 2**31 - 1, 5, None], pa.int32()),
        "price": pa.array([Decimal("99999999.99")] * 3 + [None], pa.decimal128(10, 2)),
        "level": ["ERROR", "ERROR", "ERROR", "INFO"],
        "ts": pa.array([at, at + dt.timedelta(seconds=30), at + dt.timedelta(minutes=1), at], pa.timestamp("us")),
    })
    spec = _spec("minute(ts)", "count(*) as rows, count(n) as ns, sum(n) as total, sum(price) as spent, "
                 "max(n) as top", "level = 'ERROR'")
    found = partial_rows(spec, rows).sort_by("ts_minute").to_pylist()
    assert found == [
        {"ts_minute": dt.datetime(2026, 11, 29, 10, 0), "rows": 2, "ns": 2, "total": 2 * (2**31 - 1),
         "spent": Decimal("199999999.98"), "top": 2**31 - 1},
        {"ts_minute": dt.datetime(2026, 11, 29, 10, 1), "rows": 1, "ns": 1, "total": 5,
         "spent": Decimal("99999999.99"), "top": 5}]
    assert partial_rows(spec, rows.slice(3)).num_rows == 0  # no row kept: an empty partial, still a file


def test_a_sum_of_a_decimal_too_wide_to_add_up_in_decimal_38_is_refused_naming_the_key():
    from etl.model.rollup_columns import rollup_column_problem
    wide = TableSchema((Column("big", "decimal(38,2)"), Column("fits", "decimal(28,2)"), Column("ts", "timestamp")),
                       ())
    rollup = RollupConfig("r", "r", "", None, parse_group_by("hour(ts)"), parse_aggregates("sum(big) as big"))
    key, why = rollup_column_problem(rollup, wide)
    assert key == "aggregates" and "sum(big): big is decimal(38,2)" in why and "decimal(28,s)" in why
    fits = RollupConfig("r", "r", "", None, parse_group_by("hour(ts)"), parse_aggregates("sum(fits) as s"))
    assert rollup_column_problem(fits, wide) is None
