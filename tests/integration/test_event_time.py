"""Hive partitions by event time ([hive] partition_by = column:<name> | kafka_timestamp), on the real services.

Every row must sit in the partition of its own event time, once; a range's rows spread over
several partitions, one file per (range, partition), and its manifest says it is done.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from etl.config import load_config
from etl.ops.run import run_job
from etl.ops.acting import Act
from etl.ops.recovery import RecoverOptions, recover
from etl.ops.verify import run_verify
from tests.harness.etl_process import run_etl
from tests.harness.spark import rejected_errors
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
BASE = dt.datetime(2026, 11, 20, 22, 0)


def timed_event(i: int, at: dt.datetime | None) -> bytes:
    return json.dumps({"event_id": i, "user_id": f"u{i % 7}", "action": "click", "amount": i / 10,
                       "ts": None if at is None else at.strftime("%Y-%m-%d %H:%M:%S"), "ok": True}).encode()


def out_of_order_times(n: int, seed: int) -> list[dt.datetime]:
    """Times over 6 hours across midnight, shuffled, so ranges cross hours and days."""
    import random
    rng = random.Random(seed)
    return [BASE + dt.timedelta(minutes=rng.randrange(0, 6 * 60)) for _ in range(n)]


def rows_with_partition(spark, table: str):
    spark.sql(f"REFRESH TABLE `{DB}`.`{table}`")
    return spark.sql(f"SELECT kafka_partition, kafka_offset, ts, dt, hour FROM `{DB}`.`{table}`").collect()


def test_rows_land_in_the_partition_of_their_column_time(spark, new_topic, produce, write_config, hive_table_name,
                                                         warehouse_dir):
    topic = new_topic(partitions=2)
    times = {p: out_of_order_times(60, seed=p) for p in range(2)}
    produce(topic, {p: [timed_event(p * 100 + i, t) for i, t in enumerate(ts)] for p, ts in times.items()})
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "25"},
                          hive={"partition_by": "column:ts"})
    for _ in range(4):
        assert run_job(load_config(config)) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 60, 1: 60})
    for row in rows_with_partition(spark, hive_table_name):
        want = times[row.kafka_partition][row.kafka_offset]
        assert (row.dt, row.hour) == (want.strftime("%Y-%m-%d"), want.strftime("%H")), row
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    parts = sorted(p.relative_to(table) for p in table.glob("dt=*/hour=*/*.parquet"))
    assert len({p.name for p in parts}) == 6  # 3 ranges of 25, 25, 10 per partition
    assert len(parts) > 6  # ranges spread over several hours
    assert len(list((table / "_etl_ranges").rglob("*.json"))) == 6


def newest_batch(config):
    from etl.state.store import ZkStateStore
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return store.batches.last_batch()[0]


def test_kafka_timestamps_place_rows_out_of_order_across_days(spark, new_topic, produce, write_config,
                                                              hive_table_name):
    topic = new_topic(partitions=2)
    stamps = {p: [int((BASE + dt.timedelta(minutes=(i * 977 + p * 31) % (3 * 24 * 60))).replace(
        tzinfo=dt.timezone.utc).timestamp() * 1000) for i in range(40)] for p in range(2)}
    produce(topic, {p: [timed_event(i, None) for i in range(40)] for p in range(2)}, timestamps_by_partition=stamps)
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "kafka_timestamp"})
    assert run_job(load_config(config)) == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 40, 1: 40})
    days = set()
    for row in rows_with_partition(spark, hive_table_name):
        want = dt.datetime.fromtimestamp(stamps[row.kafka_partition][row.kafka_offset] / 1000, dt.timezone.utc)
        assert (row.dt, row.hour) == (want.strftime("%Y-%m-%d"), want.strftime("%H")), row
        days.add(row.dt)
    assert len(days) >= 3


@pytest.mark.parametrize("policy", ["reject", "planning_time"])
def test_missing_and_unparsable_event_times(policy, spark, new_topic, produce, write_config, hive_table_name):
    topic = new_topic(partitions=1)
    values = [timed_event(0, BASE), timed_event(1, None), json.dumps({"event_id": 2}).encode(),
              json.dumps({"event_id": 3, "ts": "not a time"}).encode()]
    produce(topic, {0: values})
    config = write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "1"},
                          hive={"partition_by": "column:ts", "on_missing_event_time": policy})
    assert run_job(load_config(config)) == 0
    both = table_offsets(spark, DB, hive_table_name) + table_offsets(spark, DB, f"{hive_table_name}_rejected")
    assert both == expected_offsets(topic, {0: 4})
    errors = rejected_errors(spark, DB, hive_table_name)
    assert any("not a time" in e for e in errors), errors  # malformed: rejected under both policies
    planned = newest_batch(config).partition_values
    placed = {r.kafka_offset: (r.dt, r.hour) for r in rows_with_partition(spark, hive_table_name)}
    assert placed[0] == (BASE.strftime("%Y-%m-%d"), BASE.strftime("%H"))
    if policy == "reject":
        assert len(errors) == 3 and sum(e.startswith("no event time") for e in errors) == 2, errors
    else:
        assert len(errors) == 1
        assert placed[1] == placed[2] == (planned["dt"], planned["hour"])


def test_a_zone_with_daylight_saving_and_daily_partitions(spark, new_topic, produce, write_config, hive_table_name,
                                                          tmp_path):
    topic = new_topic(partitions=1)
    texts = ["2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25 02:45:00", "2026-10-25T02:30:00Z",
             "2026-10-24T23:59:00Z"]
    produce(topic, {0: [json.dumps({"event_id": i, "ts": t}).encode() for i, t in enumerate(texts)]})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts",
                                                         "partition_timezone": "Europe/Madrid"})
    assert run_job(load_config(config)) == 0
    placed = {r.kafka_offset: (r.dt, r.hour) for r in rows_with_partition(spark, hive_table_name)}
    # 02:00-03:00 happens twice in Madrid that night: one partition holds both; the naive 02:45
    # is its first occurrence (00:45Z); 02:30Z is 03:30 CET; 23:59Z the day before is 01:59 CEST.
    assert placed == {0: ("2026-10-25", "02"), 1: ("2026-10-25", "02"), 2: ("2026-10-25", "02"),
                      3: ("2026-10-25", "03"), 4: ("2026-10-25", "01")}

    daily_ddl = tmp_path / "daily.sql"
    events = (Path(__file__).resolve().parents[2] / "warehouse_schema" / "events.sql").read_text()
    daily_ddl.write_text(events.replace("PARTITIONED BY (dt string, hour string)", "PARTITIONED BY (dt string)"))
    daily_topic = new_topic(partitions=1)
    produce(daily_topic, {0: [json.dumps({"event_id": 0, "ts": "2026-11-21T04:59:00Z"}).encode(),
                              json.dumps({"event_id": 1, "ts": "2026-11-21T05:00:00Z"}).encode()]})
    daily = write_config(kafka={"topics": daily_topic}, job={"name": "daily"}, hive={
        "table": f"{hive_table_name}_daily", "schema": str(daily_ddl), "partition_by": "column:ts",
        "partition_timezone": "America/New_York"})
    assert run_job(load_config(daily)) == 0
    spark.sql(f"REFRESH TABLE `{DB}`.`{hive_table_name}_daily`")
    found = {r.kafka_offset: r.dt for r in spark.sql(f"SELECT kafka_offset, dt FROM `{DB}`.`{hive_table_name}_daily`")
             .collect()}
    assert found == {0: "2026-11-20", 1: "2026-11-21"}  # New York midnight is 05:00Z in November


def test_a_bad_event_column_exits_2_touching_nothing(new_topic, produce, write_config, warehouse_dir):
    topic = new_topic(partitions=1)
    produce(topic, {0: [timed_event(0, BASE)]})
    for column, why in (("user_id", "is string"), ("nope", "is not a column of the table")):
        config = write_config(kafka={"topics": topic}, hive={"partition_by": f"column:{column}"})
        result = run_etl(config)
        assert result.returncode == 2, result.describe()
        assert f"[hive] partition_by: column:{column} {why}" in result.stderr
    assert not warehouse_dir.exists()


def test_a_range_over_more_partitions_than_open_files_is_written_in_passes_once(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    times = [BASE + dt.timedelta(minutes=(i * 53) % (10 * 60)) for i in range(80)]  # 10 hours, interleaved
    source_values = [timed_event(i, t) for i, t in enumerate(times)]
    produce(topic, {0: source_values})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts", "max_open_partition_files": "2"})
    assert run_job(load_config(config)) == 0
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    parts = list(table.glob("dt=*/hour=*/*.parquet"))
    assert len(parts) == 10 and len({p.parent for p in parts}) == 10  # one file per hour, each written once
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 80})
    for row in rows_with_partition(spark, hive_table_name):
        assert (row.dt, row.hour) == (times[row.kafka_offset].strftime("%Y-%m-%d"),
                                      times[row.kafka_offset].strftime("%H"))
    assert run_verify(load_config(config), deep=True).ok


def test_a_deleted_part_is_found_by_verify_and_rewritten_by_recover(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    times = {p: out_of_order_times(40, seed=10 + p) for p in range(2)}
    produce(topic, {p: [timed_event(i, t) for i, t in enumerate(ts)] for p, ts in times.items()})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts"})
    assert run_job(load_config(config)) == 0
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    victim = sorted(table.glob(f"dt=*/hour=*/{topic}+1+*.parquet"))[0]
    victim.unlink()  # the operator's mistake: the range's other parts still carry its name
    report = run_verify(load_config(config), deep=False)
    assert [p.kind for p in report.problems] == ["missing_part"], report.render()
    lines = []
    assert recover(load_config(config), RecoverOptions(Act.EXECUTE), out=lines.append) == 0, lines
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 40, 1: 40})
    assert run_verify(load_config(config), deep=True).ok


def test_a_backfill_range_over_hundreds_of_partitions_is_exactly_once(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    """300 hourly partitions in one range: 10 passes of at most 32 open files (default). Peak
    memory is measured by scripts/bench.py --event-time (720 partitions), not asserted here."""
    topic = new_topic(partitions=1)
    times = [BASE + dt.timedelta(hours=i % 300, minutes=i % 60) for i in range(900)]
    produce(topic, {0: [timed_event(i, t) for i, t in enumerate(times)]})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts"})
    assert run_job(load_config(config)) == 0
    table = warehouse_dir / f"{DB}.db" / hive_table_name
    assert len(list(table.glob("dt=*/hour=*/*.parquet"))) == 300
    assert len(newest_batch(config).event_time.partitions) == 300
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 900})
    assert run_verify(load_config(config), deep=True).ok
