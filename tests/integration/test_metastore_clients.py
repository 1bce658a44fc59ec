"""The two metastore clients (etl.hive.catalog) against the real metastore: the driver's Thrift
client reads what Spark's Hive client reads, and what it adds, Spark SQL and Hive's readers see.
This binds the Thrift client, which every run on a thrift:// metastore now uses, to the client
the rest of the suite proved; and one run on Spark's client keeps that path loaded end to end.
"""
from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from etl.config import load_config
from etl.config.model import HiveFormat
from etl.hive.catalog import SparkCatalog
from etl.hive.thrift_catalog import ThriftCatalog
from etl.model.binding import stored_format
from etl.ops.verify import run_verify
from etl.sink.warehouse import same_location
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
COLUMNS = ("id bigint, name string, price decimal(10,2), code varchar(12), tags array<string>, "
           "counts map<string,bigint>, inner_row struct<a:int,b:string>, day date, at timestamp, ok boolean")


def _table(spark, tmp_path) -> str:
    name = f"mc_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE EXTERNAL TABLE {DB}.{name} ({COLUMNS}) PARTITIONED BY (dt string, hour string) "
              f"STORED AS PARQUET LOCATION 'file://{tmp_path}/{name}'")
    return name


def test_both_clients_read_the_same_table_facts_before_and_after_columns_are_added(spark, stack, tmp_path):
    table = _table(spark, tmp_path)
    thrift, through_spark = ThriftCatalog(stack.metastore_uri, 60), SparkCatalog(lambda: spark)
    try:
        assert thrift.table_facts(DB, table) == through_spark.table_facts(DB, table)
        assert len(thrift.table_facts(DB, table).columns) == 10
        assert stored_format(thrift.table_facts(DB, table).input_format) is HiveFormat.PARQUET
        spark.sql(f"ALTER TABLE {DB}.{table} SET TBLPROPERTIES ('etl.owner'='/etl/j', 'etl.cascaded_columns'='x')")
        spark.sql(f"ALTER TABLE {DB}.{table} ADD COLUMNS (added struct<c:double>, more string)")
        facts = thrift.table_facts(DB, table)
        assert facts == through_spark.table_facts(DB, table)
        assert (facts.owner, facts.cascaded, facts.columns[-1].name) == ("/etl/j", "x", "more")
        assert thrift.table_facts(DB, "no_such_table") is None and thrift.database_exists(DB)
        assert not thrift.database_exists(f"no_such_{uuid.uuid4().hex[:6]}")
    finally:
        thrift.close()


def test_partitions_the_thrift_client_adds_are_read_by_spark_sql_and_by_both_clients(spark, stack, tmp_path):
    table = _table(spark, tmp_path)
    thrift, through_spark = ThriftCatalog(stack.metastore_uri, 60), SparkCatalog(lambda: spark)
    values = [{"dt": "2026-11-28", "hour": "10"}, {"dt": "2026-11-28", "hour": "a b:c"}]  # the second needs escaping
    folders = [tmp_path / table / f"part{i}" for i in range(2)]
    for i, folder in enumerate(folders):
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), folder / "f.parquet")
    try:
        thrift.add_partitions(DB, table, values, [f"file://{f}" for f in folders])
        thrift.add_partitions(DB, table, values[:1], [f"file://{tmp_path}/elsewhere"])  # IF NOT EXISTS: kept
        for found in (thrift.locations(DB, table, values), through_spark.locations(DB, table, values)):
            assert all(same_location(where, f"file://{f}") for where, f in zip(found, folders)), found
        assert thrift.all_locations(DB, table).keys() == through_spark.all_locations(DB, table).keys() == \
            {"dt=2026-11-28/hour=10", "dt=2026-11-28/hour=a b:c"}
        rows = spark.sql(f"SELECT id, hour FROM {DB}.{table} ORDER BY id").collect()
        assert [(r.id, r.hour) for r in rows] == [(0, "10"), (1, "a b:c")]
        assert thrift.locations(DB, table, [{"dt": "2026-11-29", "hour": "00"}]) == [None]
    finally:
        thrift.close()


def test_a_run_on_spark_s_hive_client_loads_once_and_verifies(spark, new_topic, produce, write_config, hive_table_name):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 20))
    config = write_config(kafka={"topics": topic}, hive={"metastore_client": "spark"})
    assert load_config(config).hive.metastore_client == "spark"
    for _ in range(2):  # the second run finds the tables and its partition through Spark's client
        result = run_etl(config)
        assert result.returncode == 0, result.stderr[-2000:]
        produce(topic, events_by_partition(2, 5, first_id=20))
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 25, 1: 25})
    assert run_verify(load_config(config), deep=False).ok
