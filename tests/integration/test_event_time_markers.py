"""`_SUCCESS` by event-time watermark, late data and idle partitions, on the real services.

The watermark is the minimum over the job's Kafka partitions of the latest event time committed
(a partition idle for idle_partition_seconds left out); a partition is marked once it has passed
the window's end plus the delay (0 here). Event times are days in the past, the clock is real.
"""
from __future__ import annotations

import json
import time

import pytest

from etl.config import load_config
from etl.errors import InjectedFault
from etl.ops.run import run_job
from etl.ops.status import collect_status, render_status
from etl.sink.markers import MARKER_NAME
from etl.source.kafka import KafkaMetadata
from etl.state.store import ZkStateStore
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
DAY = "2026-11-20"


def at(hhmm: str) -> bytes:
    return json.dumps({"event_id": 1, "ts": f"{DAY} {hhmm}:00"}).encode()


def marked(warehouse_dir, table: str, hour: str) -> bool:
    return (warehouse_dir / f"{DB}.db" / table / f"dt={DAY}" / f"hour={hour}" / MARKER_NAME).exists()


def event_config(write_config, topic: str, **hive):
    return write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "1"},
                        hive={"partition_by": "column:ts", "success_markers": "true",
                              "success_marker_delay_seconds": "0", **hive})


def newest(config):
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return store.batches.last_batch()[0]


@pytest.mark.parametrize("late_data", ["write", "reject"])
def test_rows_after_the_marker_are_late_written_once_or_rejected(
        late_data, spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {0: [at("10:05"), at("12:10")], 1: [at("10:20"), at("12:30")]})
    config = event_config(write_config, topic, late_data=late_data)
    assert run_job(load_config(config)) == 0
    # watermark min(12:10, 12:30): hour 10 has ended, hour 12 has not
    assert marked(warehouse_dir, hive_table_name, "10") and not marked(warehouse_dir, hive_table_name, "12")

    produce(topic, {0: [at("10:40"), at("12:20")]})  # 10:40 comes after hour 10's marker
    assert run_job(load_config(config)) == 0
    main = table_offsets(spark, DB, hive_table_name)
    rejected = table_offsets(spark, DB, f"{hive_table_name}_rejected")
    assert main + rejected == expected_offsets(topic, {0: 4, 1: 2})
    touched = {p.partition: p for p in newest(config).event_time.partitions}
    if late_data == "write":
        assert main[(topic, 0, 2)] == 1 and touched[f"dt={DAY}/hour=10"].late == 1
        cfg = load_config(config)
        with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
            kafka = KafkaMetadata(cfg.kafka, cfg.retry, cfg.job.name)
            try:
                shown = render_status(collect_status(cfg, store, kafka))
            finally:
                kafka.close()
        assert "LATE DATA: 1 rows" in shown and f"dt={DAY}/hour=10 (1)" in shown, shown
    else:
        assert rejected == expected_offsets(topic, {0: 3}, start=2) and f"dt={DAY}/hour=10" not in touched
        spark.sql(f"REFRESH TABLE `{DB}`.`{hive_table_name}_rejected`")
        error = spark.sql(f"SELECT error FROM `{DB}`.`{hive_table_name}_rejected`").collect()[0].error
        assert error.startswith(f"late: partition dt={DAY}/hour=10"), error
    assert marked(warehouse_dir, hive_table_name, "10")  # the marker stays


@pytest.mark.parametrize("idle_seconds, expect_marked", [("1", True), ("600", False)])
def test_an_idle_partition_does_not_hold_back_the_markers(
        idle_seconds, expect_marked, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {0: [at("10:05")], 1: [at("10:10")]})
    config = event_config(write_config, topic, idle_partition_seconds=idle_seconds)
    assert run_job(load_config(config)) == 0
    assert not marked(warehouse_dir, hive_table_name, "10")  # watermark 10:05
    time.sleep(2)
    produce(topic, {0: [at("12:00")]})  # partition 1 stays quiet
    assert run_job(load_config(config)) == 0
    assert marked(warehouse_dir, hive_table_name, "10") is expect_marked


def test_no_marker_while_a_batch_touching_the_partition_is_open(
        monkeypatch, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    produce(topic, {0: [at("09:30")]})
    config = event_config(write_config, topic)
    assert run_job(load_config(config)) == 0
    produce(topic, {0: [at("10:15"), at("12:00")]})  # the watermark would pass hour 10
    monkeypatch.setenv("ETL_FAULT_POINT", "state:REGISTERED")
    monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
    with pytest.raises(InjectedFault):
        run_job(load_config(config))
    assert newest(config).state.value == "REGISTERED"
    assert not marked(warehouse_dir, hive_table_name, "10")
    monkeypatch.delenv("ETL_FAULT_POINT")
    assert run_job(load_config(config)) == 0  # resumes, commits, then marks
    assert marked(warehouse_dir, hive_table_name, "10") and marked(warehouse_dir, hive_table_name, "09")
