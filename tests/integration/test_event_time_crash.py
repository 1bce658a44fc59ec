"""Fault injection under event-time partitioning ([hive] partition_by = column:ts).

A range's rows spread over many hourly partitions, one file per (range, partition), published
one rename at a time and the range's manifest last. SIGKILL between two of those renames, and
at every state, must still end exactly once: after recovery every produced offset is in
`<table>` + `<table>_rejected` once, each range's files together hold exactly its offsets, every
row sits in the partition of its own event time, and `etl verify --deep` exits 0.

Replay the random test with ETL_EVENT_CRASH_SEED=<seed>; scale it with ETL_EVENT_CRASH_KILLS=<n>.
"""
from __future__ import annotations

import os
import signal

import pytest

from tests.harness.campaign import campaign_seed, kill_campaign
from tests.harness.data import DataSource, spread_event
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, check_interim, hive_reader
from tests.harness.recovery import recover_or_run
from tests.harness.state import job_state, wait_for_lock_release
from tests.harness.warehouse_files import final_files, table_root
from tests.integration.test_crash import crash_config, report

DB = "etl_test"
EVENT_TIME = {"partition_by": "column:ts"}
SIZES = {0: 300, 1: 300, 2: 300}
# part:1 fires right after the task of Kafka partition 1 published one of its range's files,
# before the others and before the manifest: a half-published range.
POINTS = {"part:1": "PLANNED", "renamed:1": "PLANNED", "state:WRITTEN": "WRITTEN",
          "state:REGISTERED": "REGISTERED"}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(POINTS))
def test_sigkill_between_the_renames_of_one_range_and_at_every_state_is_exactly_once(
        point, spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=3)
    source = DataSource(topic, 3, produce, make_event=spread_event)
    source.produce(SIZES)
    config = crash_config(write_config, topic, hive=EVENT_TIME)
    killed = run_etl(config, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.describe()
    state = job_state(config)
    assert (state.last_batch_id, state.last_state) == (1, POINTS[point]), (state, killed.describe())
    root = table_root(warehouse_dir, DB, hive_table_name)
    manifests = list((root / "_etl_ranges").rglob("*.json"))
    parts = [f for f in final_files(root) if f.partition == 1]
    if point == "part:1":
        assert parts, "the task of partition 1 was killed after publishing a file"
        assert not list((root / "_etl_ranges" / f"{topic}+1").glob("*.json")), \
            "the manifest is published last: a half-published range has none"
    report(f"event time, {point}: batch 1 {state.last_state}, {len(parts)} files of partition 1's range "
           f"published, {len(manifests)} manifests")
    check_interim(hive_reader(spark), config, warehouse_dir, source.produced)  # as the random kills check it
    wait_for_lock_release(zk, config)
    recovered = recover_or_run(config, drain=False)
    after = job_state(config)
    assert (after.last_batch_id, after.last_state) == (1, "COMMITTED"), recovered.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    hours = {f.path.parent for f in final_files(root)}
    report(f"event time, {point}: recovered; {len(hours)} hourly partitions; {oracle.describe()}")


@pytest.mark.slow
def test_random_sigkills_with_event_time_partitioning_are_exactly_once(
        spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    seed = campaign_seed("ETL_EVENT_CRASH_SEED", 20261124)
    kills = int(os.environ.get("ETL_EVENT_CRASH_KILLS", "2"))
    report(f"random kills, event time: {seed}, {kills} kills (ETL_EVENT_CRASH_KILLS)")
    topic = new_topic(partitions=3)
    source = DataSource(topic, 3, produce, make_event=spread_event)
    source.produce(150)
    config = crash_config(write_config, topic, job={"max_records_per_partition": "50"}, hive=EVENT_TIME)
    baseline = run_etl(config)
    assert baseline.returncode == 0, baseline.describe()
    campaign = kill_campaign(config, zk, source, warehouse_dir, kills=kills, seed=seed.value,
                             baseline_seconds=baseline.seconds, read_table=hive_reader(spark),
                             min_backlog=150 * 3, max_backlog=300 * 3, log=report)
    report(campaign.summary())
    recover_or_run(config)
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    report(f"event time campaign: {oracle.describe()}; batches {job_state(config).last_batch_id}")
