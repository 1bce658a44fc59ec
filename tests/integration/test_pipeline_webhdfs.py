"""The whole pipeline with the warehouse on WebHDFS: Kafka -> Parquet over WebHDFS -> ZooKeeper -> Hive.

The WebHDFS endpoint is tests/harness/webhdfs_server.py over a local folder (no HDFS can be installed
here); the Spark tasks, in their own Python worker processes, reach it over 127.0.0.1 as they
would reach a NameNode. Hive is told the same folder as file://..., the way a cluster's Hive
sees it as hdfs://nameservice/...: [warehouse] url and hive_location name one folder twice.
"""
from __future__ import annotations

import pytest

from etl.config import load_config
from etl.job.runner import run_job
from tests.harness.data import events_by_partition
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.webhdfs_server import WebHdfsTestServer

DB = "etl_test"
WAREHOUSE = "/user/etl/warehouse"


@pytest.fixture
def webhdfs(tmp_path):
    with WebHdfsTestServer(tmp_path / "hdfs") as server:
        yield server


def webhdfs_warehouse(server: WebHdfsTestServer) -> dict:
    return {"url": server.webhdfs_url(WAREHOUSE), "hive_location": f"file://{server.local_path(WAREHOUSE)}",
            "user": "etl", "timeout_seconds": "30"}


def files_written(server: WebHdfsTestServer, table: str):
    root = server.local_path(f"{WAREHOUSE}/{DB}.db/{table}")
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_n_records_land_exactly_once_through_webhdfs_and_a_second_run_changes_nothing(
        spark, new_topic, produce, write_config, hive_table_name, webhdfs):
    topic = new_topic(partitions=4)
    produce(topic, events_by_partition(4, 250))
    config = load_config(write_config(kafka={"topics": topic}, warehouse=webhdfs_warehouse(webhdfs)))
    assert config.warehouse.is_webhdfs

    assert run_job(config) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {p: 250 for p in range(4)})
    files = files_written(webhdfs, hive_table_name)
    assert [f.name for f in files] == [f"{topic}+{p}+{0:020d}+{250:020d}.parquet" for p in range(4)]
    assert webhdfs.count("CREATE", "datanode") == 4  # every file went through WebHDFS, once
    assert webhdfs.count("RENAME") == 4
    before = [(f, f.stat().st_mtime_ns) for f in files]

    assert run_job(config) == 0
    assert [(f, f.stat().st_mtime_ns) for f in files_written(webhdfs, hive_table_name)] == before
    assert webhdfs.count("CREATE", "datanode") == 4 and webhdfs.count("RENAME") == 4
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {p: 250 for p in range(4)})


@pytest.mark.slow
def test_etl_run_in_its_own_process_writes_through_webhdfs(
        spark, new_topic, produce, write_config, hive_table_name, webhdfs):
    """`etl run` builds its own SparkSession from the config, as in production."""
    from tests.harness.etl_process import run_etl

    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 30))
    result = run_etl(write_config(kafka={"topics": topic}, warehouse=webhdfs_warehouse(webhdfs)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 30, 1: 30})
    assert len(files_written(webhdfs, hive_table_name)) == 2
