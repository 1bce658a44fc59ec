"""SIGKILLs of a routed job by event time ([hive] partition_by = column:ts with [route] sections):
a topic split by its action between two tables, beside a topic routed whole, their rows spread
over 30 hours. A split range publishes a file per (table, hour) one rename at a time, then its
manifest in the rejected table: killed between two of those renames (part:1, in the task of the
split topic's Kafka partition 1: the whole topic has only partition 0) or at a state, the job
must hold what holds at any moment (tests.harness.oracle.check_interim), and once recovered
every offset is exactly once in its table or the rejected one, every row in the hour of its own
event time, and `etl verify --deep` passes.

By default one kill point, the half-published split range, which only a routed job by event time
has; all four with ETL_ROUTES_EVENT_KILL_POINTS=all (about 20 s a point). A kill at WRITTEN is
run for routed jobs by planning time (test_routes_crash.py) and for one table by event time
(test_event_time_crash.py), and what a routed WRITTEN record holds and registers per table is
checked without Spark (tests/unit/test_routed_event_written.py).
"""
from __future__ import annotations

import os
import signal
import uuid

import pytest

from etl.config.routes import table_name
from tests.harness.data import DataSource, TopicsSource, action_spread_event, spread_event
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, check_interim, hive_reader
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.recovery import recover_or_run
from tests.harness.state import job_state, wait_for_lock_release
from tests.harness.warehouse_files import final_files, table_root
from tests.integration.test_crash import crash_config, report

DB = "etl_test"
ALL_POINTS = {"part:1": "PLANNED", "renamed:1": "PLANNED", "state:WRITTEN": "WRITTEN",
              "state:REGISTERED": "REGISTERED"}
POINTS = ALL_POINTS if os.environ.get("ETL_ROUTES_EVENT_KILL_POINTS") == "all" else \
    {point: ALL_POINTS[point] for point in ("part:1",)}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(POINTS))
def test_a_routed_job_by_event_time_killed_between_renames_or_at_a_state_is_exactly_once(
        point, spark, zk, new_topic, produce, write_config, warehouse_dir):
    name = f"rx{uuid.uuid4().hex[:8]}"
    whole, split = new_topic(1, f"{name}.whole"), new_topic(2, f"{name}.split")
    source = TopicsSource([DataSource(whole, 1, produce, make_event=spread_event),
                           DataSource(split, 2, produce, make_event=action_spread_event)])
    source.produce(60)
    route = {"schema": str(EVENTS_SCHEMA)}
    config = crash_config(
        write_config, None, hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected",
                                  "partition_by": "column:ts"},
        **{"route whole": {**route, "topics": whole, "table": "{topic}"},
           "route clicks": {**route, "topics": split, "field": "action", "values": "click", "table": f"{name}_clicks"},
           "route rest": {**route, "topics": split, "field": "action", "values": "*", "table": f"{name}_rest"}})
    killed = run_etl(config, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.describe()
    state = job_state(config)
    assert (state.last_batch_id, state.last_state) == (1, POINTS[point]), (state, killed.describe())
    split_tables = [f"{name}_clicks", f"{name}_rest"]
    parts = [f for table in split_tables for f in final_files(table_root(warehouse_dir, DB, table))
             if f.topic == split and f.partition == 1]
    manifests = table_root(warehouse_dir, DB, f"{name}_rejected") / "_etl_ranges" / f"{split}+1"
    if point == "part:1":
        assert parts, "the task of the split topic's partition 1 was killed after publishing a part"
        assert not list(manifests.glob("*.json")), "the manifest is published last: a half-published range has none"
    report(f"routed event time, {point}: batch 1 {state.last_state}, {len(parts)} parts of the split range of "
           f"partition 1 published")
    check_interim(hive_reader(spark), config, warehouse_dir, source.produced)
    wait_for_lock_release(zk, config)
    recovered = recover_or_run(config, drain=False)
    after = job_state(config)
    assert (after.last_batch_id, after.last_state) == (1, "COMMITTED"), recovered.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    tables = [table_name("{topic}", whole), *split_tables]
    assert all(final_files(table_root(warehouse_dir, DB, table)) for table in tables)
    report(f"routed event time, {point}: recovered; {oracle.describe()}")
