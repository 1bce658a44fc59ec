"""The whole pipeline with the warehouse on a REAL HDFS: Kafka -> Parquet through WebHDFS onto
Hadoop's own NameNode and DataNode -> ZooKeeper -> Hive, whose metastore holds hdfs:// locations.

The ETL writes through WebHDFS ([warehouse] url = webhdfs://127.0.0.1:<http>/...): the driver
and every Spark task's Python worker, each with its own client, as on a cluster. Hive names the
same folder hdfs://127.0.0.1:<rpc>/... ([warehouse] hive_location), and both of its readers go
through their own Hadoop client (3.5.0, pyspark's): the test's Spark session, and the analysts'
endpoint, the shared Spark Thrift Server, queried with Hive's JDBC driver as beeline does.

Which warehouse runs which test: the pipeline's code differs between the local filesystem and
WebHDFS (etl.sink.fs), so the pipeline runs on both (test_pipeline.py locally, this file on
HDFS). It does not differ between the WebHDFS protocol server and a real NameNode, so the
pipeline no longer runs on the protocol server: it serves the unit contract suite's faults a
real NameNode cannot produce on cue (tests/unit/test_fs_contract.py).

`etl verify` and `etl recover` on HDFS: a file deleted there is a gap, rewritten once (the last test).
"""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config import load_config
from etl.ops.acting import Act
from etl.ops.recovery import RecoverOptions, recover
from etl.ops.run import run_job
from etl.ops.verify import run_verify
from etl.state.store import ZkStateStore
from tests.harness.warehouse_files import DATA_SUFFIX
from tests.harness.data import events_by_partition
from tests.harness.enrichment import enriched_schema
from tests.harness.hdfs import copy_to_local
from tests.harness.jdbc import JdbcReader, offsets_sql, parse_offsets
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets

pytestmark = pytest.mark.cell("hdfs-3.5")

DB = "etl_test"


def table_location(spark, table: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED `{DB}`.`{table}`").collect()
    return next(r.data_type for r in rows if r.col_name == "Location")


def test_n_records_land_exactly_once_on_hdfs_analysts_read_them_and_a_second_run_changes_nothing(
        spark, thrift_url, new_topic, produce, write_config, hive_table_name, hdfs):
    topic = new_topic(partitions=4)
    produce(topic, events_by_partition(4, 250))
    root = hdfs.job_folder("pipeline")
    config = load_config(write_config(kafka={"topics": topic}, warehouse=hdfs.warehouse(root)))
    assert config.warehouse.is_webhdfs
    expected = expected_offsets(topic, {p: 250 for p in range(4)})

    assert run_job(config) == 0
    assert table_location(spark, hive_table_name) == f"{hdfs.hdfs_uri}{root}/{DB}.db/{hive_table_name}"
    assert table_offsets(spark, DB, hive_table_name) == expected
    fs = hdfs.filesystem()
    table_dir = f"{root}/{DB}.db/{hive_table_name}"
    files = sorted(fs.walk_files(table_dir))
    assert sorted(p.rpartition("/")[2] for p in files) == [
        f"{topic}+{p}+{0:020d}+{250:020d}{DATA_SUFFIX}" for p in range(4)]
    before = [(p, fs.info(p).modified) for p in files]

    reader = JdbcReader(spark.sparkContext._jvm, thrift_url)
    connection = reader.connect()
    try:
        seen = parse_offsets(JdbcReader.query(connection, offsets_sql(hive_table_name)))
    finally:
        connection.close()
    assert seen["main"] == expected and not seen["rejected"]  # the Thrift Server read hdfs:// itself

    assert run_job(config) == 0
    assert [(p, fs.info(p).modified) for p in sorted(fs.walk_files(table_dir))] == before
    assert table_offsets(spark, DB, hive_table_name) == expected


def test_a_file_deleted_on_hdfs_is_a_gap_that_recover_rewrites_once(spark, new_topic, produce, write_config, hdfs,
                                                                     tmp_path):
    """The on-call path on HDFS, apart from the kill campaign's closing recover: a committed file
    deleted on HDFS (its range's records had rejected ones too); `etl verify` is NOT OK naming the
    gap; `etl recover` moves the rejected companion aside through WebHDFS and rewrites the range
    from Kafka; then every (topic, partition, offset) is once in the tables (the oracle)."""
    topic = new_topic(partitions=2)
    produced = {p: [b"not json" if i % 7 == 0 else payload for i, payload in enumerate(events)]
                for p, events in events_by_partition(2, 30).items()}
    produce(topic, produced)
    root = hdfs.job_folder("recover")
    config_path = write_config(kafka={"topics": topic}, warehouse=hdfs.warehouse(root),
                               job={"max_records_per_partition": "10", "max_rejected_ratio": "0.5"})
    config = load_config(config_path)
    assert run_job(config) == 0
    fs = hdfs.filesystem()
    name = f"{topic}+1+{10:020d}+{20:020d}{DATA_SUFFIX}"
    [gone] = [p for p in fs.walk_files(f"{root}/{DB}.db/{config.hive.table}") if p.endswith("/" + name)]
    fs.delete(gone)

    found = run_verify(config, deep=False)
    assert [(p.kind, p.where) for p in found.problems] == [("gap", f"{topic}[1]"),
                                                          ("orphan_rejected_file", f"{topic}[1]")], \
        found.render()
    said: list[str] = []
    assert recover(config, RecoverOptions(Act.EXECUTE), out=said.append) == 0, said
    assert run_verify(config, deep=False).ok
    copy = copy_to_local(fs, root, tmp_path / "warehouse-copy")
    oracle = check_exactly_once(hive_reader(spark), config_path, expected_offsets(topic, {0: 30, 1: 30}), copy)
    print(f"[hdfs-recover] {oracle.describe()}")


def test_dimension_files_on_the_warehouse_hdfs_enrich_the_rows_and_are_pinned(
        spark, new_topic, produce, write_config, hive_table_name, hdfs, tmp_path):
    """A Parquet dimension named hdfs://, a CSV one named webhdfs://, both read through the
    warehouse's filesystem (as the job's user), joined, and pinned by the NameNode's size and
    modification time."""
    topic = new_topic(partitions=2)
    codes, users = ["DE", "FR", "XX"], ["u0", "u1", "u9"]
    produce(topic, {p: [json.dumps({"event_id": p * 10 + i, "user_id": users[i % 3], "country_code": codes[i % 3]})
                        .encode() for i in range(6)] for p in range(2)})
    root = hdfs.job_folder("dimensions")
    fs = hdfs.filesystem()
    countries, tiers = f"{root}/dims/countries.parquet", f"{root}/dims/users.csv"
    with fs.open_write(countries) as out:
        pq.write_table(pa.table({"code": ["DE", "FR"], "country_name": ["Germany", "France"]}), out)
    with fs.open_write(tiers) as out:
        out.write(b"user_id,user_tier\nu0,gold\nu1,silver\n")
    config = load_config(write_config(
        kafka={"topics": topic}, warehouse=hdfs.warehouse(root), hive={"schema": str(enriched_schema(tmp_path))},
        **{"dimension countries": {"source": f"{hdfs.hdfs_uri}{countries}", "join_key": "country_code",
                                   "dimension_key": "code", "columns": "country_name"},
           "dimension users": {"source": f"{hdfs.webhdfs_url}{tiers}", "join_key": "user_id",
                               "columns": "user_tier"}}))

    assert run_job(config) == 0
    rows = spark.sql(f"SELECT country_code, country_name, user_id, user_tier FROM {DB}.{hive_table_name}").collect()
    assert len(rows) == 12
    for row in rows:
        assert row.country_name == {"DE": "Germany", "FR": "France"}.get(row.country_code), row
        assert row.user_tier == {"u0": "gold", "u1": "silver"}.get(row.user_id), row
    with ZkStateStore(config.zookeeper, config.job.name, config.retry) as store:
        pins = store.batches.last_batch()[0].dimensions
    for name, path in (("countries", countries), ("users", tiers)):
        assert pins[name]["location"] == path
        assert pins[name]["files"] == [[path, fs.info(path).size, round(fs.info(path).modified * 1000) * 1_000_000]]
