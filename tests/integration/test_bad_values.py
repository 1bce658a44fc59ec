"""Bad input never makes a table unreadable: end to end on the real stack.

A producer bug once sent a record with a Kafka timestamp in year 242869; the ETL accepted it
and from then on every `SELECT *` through the analysts' endpoint failed ("Unrecognized column
type: TIMESTAMP_TYPE"). Here records with such a timestamp, and JSON values Hive or Spark
cannot read back (timestamps and dates out of range, decimals beyond their precision, floats
beyond float, NaN and Infinity literals) are produced among good ones; after `etl run` both
the table and `<table>_rejected` must answer `SELECT *` through the Thrift Server (Hive's JDBC
driver) and through Spark, and every produced offset must be in exactly one of them.

The rejected table is created beforehand with its earlier column list (without
kafka_timestamp_ms), as every existing deployment has it: the run must evolve it.
"""
from __future__ import annotations

import json
import math
from collections import Counter

from confluent_kafka import Producer

from tests.harness.etl_process import run_etl
from tests.harness.oracle import table_offsets
from test_analysts_endpoint import JdbcReader

DB = "etl_test"
T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
Y242869 = 7_602_051_355_200_000  # 242869-06-01 12:00:00 UTC
WIDEST = "9" * 36 + ".99"  # the largest decimal(38,2): wider than Python's 28-digit context
RANGED_SQL = """CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  id bigint, ts timestamp, day date, price decimal(10,2), f float, d double, wide decimal(38,2),
  kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp
)
PARTITIONED BY (dt string, hour string)
STORED AS PARQUET
LOCATION '${location}'
"""
EARLIER_REJECTED_COLUMNS = ("kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp, "
                            "kafka_key binary, raw_value binary, error string")


def good(i: int) -> bytes:
    return json.dumps({"id": i, "ts": "2024-01-01 10:00:00", "day": "2024-01-01", "price": "12.34", "f": 1.5,
                       "d": 2.5}).encode()


# (value, Kafka timestamp in ms, the start of the reason it is rejected with; None: it is kept)
RECORDS = [
    (good(0), T0, None),
    (good(1), Y242869, f"kafka record timestamp {Y242869} ms is outside the range Hive and Spark read back"),
    (b'{"id": 2, "ts": "9999-12-30T23:00:00-05:00"}', T0, "field 'ts': '9999-12-30T23:00:00-05:00' is outside"),
    (b'{"id": 3, "ts": "0000-06-01 00:00:00"}', T0, "field 'ts': '0000-06-01 00:00:00' is outside"),
    (b'{"id": 4, "day": "0000-12-31"}', T0, "field 'day': '0000-12-31' is outside"),
    (b'{"id": 5, "price": 123456789}', T0, "field 'price': 123456789.00 does not fit decimal(10,2)"),
    (b'{"id": 6, "f": 1e39}', T0, "field 'f': 1e+39 is too large for float"),
    (b'{"id": 7, "d": NaN}', T0, "field 'd': NaN is not valid JSON"),
    (b'{"id": 8, "d": Infinity}', T0, "field 'd': Infinity is not valid JSON"),
    (b'{"id": 9, "f": -Infinity}', T0, "field 'f': -Infinity is not valid JSON"),
    (b'{"id": 10', Y242869, "invalid JSON"),
    (good(11), 253_402_214_399_999, None),  # 9999-12-30 23:59:59.999 UTC: the last timestamp kept
    (b'{"id": 12, "wide": "%s"}' % WIDEST.encode(), T0, None),
    (b'{"id": 13, "ts": "0001-01-02 00:00:00", "day": "0001-01-01", "price": -99999999.99, "f": 3.4e38, '
     b'"wide": "-%s"}' % WIDEST.encode(), T0, None),
    (b'{"id": 14, "wide": "1%s"}' % (b"0" * 36), T0, "field 'wide': "),
]


def produce_with_timestamps(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], int]:
    """RECORDS round-robin over the partitions, each with its Kafka timestamp; {(partition, offset): index}."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    where: dict[tuple[int, int], int] = {}
    for index, (value, timestamp_ms, _reason) in enumerate(RECORDS):
        def delivered(err, msg, index=index):
            assert err is None, err
            where[(msg.partition(), msg.offset())] = index
        producer.produce(topic, value=value, partition=index % partitions, timestamp=timestamp_ms,
                         on_delivery=delivered)
    assert producer.flush(30) == 0
    assert len(where) == len(RECORDS)
    return where


def jdbc_select_all(jvm, url: str, table: str) -> list[tuple]:
    """SELECT * through the Thrift Server with Hive's JDBC driver (beeline's), every value as text."""
    reader = JdbcReader(jvm, url)
    connection = reader.connect()
    try:
        return reader.query(connection, f"SELECT * FROM `{DB}`.`{table}`")
    finally:
        connection.close()


def create_earlier_rejected_table(spark, warehouse_dir, table: str) -> None:
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{DB}`")
    location = f"file://{warehouse_dir}/{DB}.db/{table}"
    spark.sql(f"CREATE EXTERNAL TABLE `{DB}`.`{table}` ({EARLIER_REJECTED_COLUMNS}) PARTITIONED BY (dt string, "
              f"hour string) STORED AS PARQUET LOCATION '{location}'")


def test_values_hive_cannot_read_back_are_rejected_and_both_tables_stay_readable(
        spark, stack, thrift_url, new_topic, write_config, hive_table_name, warehouse_dir, tmp_path):
    ddl = tmp_path / "ranged.sql"
    ddl.write_text(RANGED_SQL)
    topic = new_topic(partitions=2)
    where = produce_with_timestamps(stack.kafka_bootstrap, topic, 2)
    rejected_table = f"{hive_table_name}_rejected"
    create_earlier_rejected_table(spark, warehouse_dir, rejected_table)
    # Parquet's range of values (an ORC table's is narrower: test_orc_tables.py), whatever ETL_TEST_FILE_FORMAT says.
    config = write_config(kafka={"topics": topic}, hive={"schema": str(ddl), "format": "parquet"},
                          job={"max_rejected_ratio": "0.9"})

    result = run_etl(config)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]

    # Readable through the analysts' endpoint and through Spark, every column of every row.
    jvm = spark.sparkContext._jvm
    main_jdbc = jdbc_select_all(jvm, thrift_url, hive_table_name)
    rejected_jdbc = jdbc_select_all(jvm, thrift_url, rejected_table)
    spark.sql(f"REFRESH TABLE `{DB}`.`{hive_table_name}`")
    spark.sql(f"REFRESH TABLE `{DB}`.`{rejected_table}`")
    main_rows = spark.sql(f"SELECT * FROM `{DB}`.`{hive_table_name}`").collect()
    rejected_rows = spark.sql(f"SELECT * FROM `{DB}`.`{rejected_table}`").collect()

    kept = {i for i, (_v, _t, reason) in enumerate(RECORDS) if reason is None}
    assert len(main_jdbc) == len(main_rows) == len(kept)
    assert len(rejected_jdbc) == len(rejected_rows) == len(RECORDS) - len(kept)

    # Every produced offset in exactly one of the two tables.
    main_offsets = table_offsets(spark, DB, hive_table_name)
    rejected_offsets = table_offsets(spark, DB, rejected_table)
    produced = Counter((topic, p, o) for p, o in where)
    assert main_offsets + rejected_offsets == produced
    assert not main_offsets.keys() & rejected_offsets.keys()
    assert {where[(p, o)] for _t, p, o in main_offsets} == kept

    assert all(row[c] is None or math.isfinite(row[c]) for row in main_rows for c in ("f", "d"))
    kept_wide = {str(row["wide"]) for row in main_rows if row["wide"] is not None}
    assert kept_wide == {WIDEST, "-" + WIDEST}, kept_wide  # the largest, both ways, through Spark
    assert {WIDEST, "-" + WIDEST} <= {str(value) for row in main_jdbc for value in row}, main_jdbc  # and JDBC
    by_index = {where[(r["kafka_partition"], r["kafka_offset"])]: r for r in rejected_rows}
    for index, row in by_index.items():
        value, timestamp_ms, reason = RECORDS[index]
        assert row["error"].startswith(reason), (index, row["error"])
        assert row["raw_value"] == value
        assert row["kafka_timestamp_ms"] == timestamp_ms  # filled for every rejected row
        assert (row["kafka_timestamp"] is None) == (timestamp_ms == Y242869)
