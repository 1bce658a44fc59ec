"""The promise at its edges, the rest: what reaches SQL, where Hive registers a batch, and what
an operator reads when the metastore is down. Each test failed on the code before it.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from etl.config import load_config
from etl.hive.catalog import partition_locations
from etl.hive.sql import quote_identifier, quote_literal
from etl.ops.verify import run_verify
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.oracle import expected_offsets, table_offsets


DB = "etl_test"


def test_quoted_literals_and_identifiers_round_trip_through_spark_sql(spark):
    for text in ["it's", "back\\slash", "both \\' and '\\", "line\nbreak", "tab\t", "ünï €", "--", "';DROP"]:
        row = spark.sql(f"SELECT {quote_literal(text)} AS {quote_identifier('a`b')}").collect()[0]
        assert row["a`b"] == text, text


def test_a_warehouse_url_with_a_quote_exits_2_before_any_sql(spark, new_topic, write_config, tmp_path):
    # It used to reach CREATE DATABASE ... LOCATION '<url>' unchecked: this URL created the
    # database with the comment it chose, then the run exited 2 saying nothing was touched.
    database = f"etl_inj_{uuid.uuid4().hex[:8]}"
    url = f"file://{tmp_path}/w' COMMENT 'injected"
    config = write_config(kafka={"topics": new_topic()}, warehouse={"url": url}, hive={"database": database})
    result = run_etl(config)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "[warehouse] url" in result.stderr and "must not contain" in result.stderr
    assert not spark.catalog.databaseExists(database)


def utc_hour_partitions(hours: int) -> list[dict[str, str]]:
    now = datetime.now(timezone.utc)
    return [{"dt": f"{t:%Y-%m-%d}", "hour": f"{t:%H}"} for t in (now + timedelta(hours=h) for h in range(hours))]


def test_a_partition_registered_elsewhere_is_an_error_naming_both_locations(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir, tmp_path):
    # ADD IF NOT EXISTS PARTITION ... LOCATION keeps an existing partition's location: after a
    # warehouse move, or a partition pointed elsewhere by hand, a batch committed rows Hive never showed.
    topic = new_topic(partitions=1)
    produce(topic, events_by_partition(1, 10))
    config = write_config(kafka={"topics": topic})
    assert run_etl(config).returncode == 0
    elsewhere = f"file://{tmp_path}/elsewhere"
    table = f"{quote_identifier(DB)}.{quote_identifier(hive_table_name)}"
    for values in utc_hour_partitions(2):  # this hour and the next: the run may cross an hour
        spec = ", ".join(f"{k}={quote_literal(v)}" for k, v in values.items())
        spark.sql(f"ALTER TABLE {table} DROP IF EXISTS PARTITION ({spec})")
        spark.sql(f"ALTER TABLE {table} ADD PARTITION ({spec}) LOCATION {quote_literal(elsewhere)}")
    produce(topic, events_by_partition(1, 10, first_id=10))

    result = run_etl(config)
    assert result.returncode == 1, result.stdout + result.stderr[-2000:]
    message = result.stderr[result.stderr.index("is registered at"):]  # the metastore writes file:/x
    assert f"{tmp_path}/elsewhere, but this job writes it to file://{warehouse_dir}" in message, message[:500]
    report = run_verify(load_config(config), deep=False)
    assert "wrong_location" in {p.kind for p in report.problems}, report.render()

    for values in utc_hour_partitions(2):  # the operator points the partitions back
        spec = ", ".join(f"{k}={quote_literal(v)}" for k, v in values.items())
        spark.sql(f"ALTER TABLE {table} DROP IF EXISTS PARTITION ({spec})")
    assert run_etl(config).returncode == 0
    assert all(str(warehouse_dir) in location
               for location in partition_locations(spark, DB, hive_table_name).values())
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 20})
    assert run_verify(load_config(config), deep=True).ok


def test_a_metastore_down_at_start_is_not_reported_as_a_batch_problem(new_topic, write_config):
    # Nothing listens on port 9: one connect, no retry by Hive's client or Spark's (their retries
    # only wait on the same refusal, ~4 s more), the same exit 75 and the same error.
    config = write_config(kafka={"topics": new_topic()}, hive={"metastore": "thrift://127.0.0.1:9"},
                          spark={"spark.hadoop.hive.metastore.connect.retries": "1",
                                 "spark.hadoop.hive.metastore.failure.retries": "0"})
    result = run_etl(config, timeout=300)
    assert result.returncode == 75, result.stderr[-2000:]  # HiveUnavailable: a retry helps
    assert "metastore thrift://127.0.0.1:9" in result.stderr, result.stderr[-2000:]
    assert "batch" not in result.stderr.split("metastore thrift://127.0.0.1:9", 1)[1], result.stderr[-2000:]
