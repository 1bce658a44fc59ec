"""The rollup tests' records and their oracle's question: a log of events spread over ten minutes,
and the rollup's terms asked of the raw table in Spark SQL (tests/integration/test_rollups.py)."""
from __future__ import annotations

import datetime as dt
import json

DB = "etl_test"
ERRORS_ONLY = "action = 'error'"
ROLLUP = {"table": "{table}_per_minute",
          "where": "action in ('error', 'warn') and amount >= 0",
          "group_by": "minute(ts), action",
          "aggregates": "count(*) as events, count(user_id) as with_user, sum(amount) as amount, "
                        "min(ts) as first_seen, max(event_id) as last_event"}


def log_event(i: int) -> bytes:
    """Spread over ten minutes, out of order; a quarter errors, a quarter warnings; every fifth
    without a user; amounts whole numbers, so that any order of adding gives the same double;
    every 41st not JSON (a rejected record, in no partial)."""
    if i % 41 == 40:
        return b'{"event_id": garbled'
    at = dt.datetime(2026, 11, 21, 10, 0) + dt.timedelta(seconds=(i * 37) % 600)
    return json.dumps({"event_id": i, "user_id": None if i % 5 == 0 else f"u{i % 3}",
                       "action": ("error", "warn", "ok", "ok")[i % 4], "amount": float(i % 11),
                       "ts": at.strftime("%Y-%m-%d %H:%M:%S"), "ok": True}).encode()


def recount_sql(table: str, where: str) -> str:
    """The rollup's question asked of the raw table in Spark SQL (its `where` is SQL too)."""
    return (f"SELECT date_trunc('MINUTE', ts) AS ts_minute, action, count(*) AS events, count(user_id) AS with_user, "
            f"sum(amount) AS amount, min(ts) AS first_seen, max(event_id) AS last_event FROM {DB}.{table} "
            f"WHERE {where} GROUP BY date_trunc('MINUTE', ts), action")


def in_utc(spark, sql: str) -> set[tuple]:
    """A query's rows, read in UTC: the buckets are UTC's, as the table's timestamps."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        return {tuple(row) for row in spark.sql(sql).collect()}
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def recounted(spark, table: str, where: str = ROLLUP["where"]) -> set[tuple]:
    """The rollup's rows, recounted from the raw table."""
    spark.sql(f"REFRESH TABLE {DB}.{table}")
    return in_utc(spark, recount_sql(table, where))
