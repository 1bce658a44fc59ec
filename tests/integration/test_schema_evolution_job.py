"""Schema evolution against the metastore: a table already holding a partition gets a new
column; old rows read NULL, new rows carry values, through Hive (Spark SQL on the metastore),
and every existing partition's own column list has the column too (Hive's CASCADE). A refused
change names the column, exits 2 and plans nothing. The pure rules: tests/unit/test_schema_evolution.py.
"""
from __future__ import annotations

import json


from etl import cli
from etl.config import load_config
from etl.errors import EXIT_USAGE
from etl.ops.run import run_job
from etl.model.schema import LINEAGE_COLUMNS
from etl.state.store import ZkStateStore


DB = "etl_test"


LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"


def ddl(*columns: str, added: tuple[str, ...] = ()) -> str:
    body = ", ".join([*columns, LINEAGE_SQL, *added])
    return (f"CREATE EXTERNAL TABLE IF NOT EXISTS ${{database}}.${{table}} ({body}) "
            "PARTITIONED BY (dt string, hour string) STORED AS PARQUET LOCATION '${location}'")


# -- against the metastore ----------------------------------------------------------------------
def partition_columns(spark, table: str) -> dict[str, list[str]]:
    """Each partition's own column list, as the metastore stores it (what Hive reads it with)."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", spark.conf.get("spark.hadoop.hive.metastore.uris"))
    client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
    try:
        return {"/".join(p.getValues()): [c.getName() for c in p.getSd().getCols()]
                for p in client.listPartitions(DB, table, -1)}
    finally:
        client.close()


def batch_count(config) -> int:
    loaded = load_config(config)
    with ZkStateStore(loaded.zookeeper, loaded.job.name, loaded.retry) as store:
        return len(store.batches.batch_ids())


def test_a_new_column_reaches_a_table_with_partitions_old_rows_null_new_rows_filled(
        spark, new_topic, produce, write_config, hive_table_name, tmp_path):
    schema = tmp_path / "evolving.sql"
    schema.write_text(ddl("event_id bigint", "user_id string"))
    topic = new_topic(partitions=1)
    produce(topic, {0: [json.dumps({"event_id": i, "user_id": f"u{i}", "country": "DE"}).encode()
                        for i in range(5)]})
    config = write_config(kafka={"topics": topic}, hive={"schema": str(schema)})
    assert run_job(load_config(config)) == 0
    assert list(partition_columns(spark, hive_table_name).values())[0] == \
        ["event_id", "user_id"] + [c.name for c in LINEAGE_COLUMNS]

    schema.write_text(ddl("event_id bigint", "user_id string", added=("country string",)))
    produce(topic, {0: [json.dumps({"event_id": i, "user_id": f"u{i}", "country": "FR"}).encode()
                        for i in range(5, 8)]})
    assert run_job(load_config(config)) == 0

    spark.catalog.refreshTable(f"{DB}.{hive_table_name}")
    evolved = ["event_id", "user_id"] + [c.name for c in LINEAGE_COLUMNS] + ["country"]
    assert [c.name for c in spark.catalog.listColumns(f"{DB}.{hive_table_name}") if not c.isPartition] == evolved
    rows = spark.sql(f"SELECT kafka_offset, country FROM {DB}.{hive_table_name} ORDER BY kafka_offset").collect()
    assert [(r.kafka_offset, r.country) for r in rows] == [(o, None) for o in range(5)] + [(o, "FR") for o in (5, 6, 7)]
    # CASCADE: every partition, the one written before the change included, has the column in
    # its own metadata, so Hive reads new files in an old partition with it.
    for columns in partition_columns(spark, hive_table_name).values():
        assert columns == evolved
    # A third run with nothing new changes nothing and does not fail on the evolved table.
    assert run_job(load_config(config)) == 0


def test_a_refused_change_exits_2_naming_the_column_and_plans_nothing(
        spark, new_topic, produce, write_config, tmp_path, capsys):
    schema = tmp_path / "refused.sql"
    schema.write_text(ddl("event_id bigint", "user_id string"))
    topic = new_topic(partitions=1)
    produce(topic, {0: [json.dumps({"event_id": 1}).encode()]})
    config = write_config(kafka={"topics": topic}, hive={"schema": str(schema)})
    assert run_job(load_config(config)) == 0
    produce(topic, {0: [json.dumps({"event_id": 2}).encode()]})

    schema.write_text(ddl("event_id bigint", "uid string"))
    capsys.readouterr()
    assert cli.main(["run", "--config", str(config)]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "'user_id string'" in error and "renamed to 'uid'?" in error and "Put 'user_id string' back" in error
    schema.write_text(ddl("event_id int", "user_id string"))
    assert cli.main(["run", "--config", str(config)]) == EXIT_USAGE
    assert "column 'event_id'" in capsys.readouterr().err
    assert batch_count(config) == 1  # the new record was not planned: nothing was touched
