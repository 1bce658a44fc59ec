"""A rollup kept in PostgreSQL (etl.postgres, etl.job.rollup_mirror) without a server: its SQL, and
what each position of the database's offsets makes a batch's transaction do. The transactions
themselves run against a real PostgreSQL in tests/integration/test_rollups.py."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from etl.config.rollup_filter import parse_filter
from etl.config.rollup_terms import parse_aggregates, parse_group_by
from etl.config.rollups import RollupConfig
from etl.errors import ConfigError, RollupRefused
from etl.job.rollup_mirror import Gap, plan_moves, refuse_ahead
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.naming import FileRange
from etl.model.rollup_table import RollupSpec
from etl.model.schema import Column, TableSchema
from etl.ops.rollup_postgres import offset_problems, row_problems
from etl.postgres.positions import OffsetMove, Position, as_rows
from etl.postgres.statements import create_table, pg_type, upsert

SOURCE = TableSchema((Column("level", "string"), Column("ts", "timestamp"), Column("price", "decimal(10,2)"),
                      Column("n", "int")), (Column("dt", "string"),))
RANGES = (OffsetRange("t", 0, 100, 150, 100), OffsetRange("t", 1, 40, 40, 40), OffsetRange("t", 2, 7, 9, None))


def _spec() -> RollupSpec:
    rollup = RollupConfig("per_minute", "per_minute", "", parse_filter("level = 'ERROR'"),
                          parse_group_by("minute(ts), level"),
                          parse_aggregates("count(*) as errors, sum(price) as total, min(n) as low, max(ts) as last"))
    return RollupSpec.of(rollup, "events", SOURCE)


def test_the_table_keys_its_groups_nulls_not_distinct_and_the_upsert_merges_each_aggregate_its_own_way():
    spec = _spec()
    assert create_table(spec) == ('CREATE TABLE "per_minute" ("ts_minute" timestamp, "level" text, "errors" bigint, '
                                  '"total" numeric(38,2), "low" integer, "last" timestamp, '
                                  'UNIQUE NULLS NOT DISTINCT ("ts_minute", "level"))')
    statement = upsert(spec)
    assert 'ON CONFLICT ("ts_minute", "level") DO UPDATE SET' in statement
    assert '"errors" = COALESCE(t."errors" + EXCLUDED."errors", t."errors", EXCLUDED."errors")' in statement
    assert '"low" = LEAST(t."low", EXCLUDED."low")' in statement and 'GREATEST(t."last", EXCLUDED."last")' in statement


def test_a_type_without_a_postgres_column_is_refused_naming_the_rollup():
    assert pg_type("varchar(12)", "r") == "text" and pg_type("tinyint", "r") == "smallint"
    with pytest.raises(ConfigError, match=r"\[rollup r\] target: a column of type array<int>"):
        pg_type("array<int>", "r")


def test_at_each_start_every_range_moves_and_a_new_partition_catches_up_from_the_table():
    positions = {("t", 0): Position(100, 3), ("t", 1): Position(40, 3)}
    plan = plan_moves(_spec(), 4, RANGES, positions, "db")
    assert plan is not None and plan.moves == (OffsetMove("t", 0, 100, 150), OffsetMove("t", 1, 40, 40),
                                               OffsetMove("t", 2, None, 9))
    assert plan.gaps == (Gap("t", 2, "", None, 7),)  # the partials of t:2 before 7, if the table holds any


def test_a_batch_the_database_holds_already_adds_nothing():
    positions = {("t", 0): Position(150, 4), ("t", 1): Position(40, 4), ("t", 2): Position(9, 4)}
    assert plan_moves(_spec(), 4, RANGES, positions, "db") is None


def test_a_database_behind_catches_up_the_ranges_between_of_the_same_incarnation():
    plan = plan_moves(_spec(), 4, RANGES[:1], {("t", 0): Position(60, 2)}, "db")
    assert plan is not None and plan.moves == (OffsetMove("t", 0, 60, 150),)
    assert plan.gaps == (Gap("t", 0, "", 60, 100),)
    gap = plan.gaps[0]
    assert gap.holds(FileRange("t", 0, 60, 80)) and gap.holds(FileRange("t", 0, 80, 100))
    assert not gap.holds(FileRange("t", 0, 40, 60)) and not gap.holds(FileRange("t", 0, 100, 150))
    assert not gap.holds(FileRange("t", 0, 60, 80, "i2")) and not gap.holds(FileRange("t", 1, 60, 80))
    # a partial folded by `etl compact` across the gap's edge: neither added nor skipped, refused
    assert gap.overlaps(FileRange("t", 0, 40, 80)) and not gap.holds(FileRange("t", 0, 40, 80))
    assert not gap.overlaps(FileRange("t", 0, 0, 60)) and not gap.overlaps(FileRange("t", 0, 100, 150))


@pytest.mark.parametrize("position", [Position(120, 2), Position(150, 3)])  # past its start: another batch's
def test_a_database_past_a_range_s_start_is_refused_naming_the_rebuild(position):
    with pytest.raises(RollupRefused, match=r"holds t:0 up to offset .*etl rollup rebuild --rollup per_minute"):
        plan_moves(_spec(), 4, RANGES[:1], {("t", 0): position}, "db")


def test_before_a_batch_only_the_open_batch_s_own_transaction_may_be_past_zookeeper():
    opened = Batch(4, BatchState.REGISTERED, "now", {"dt": "2026-11-30"}, RANGES)
    refuse_ahead(_spec(), {("t", 0): Position(100, 3)}, {("t", 0): 100}, None, "db")
    refuse_ahead(_spec(), {("t", 0): Position(150, 4)}, {("t", 0): 100}, opened, "db")
    for position, committed in ((Position(150, 3), {("t", 0): 100}), (Position(5, 1), {})):
        with pytest.raises(RollupRefused, match="past ZooKeeper's committed offset"):
            refuse_ahead(_spec(), {("t", 0): position}, committed, opened, "db")


def test_rows_go_to_the_database_in_utc_without_a_zone():

    table = pa.table({"ts": pa.array([dt.datetime(2026, 11, 30, 10, 1)], pa.timestamp("us", tz="UTC")),
                      "n": [3]})
    assert as_rows(table) == [(dt.datetime(2026, 11, 30, 10, 1), 3)]


def test_verify_names_offsets_past_zookeeper_but_the_open_batch_s_own_and_rows_unlike_the_partials():
    opened = Batch(4, BatchState.REGISTERED, "now", {"dt": "2026-11-30"}, RANGES)
    positions = {("t", 0): Position(150, 4), ("t", 1): Position(40, 3), ("t", 2): Position(90, 3)}
    found = offset_problems(_spec(), "db t", positions, {("t", 0): 100, ("t", 1): 40, ("t", 2): 9}, opened)
    assert [(p.kind, p.detail.split(": ")[1]) for p in found] == [
        ("rollup_postgres_ahead", "the database holds t:2 up to offset 90, past ZooKeeper's 9")]
    minute = dt.datetime(2026, 11, 30, 10, 1)
    held = [(minute, "ERROR", 3, 0.1 + 0.2, 1, minute), (minute, None, 1, 1.0, 2, minute)]
    assert row_problems(_spec(), "db t", held, [(minute, "ERROR", 3, 0.3, 1, minute),
                                                (minute, None, 1, 1.0, 2, minute)]) == []  # a float's last bits
    found = row_problems(_spec(), "db t", held, [(minute, "ERROR", 4, 0.3, 1, minute)])
    assert len(found) == 1 and found[0].kind == "rollup_postgres_differs" and "2 groups differ" in found[0].detail
