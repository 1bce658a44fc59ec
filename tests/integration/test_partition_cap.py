"""[hive] max_partitions_per_batch on the real services (issue 26, defect 10): a batch by event
time whose rows fall in more Hive partitions than the cap is refused before any file is written,
nothing committed; raising the cap loads it exactly once.
"""
from __future__ import annotations

import json

from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.state import job_state

DB = "etl_test"
HOURS = 12


def spread(count: int) -> list[bytes]:
    """Record i in hour i % HOURS of 2026-11-20: HOURS partitions."""
    return [json.dumps({"event_id": i, "ts": f"2026-11-20 {i % HOURS:02d}:30:00"}).encode() for i in range(count)]


def test_a_batch_past_the_cap_fails_before_any_file_and_loads_once_when_raised(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {0: spread(30), 1: spread(18)})
    capped = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts", "max_partitions_per_batch": "5"})

    refused = run_etl(capped)
    assert refused.returncode == 1, refused.describe()
    assert (f"would touch {HOURS} Hive partitions, more than [hive] max_partitions_per_batch = 5"
            in refused.stderr), refused.describe()
    table_root = warehouse_dir / f"{DB}.db" / hive_table_name
    assert [p for p in table_root.rglob("*") if p.is_file()] == []  # no file written, not even a manifest
    state = job_state(capped)
    assert state.last_batch_id is None and state.committed == {}  # no plan stored, nothing committed
    again = run_etl(capped)  # the same records: refused the same way, every run
    assert again.returncode == 1 and "max_partitions_per_batch = 5" in again.stderr, again.describe()

    raised = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts",
                                                         "max_partitions_per_batch": str(HOURS)})
    loaded = run_etl(raised)
    assert loaded.returncode == 0, loaded.describe()
    assert len([p for p in table_root.glob("dt=2026-11-20/hour=*") if p.is_dir()]) == HOURS
    check_exactly_once(hive_reader(spark), raised, expected_offsets(topic, {0: 30, 1: 18}), warehouse_dir)


def test_past_the_cap_reject_sends_the_rows_of_the_latest_partitions_to_the_rejected_table_once(
        spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=2)
    produce(topic, {0: spread(30), 1: spread(18)})
    config = write_config(kafka={"topics": topic}, hive={"partition_by": "column:ts", "max_partitions_per_batch": "8",
                                                         "on_too_many_partitions": "reject"})
    done = run_etl(config)
    assert done.returncode == 0, done.describe()
    assert "more than [hive] max_partitions_per_batch = 8" in done.stderr, done.describe()
    table_root = warehouse_dir / f"{DB}.db" / hive_table_name
    assert sorted(p.name for p in table_root.glob("dt=2026-11-20/hour=*") if p.is_dir()) == [
        f"hour={h:02d}" for h in range(8)]  # the 8 earliest hours
    reasons = spark.sql(f"SELECT get_json_object(CAST(raw_value AS STRING), '$.ts') AS ts, error FROM "
                        f"{DB}.{hive_table_name}_rejected").collect()
    assert len(reasons) == sum(1 for i in list(range(30)) + list(range(18)) if i % HOURS >= 8)
    assert all(r.ts[11:13] >= "08" and r.error.startswith("too many partitions: partition dt=2026-11-20/hour=")
               for r in reasons), reasons[:3]
    # `etl verify --deep` (a JVM of its own) once, on the final state below; here the rest of the oracle
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 30, 1: 18}), warehouse_dir,
                       run_verify=False)
    files = {p: p.stat().st_mtime_ns for p in warehouse_dir.rglob("*") if p.is_file()}
    again = run_etl(config)  # nothing new: nothing changes
    assert again.returncode == 0, again.describe()
    assert {p: p.stat().st_mtime_ns for p in warehouse_dir.rglob("*") if p.is_file()} == files  # not one file touched
    check_exactly_once(hive_reader(spark), config, expected_offsets(topic, {0: 30, 1: 18}), warehouse_dir)
