"""Event-time partitioning and `etl compact` with the warehouse on a REAL HDFS (the shared
NameNode and DataNode): rows land in the Hive partition of their own event time, then one
partition's small files are merged, and every produced offset is in Hive exactly once, read
through hdfs://, before and after (the oracle checks each row's partition, too).
"""
from __future__ import annotations

import json
import posixpath
import shutil

from etl.model.compaction import COMPACTED_FOLDER
from tests.harness.warehouse_files import DATA_SUFFIX
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.hdfs import copy_to_local
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader

DB = "etl_test"


def test_event_time_partitions_then_compaction_on_hdfs_keep_every_offset_once(
        spark, hdfs, new_topic, produce, write_config, hive_table_name, tmp_path):
    topic = new_topic(partitions=2)
    produce(topic, {p: [json.dumps({"event_id": p * 100 + i, "ts": f"2026-11-20 {10 + i % 2:02d}:15:00"}).encode()
                        for i in range(24)] for p in range(2)})
    root = hdfs.job_folder("event-time")
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "6"},
                          hive={"partition_by": "column:ts"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"}, warehouse=hdfs.warehouse(root))
    loaded = run_etl(config)
    assert loaded.returncode == 0, loaded.describe()
    fs, copy = hdfs.filesystem(), tmp_path / "copy"
    expected = expected_offsets(topic, {0: 24, 1: 24})
    oracle = check_exactly_once(hive_reader(spark), config, expected, copy_to_local(fs, root, copy))
    print(f"[hdfs] event time: {oracle.describe()}")
    table = f"{root}/{DB}.db/{hive_table_name}"
    before = [p for p in fs.walk_files(f"{table}/dt=2026-11-20/hour=10") if p.endswith(DATA_SUFFIX)]
    assert len(before) == 8  # 4 batches of 6 records per Kafka partition, half of each in this hour

    done = etl_command(config, "compact", "--execute", "--partition", "dt=2026-11-20/hour=10")
    assert done.returncode == 0, done.describe()
    shutil.rmtree(copy)
    oracle = check_exactly_once(hive_reader(spark), config, expected, copy_to_local(fs, root, copy))
    merged = [p for p in fs.walk_files(table) if COMPACTED_FOLDER in p and p.endswith(DATA_SUFFIX)
              and not posixpath.basename(p).startswith("_")]
    assert len(merged) == 2, merged  # one file per Kafka partition
    print(f"[hdfs] compacted: {oracle.describe()}; hour 10's files: {len(before)} -> {len(merged)}")
