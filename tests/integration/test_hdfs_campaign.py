"""The SIGKILL campaign (tests/integration/test_crash.py's random kills) with the warehouse on a
REAL HDFS: `etl run` SIGKILLed at random moments (start-up, planning, uploads to the DataNode,
renames, registration, commit) while the files go through WebHDFS to the shared NameNode and
DataNode. After every kill the invariants that must hold at any moment are checked, on a fresh
local copy of the table's files and through Hive (hdfs:// locations); at the end a recovery
run and the exactly-once oracle.

ETL_HDFS_CRASH_KILLS sets the number of kills (2 in CI, to keep the suite's time), and
ETL_HDFS_CRASH_SEED the seed (replay a failure with the seed it printed).
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.harness.campaign import campaign_seed, kill_campaign
from tests.harness.data import DataSource
from tests.harness.etl_process import run_etl
from tests.harness.hdfs import copy_to_local
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.recovery import recover_or_run
from tests.harness.state import job_state

pytestmark = pytest.mark.cell("hdfs-3.5")


def test_random_sigkills_on_an_hdfs_warehouse_then_completion_is_exactly_once(
        spark, zk, hdfs, new_topic, produce, write_config, tmp_path):
    seed = campaign_seed("ETL_HDFS_CRASH_SEED", 20261125)
    kills = int(os.environ.get("ETL_HDFS_CRASH_KILLS", "2"))
    print(f"[hdfs-campaign] {seed}, {kills} kills (ETL_HDFS_CRASH_KILLS)")
    topic = new_topic(partitions=4)
    source = DataSource(topic, 4, produce)
    source.produce(150)
    root = hdfs.job_folder("campaign")
    config = write_config(kafka={"topics": topic}, zookeeper={"session_timeout_seconds": "4"},
                          job={"max_records_per_partition": "50"}, warehouse=hdfs.warehouse(root))
    fs = hdfs.filesystem()
    copy = tmp_path / "warehouse-copy"

    def fresh_copy():
        shutil.rmtree(copy, ignore_errors=True)
        return copy_to_local(fs, root, copy)

    baseline = run_etl(config)  # a normal run (3 batches of 50 per partition) sets the delay range
    assert baseline.returncode == 0, baseline.describe()
    campaign = kill_campaign(config, zk, source, fresh_copy, kills=kills, seed=seed.value,
                             baseline_seconds=baseline.seconds, read_table=hive_reader(spark),
                             min_backlog=150 * 4, max_backlog=300 * 4, log=print)
    print(f"[hdfs-campaign] {campaign.summary()}")
    assert len(campaign.kills) == kills

    final = recover_or_run(config)
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, fresh_copy())
    print(f"[hdfs-campaign] baseline {baseline.seconds:.1f}s; final run {final.seconds:.1f}s; {oracle.describe()}; "
          f"batches: {job_state(config).last_batch_id}")
