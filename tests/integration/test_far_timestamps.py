"""Timestamps far from today survive compaction, and `etl verify --deep` checks them: on the real stack.

Files hold timestamps as INT96 (Hive 2.x reads no other). pyarrow reads INT96 as nanoseconds by
default, which hold only 1677-09-21 .. 2262-04-11: a merge that read them so wrote
9999-12-30 back as 1816-03-28 05:56:08.066277 and 1500-06-01 12:00 as 2084-12-19, and
`verify --deep` said OK (it counted rows), or crashed on an event-time table ("Casting from
timestamp[ns] to timestamp[ms] would lose data"). Here the values are read back through the
analysts' endpoint (the Thrift Server, Hive's JDBC driver) as epoch microseconds, which no session
time zone shifts, before and after `etl compact`, and must be exactly the produced ones; and a
merged file rewritten by hand with one value changed (same rows, same footer) must make
`verify --deep` fail, naming the file.

The event-time test writes its table for current readers ([hive] parquet_readers = current:
INT64 timestamps, delta encodings, zstd), with a bloom filter and sorted row groups, and reads it
back through every reader the analysts have: the Thrift Server, Spark, DuckDB and pyarrow.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from etl.model.compaction import COMPACTED_FOLDER
from etl.sink.checksums import CHECKSUMS_KEY
from tests.harness.campaign import zone_whose_hour_lasts
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.jdbc import JdbcReader

DB = "etl_test"
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
T0 = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC


def millis(when: dt.datetime) -> int:
    return (when - EPOCH) // dt.timedelta(milliseconds=1)


FAR_FUTURE = dt.datetime(9999, 12, 30, tzinfo=UTC)
LAST_KEPT = dt.datetime(9999, 12, 30, 23, 59, 59, 999000, tzinfo=UTC)  # etl.rows.hive_values' upper bound
NORMAL = dt.datetime(2026, 11, 20, 10, 15, tzinfo=UTC)

# (the record's ts text, its Kafka timestamp, kept in the table); two a batch, one Kafka partition.
# Kafka timestamps are never before 1970 (a negative one is Kafka's "none": NULL).
RECORDS = [
    ("9999-12-30T00:00:00Z", T0, True),
    ("1500-06-01T12:00:00Z", millis(FAR_FUTURE), True),
    ("0001-01-01T00:00:00Z", millis(FAR_FUTURE), False),  # outside what Hive reads back: rejected
    ("0001-01-02T00:00:00Z", 1, True),  # 0 would be "now" to the producer
    ("2026-11-20T10:15:00Z", millis(LAST_KEPT), True),
    ("9999-12-30T23:59:59.999Z", T0, True),
    ("0001-01-01T00:00:00Z", millis(LAST_KEPT), False),
    (None, millis(NORMAL), True),
]


def micros_of(text: str | None) -> int | None:
    if text is None:
        return None
    return (dt.datetime.fromisoformat(text.replace("Z", "+00:00")) - EPOCH) // dt.timedelta(microseconds=1)


def value(i: int, ts: str | None) -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i}", "amount": i + 0.5, "ts": ts}).encode()


def produce_records(produce, topic: str, records) -> None:
    produce(topic, {0: [value(i, ts) for i, (ts, _k, _kept) in enumerate(records)]},
            timestamps_by_partition={0: [k for _ts, k, _kept in records]})


def jdbc_rows(spark, thrift_url: str, sql: str) -> list[tuple]:
    reader = JdbcReader(spark.sparkContext._jvm, thrift_url)
    connection = reader.connect()  # a fresh session: no cached listing of a folder compaction replaced
    try:
        return JdbcReader.query(connection, sql)
    finally:
        connection.close()


def shown_main(spark, thrift_url: str, table: str) -> dict[int, tuple]:
    """offset -> (ts, kafka_timestamp) as epoch microseconds, read through the Thrift Server."""
    rows = jdbc_rows(spark, thrift_url, f"SELECT kafka_offset, unix_micros(ts), unix_micros(kafka_timestamp) "
                                        f"FROM `{DB}`.`{table}`")
    return {int(o): (None if t is None else int(t), None if k is None else int(k)) for o, t, k in rows}


def shown_rejected(spark, thrift_url: str, table: str) -> dict[int, tuple]:
    rows = jdbc_rows(spark, thrift_url, f"SELECT kafka_offset, unix_micros(kafka_timestamp), kafka_timestamp_ms, "
                                        f"CAST(raw_value AS STRING) FROM `{DB}`.`{table}_rejected`")
    return {int(o): (int(k), int(ms), raw) for o, k, ms, raw in rows}


def partitions_of(warehouse_dir: Path, table: str) -> list[str]:
    """The partition folders holding files (the planning-time hour's may be there, empty)."""
    root = warehouse_dir / f"{DB}.db" / table
    return sorted({str(p.parent.relative_to(root)) for p in root.glob("dt=*/hour=*/*.parquet")})


def merged_files(warehouse_dir: Path, table: str) -> list[Path]:
    return sorted((warehouse_dir / f"{DB}.db" / table / COMPACTED_FOLDER).rglob("*.parquet"))


def test_compaction_keeps_every_timestamp_hive_accepts_exactly(spark, thrift_url, new_topic, produce, write_config,
                                                                hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    produce_records(produce, topic, RECORDS)
    # Its batches land in one planning-time hour, whose files, the rejected table's too, compact
    # together: one CI run crossed 12:00 UTC, left one rejected file an hour, and compacted none.
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "2", "max_rejected_ratio": "0.9"},
                          hive={"partition_timezone": zone_whose_hour_lasts(300)},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"})
    loaded = run_etl(config)
    assert loaded.returncode == 0, loaded.describe()
    main = {i: (micros_of(ts), k * 1000) for i, (ts, k, kept) in enumerate(RECORDS) if kept}
    rejected = {i: (k * 1000, k, value(i, ts).decode()) for i, (ts, k, kept) in enumerate(RECORDS) if not kept}
    assert shown_main(spark, thrift_url, hive_table_name) == main  # right before compaction
    assert shown_rejected(spark, thrift_url, hive_table_name) == rejected

    for partition in partitions_of(warehouse_dir, hive_table_name):
        done = etl_command(config, "compact", "--execute", "--partition", partition, "--json")
        assert done.returncode == 0, done.describe()
    assert merged_files(warehouse_dir, hive_table_name), "nothing was compacted"
    assert merged_files(warehouse_dir, f"{hive_table_name}_rejected"), "the rejected table was not compacted"

    assert shown_main(spark, thrift_url, hive_table_name) == main  # 9999-12-30 was 1816-03-28 05:56:08.066277
    assert shown_rejected(spark, thrift_url, hive_table_name) == rejected
    verified = etl_command(config, "verify", "--deep", timeout=300)
    assert verified.returncode == 0, verified.describe()


# By event time: each far date in its own hour, two batches (two files) an hour.
EVENT_RECORDS = [(ts, T0, True) for ts in ("9999-12-30T00:00:00Z", "1500-06-01T12:00:00Z", "2026-11-20T10:15:00Z")
                 for _ in range(2)]
EVENT_PARTITIONS = ("dt=1500-06-01/hour=12", "dt=2026-11-20/hour=10", "dt=9999-12-30/hour=00")


def rewrite_with_one_value_changed(path: Path, drop: tuple[bytes, ...] = ()) -> None:
    """The same rows and footer, one amount changed: what a merge that altered a value would have
    published (pyarrow's read_table drops the footer's keys: they are put back, but those in `drop`)."""
    footer = {k: v for k, v in pq.ParquetFile(path).metadata.metadata.items() if k.startswith(b"etl.")}
    assert b"etl.ranges" in footer and CHECKSUMS_KEY in footer
    footer = {k: v for k, v in footer.items() if k not in drop}
    table = pq.read_table(path, coerce_int96_timestamp_unit="us")
    amounts = table.column("amount").to_pylist()
    amounts[0] += 1
    table = table.set_column(table.schema.get_field_index("amount"), "amount", pa.array(amounts, pa.float64()))
    pq.write_table(table.replace_schema_metadata(footer), path, use_deprecated_int96_timestamps=True)
    after = pq.ParquetFile(path)
    assert after.metadata.num_rows == len(amounts) and after.metadata.metadata.keys() >= footer.keys()


def read_by_every_reader(spark, thrift_url: str, paths: list[Path], table: str) -> dict[str, dict[int, tuple]]:
    """offset -> (ts, kafka_timestamp) as epoch microseconds, as each reader shows the table (the
    Thrift Server) or its files (the others)."""
    files = [str(p) for p in paths]
    by_spark = spark.read.parquet(*files).selectExpr("kafka_offset", "unix_micros(ts)", "unix_micros(kafka_timestamp)")
    by_duckdb = duckdb.sql(f"SELECT kafka_offset, epoch_us(ts), epoch_us(kafka_timestamp) FROM read_parquet({files})")
    by_pyarrow = ds.dataset(files, format="parquet").to_table(columns=["kafka_offset", "ts", "kafka_timestamp"])
    return {
        "thrift server": shown_main(spark, thrift_url, table),
        "spark": {int(o): (t, k) for o, t, k in by_spark.collect()},
        "duckdb": {int(o): (t, k) for o, t, k in by_duckdb.fetchall()},
        "pyarrow": {o: (t, k) for o, t, k in zip(*(by_pyarrow.column(c).cast(pa.int64()).to_pylist()
                                                    for c in ("kafka_offset", "ts", "kafka_timestamp")))},
    }


def test_verify_deep_on_event_time_with_far_dates_and_a_merged_file_changed_by_hand(
        spark, thrift_url, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    produce_records(produce, topic, EVENT_RECORDS)
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "1", "compression": "zstd"},
                          hive={"partition_by": "column:ts", "parquet_readers": "current",
                                "bloom_filter_columns": "user_id", "sort_by": "user_id, event_id"},
                          compaction={"min_files": "2", "keep_superseded_minutes": "0"})
    loaded = run_etl(config)
    assert loaded.returncode == 0, loaded.describe()
    assert tuple(partitions_of(warehouse_dir, hive_table_name)) == EVENT_PARTITIONS
    table_dir = warehouse_dir / f"{DB}.db" / hive_table_name
    batch_files = sorted(table_dir.glob("dt=*/hour=*/*.parquet"))
    assert {pq.ParquetFile(p).metadata.row_group(0).column(4).physical_type for p in batch_files} == {"INT64"}  # ts
    expected = {i: (micros_of(ts), T0 * 1000) for i, (ts, _k, _kept) in enumerate(EVENT_RECORDS)}
    shown = read_by_every_reader(spark, thrift_url, batch_files, hive_table_name)
    assert shown == {reader: expected for reader in shown}
    verified = etl_command(config, "verify", "--deep", timeout=300)
    assert verified.returncode == 0, verified.describe()  # was: ArrowInvalid, a traceback and exit 1

    for partition in EVENT_PARTITIONS:
        done = etl_command(config, "compact", "--execute", "--partition", partition)
        assert done.returncode == 0, done.describe()
    merged = merged_files(warehouse_dir, hive_table_name)
    assert len(merged) == 3, merged
    assert shown_main(spark, thrift_url, hive_table_name) == expected
    verified = etl_command(config, "verify", "--deep", timeout=300)
    assert verified.returncode == 0, verified.describe()

    [victim] = [p for p in merged if "dt=1500-06-01" in str(p)]
    before = pc.sum(pq.read_table(victim, columns=["amount"]).column("amount")).as_py()
    rewrite_with_one_value_changed(victim)
    assert pc.sum(pq.read_table(victim, columns=["amount"]).column("amount")).as_py() == before + 1
    # Another merged file changed the same way and stripped of `etl.checksums`: it passed as one
    # merged before checksums existed. ZooKeeper's record of its compaction says it has them.
    [stripped] = [p for p in merged if "dt=9999-12-30" in str(p)]
    rewrite_with_one_value_changed(stripped, drop=(CHECKSUMS_KEY,))
    altered = etl_command(config, "verify", "--deep", timeout=300)
    assert altered.returncode == 1, altered.describe()
    assert "[altered_file]" in altered.stdout and victim.name in altered.stdout, altered.describe()
    assert "column 'amount'" in altered.stdout, altered.describe()
    assert f"{stripped.name}: has no `etl.checksums`" in altered.stdout, altered.describe()
