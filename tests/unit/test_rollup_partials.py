"""A rollup's partials (etl.rows.rollup_partials): the seed's errors per minute, and partials of
any split of the rows, merged, equal to one pass over all of them (NULL keys and values too)."""
from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest

from etl.config.rollup_terms import parse_aggregates, parse_group_by
from etl.rows.rollup_partials import merged, partials

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def rows(count: int, seed: int) -> pa.Table:
    draw = random.Random(seed)
    return pa.table({
        "log_time": pa.array([T0 + dt.timedelta(seconds=draw.randrange(0, 4 * 3600)) for _ in range(count)],
                             pa.timestamp("ms", tz="UTC")),
        "level": [draw.choice(["ERROR", "INFO", None]) for _ in range(count)],
        "bytes": pa.array([draw.choice([None, draw.randrange(0, 10_000)]) for _ in range(count)], pa.int64()),
        "latency": [draw.choice([None, round(draw.random() * 10, 3)]) for _ in range(count)],
    })


def sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: [(value is None, str(value)) for value in row.values()])


def test_the_seed_s_errors_per_minute():
    logs = pa.table({"log_time": pa.array([T0, T0 + dt.timedelta(seconds=59), T0 + dt.timedelta(seconds=60),
                                           T0 + dt.timedelta(seconds=61)], pa.timestamp("ms", tz="UTC"))})
    found = partials(logs, parse_group_by("minute(log_time)"), parse_aggregates("count(*) as errors"))
    assert found.to_pylist() == [{"log_time_minute": T0, "errors": 2},
                                 {"log_time_minute": T0 + dt.timedelta(minutes=1), "errors": 2}]


@pytest.mark.parametrize("group_by", ["minute(log_time), level", "hour(log_time)", "day(log_time), level", "level"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_partials_of_any_split_merged_equal_one_pass(group_by, seed):
    keys = parse_group_by(group_by)
    aggregates = parse_aggregates("count(*) as n, count(bytes) as with_bytes, sum(bytes) as bytes, "
                                  "min(latency) as fastest, max(latency) as slowest, max(level) as last_level")
    table = rows(2_000, seed)
    cuts = sorted(random.Random(seed).sample(range(1, table.num_rows), 5))
    chunks = [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, table.num_rows])]
    whole = partials(table, keys, aggregates)
    assert sorted_rows(merged([partials(chunk, keys, aggregates) for chunk in chunks], keys, aggregates)) == \
        sorted_rows(whole)
    assert sum(whole.column("n").to_pylist()) == table.num_rows
    assert sum(whole.column("with_bytes").to_pylist()) == table.num_rows - table.column("bytes").null_count
