"""Event time for a routed job on the real stack ([hive] partition_by = column:ts with [route]
sections): a topic split by its action between two tables (clicks, and the rest) beside a topic
routed whole by a `{topic}` template, their rows spread over 30 hours, in two batches. Each range
is written as one file per (range, table, hour), every table of the split covering every range;
each table registers exactly the hours it holds; a split range's manifest, in the rejected table,
lists each part with its table; each table gets `_SUCCESS` in the hours the watermark has passed;
`etl history` shows the rows per table. Then `etl compact --table` merges the clicks table's
hours, `reset-offsets --move-aside` back over a split partition moves its ranges' parts out of
both tables, and a rerun loads them again, into the clicks table's compacted folders: exactly
once (tests.harness.oracle, with `etl verify --deep`). Its tables are stored as ORC ([hive] format
= orc; the rejected table stays Parquet): the routed, event-time and compaction paths on that
format, which the other routed event-time tests run on Parquet."""
from __future__ import annotations

import json
import uuid
from collections import defaultdict

import pytest

from etl.config.routes import table_name
from etl.sink.markers import MARKER_NAME
from tests.harness.data import DataSource, TopicsSource, action_spread_event, spread_event
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.warehouse_files import final_files, table_root

DB = "etl_test"


@pytest.mark.slow
def test_a_routed_job_by_event_time_writes_a_file_per_range_table_and_hour_exactly_once(
        spark, new_topic, produce, write_config, warehouse_dir):
    file_format = "orc"  # Parquet's routed event time: test_routes_event_time_crash.py and others
    name = f"re{uuid.uuid4().hex[:8]}"
    whole, split = new_topic(2, f"{name}.whole"), new_topic(2, f"{name}.split")
    source = TopicsSource([DataSource(whole, 2, produce, make_event=spread_event),
                           DataSource(split, 2, produce, make_event=action_spread_event)])
    source.produce(40)
    route = {"schema": str(EVENTS_SCHEMA)}  # it names no format: each table is made as [hive] format says
    config = write_config(
        kafka={"topics": None}, zookeeper={"session_timeout_seconds": "4"},
        job={"max_records_per_partition": "20"},
        compaction={"min_files": "2", "keep_superseded_minutes": "0", "only_finished": "false"},
        hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected", "partition_by": "column:ts",
              "format": file_format,
              "success_markers": "true", "success_marker_delay_seconds": "0"},
        **{"route whole": {**route, "topics": whole, "table": "{topic}"},
           "route clicks": {**route, "topics": split, "field": "action", "values": "click", "table": f"{name}_clicks"},
           "route rest": {**route, "topics": split, "field": "action", "values": "*", "table": f"{name}_rest"}})
    tables = [table_name("{topic}", whole), f"{name}_clicks", f"{name}_rest"]
    run = run_etl(config)
    assert run.returncode == 0 and run.stdout.count("COMMITTED") == 2, run.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)

    hours: dict[str, set[str]] = {}
    ranges: dict[tuple, set[str]] = defaultdict(set)
    for table in tables:
        files = final_files(table_root(warehouse_dir, DB, table))
        assert {f.path.suffix for f in files} == {f".{file_format}"}, table
        keys = [(f.topic, f.partition, f.start, f.end, str(f.path.parent)) for f in files]
        assert len(keys) == len(set(keys)), f"{table}: a range twice in one hour"
        hours[table] = {str(f.path.parent.relative_to(table_root(warehouse_dir, DB, table))) for f in files}
        for f in files:
            ranges[(f.topic, f.partition, f.start, f.end)].add(table)
        registered = {r[0] for r in spark.sql(f"SHOW PARTITIONS {DB}.`{table}`").collect()}
        assert registered == hours[table], (table, sorted(registered ^ hours[table]))
        assert len(hours[table]) > 5, (table, hours[table])  # spread over many hours
        assert (table_root(warehouse_dir, DB, table) / min(hours[table]) / MARKER_NAME).exists(), table
    assert {k: v for k, v in ranges.items() if k[0] == split} and \
        all(v == set(tables[1:]) for k, v in ranges.items() if k[0] == split), "every split table covers each range"
    manifests = list((table_root(warehouse_dir, DB, f"{name}_rejected") / "_etl_ranges").rglob(f"{split}+*/*.json"))
    assert len(manifests) == 4, manifests  # two batches of two Kafka partitions
    for path in manifests:
        parts = json.loads(path.read_text())["parts"]
        assert {part[3] for part in parts} == set(tables[1:]), parts
    history = etl_command(config, "history")
    assert all(table in history.stdout for table in tables), history.stdout
    print(f"[routes-event-time] {oracle.describe()}; hours by table {[len(hours[t]) for t in tables]}")

    compact = etl_command(config, "compact", "--execute", "--table", f"{name}_clicks", "--json")
    assert compact.returncode == 0, compact.describe()
    compacted = json.loads(compact.stdout)["compacted"]
    assert compacted and {plan.get("table_name") for plan in compacted} == {f"{name}_clicks"}, compact.stdout

    reset = etl_command(config, "reset-offsets", "--to", f"{split}:1=0", "--move-aside", "--execute")
    assert reset.returncode == 0, reset.describe()
    moved = [line for line in reset.stdout.splitlines() if line.startswith("move out of the table:")]
    assert any(f"/{name}_clicks/" in line for line in moved) and any(f"/{name}_rest/" in line for line in moved) \
        and any("_etl_ranges" in line for line in moved), reset.stdout
    rerun = run_etl(config)
    assert rerun.returncode == 0 and "COMMITTED" in rerun.stdout, rerun.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    print(f"[routes-event-time] {len(compacted)} hours of the clicks table compacted; reset back over a split "
          f"partition ({len(moved)} files moved aside), loaded again into them: {oracle.describe()}")
