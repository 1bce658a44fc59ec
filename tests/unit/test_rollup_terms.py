"""A rollup's group keys and aggregates (etl.config.rollup_terms): what they parse into, how each
aggregate merges, and a clear message for each kind of mistake."""
from __future__ import annotations

import pytest

from etl.config.rollup_terms import (Aggregate, Function, GroupKey, TimeBucket, parse_aggregates,
                                     parse_group_by)


def test_the_seed_s_rollup():
    assert parse_group_by("minute(log_time)") == (GroupKey("log_time", TimeBucket.MINUTE),)
    assert parse_aggregates("count(*) as errors") == (Aggregate(Function.COUNT, None, "errors"),)


def test_group_keys_are_columns_or_time_buckets_each_a_column_of_the_rollup():
    keys = parse_group_by(" Hour( ts ) , shop,day(ts)")
    assert keys == (GroupKey("ts", TimeBucket.HOUR), GroupKey("shop"), GroupKey("ts", TimeBucket.DAY))
    assert [key.name for key in keys] == ["ts_hour", "shop", "ts_day"]


def test_aggregates_and_how_their_partials_merge():
    found = parse_aggregates("COUNT(*) AS n, count(user_id) as users_seen, sum(bytes) as bytes, "
                             "min(latency) as fastest, max(latency) as slowest")
    assert found == (Aggregate(Function.COUNT, None, "n"), Aggregate(Function.COUNT, "user_id", "users_seen"),
                     Aggregate(Function.SUM, "bytes", "bytes"), Aggregate(Function.MIN, "latency", "fastest"),
                     Aggregate(Function.MAX, "latency", "slowest"))
    assert [a.function.merged_by for a in found] == [Function.SUM, Function.SUM, Function.SUM, Function.MIN,
                                                    Function.MAX]


@pytest.mark.parametrize("parse, text, message", [
    (parse_group_by, "", "group_by names nothing"),
    (parse_group_by, "a,,b", "term 2 is empty"),
    (parse_group_by, "week(ts)", r"'week\(ts\)': a group key is a column or minute\(column\), hour\(column\), "
                                 r"day\(column\)"),
    (parse_group_by, "level-1", r"'level-1' is not a Hive column name"),
    (parse_group_by, "minute(ts), ts_minute", "two terms make the group key 'ts_minute'"),
    (parse_aggregates, "count(*)", r"an aggregate is named, as in `count\(\*\) as errors`"),
    (parse_aggregates, "avg(x) as a", r"count\(column\), sum\(column\), min\(column\), max\(column\) or "
                                      r"count\(\*\): each can be merged from partials \(an average is sum / count\)"),
    (parse_aggregates, "sum(*) as s", r"only count takes \*"),
    (parse_aggregates, "sum(a + b) as s", "an aggregate is"),
    (parse_aggregates, "count(*) as n, sum(x) as n", "two terms make the aggregate name 'n'"),
])
def test_a_mistake_names_the_term_and_what_is_expected(parse, text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)
