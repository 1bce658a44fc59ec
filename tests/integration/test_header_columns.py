"""[job] header_columns on the real stack: Kafka record headers land in string and binary columns,
read back through Hive, under planning-time and event-time partitioning alike (the two task paths)."""
from __future__ import annotations

import pytest

from tests.harness.data import event
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader

DB = "etl_test"
TABLE_SQL = """CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  event_id bigint,
  trace_id string,
  raw_blob binary,
  kafka_topic string,
  kafka_partition int,
  kafka_offset bigint,
  kafka_timestamp timestamp
)
PARTITIONED BY (dt string, hour string)
STORED AS PARQUET
LOCATION '${location}'
"""
HEADERS = [
    [("trace_id", b"abc")],
    [("trace_id", b"first"), ("other", b"x"), ("trace_id", b"last")],  # repeated: the last value counts
    None,  # no headers: NULL
    [("trace_id", b"\xff\xfe"), ("blob", b"kept")],  # not UTF-8 for a string column: rejected
    [("blob", b"\x00\xff\x01")],  # any bytes for a binary column
]


@pytest.mark.parametrize("partition_by", ["planning_time", "kafka_timestamp"])
def test_headers_land_in_their_columns_and_a_bad_one_is_rejected_naming_it(
        spark, tmp_path, new_topic, produce, write_config, hive_table_name, warehouse_dir, partition_by):
    schema = tmp_path / "with_headers.sql"
    schema.write_text(TABLE_SQL)
    topic = new_topic(partitions=1)
    produce(topic, {0: [event(i) for i in range(len(HEADERS))]}, headers_by_partition={0: HEADERS})
    config = write_config(kafka={"topics": topic}, hive={"schema": str(schema), "partition_by": partition_by},
                          job={"header_columns": "trace_id:trace_id, blob:raw_blob"})

    run = run_etl(config)
    assert run.returncode == 0, run.stderr

    rows = spark.sql(f"SELECT kafka_offset, event_id, trace_id, raw_blob FROM {DB}.{hive_table_name} "
                     f"ORDER BY kafka_offset").collect()
    assert [(r.kafka_offset, r.event_id, r.trace_id, None if r.raw_blob is None else bytes(r.raw_blob))
            for r in rows] == [(0, 0, "abc", None), (1, 1, "last", None), (2, 2, None, None),
                               (4, 4, None, b"\x00\xff\x01")]
    rejected = spark.sql(f"SELECT kafka_offset, error FROM {DB}.{hive_table_name}_rejected").collect()
    assert [(r.kafka_offset, r.error) for r in rejected] == [
        (3, "kafka header 'trace_id' is not valid UTF-8; declare column trace_id as binary to keep such values")]
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: len(HEADERS)}), warehouse_dir,
                       run_verify=False)
