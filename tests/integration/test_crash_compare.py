"""The crash comparison with the peer (Spark's own Kafka source and Parquet file sink,
tests/perf/peer_job.py): one seeded SIGKILL campaign for each job, counted after every kill and
at the end through Hive, DuckDB's glob over the folder and Spark reading the folder
(tests/perf/crash_compare.py; the bench's `--crash-compare` runs the long campaign).

Asserted: our job shows no duplicate and no committed offset missing after every kill through
the readers that skip `_` names (Hive, Spark, DuckDB over the files not named `_...`), and every
produced offset exactly once through all of them, DuckDB's raw glob included, at the end; the
peer read as Spark reads it, through its `_spark_metadata` log, holds every offset exactly once
at the end (Spark's own claim). The peer's Hive and DuckDB counts depend on where the kills land: printed, not asserted.

It runs when ETL_PEER_CRASH_KILLS names the kills per job (1 takes about 155 s; CI leaves it
unset, and the test is skipped: the comparison is about the peer, and `bench.py --crash-compare`
runs it; our job's exactly-once under SIGKILLs, through Hive, Spark and the files, is
test_crash.py's and the campaigns'); replay with ETL_PEER_CRASH_SEED.
"""
from __future__ import annotations

import os

import pytest

from tests.harness.campaign import campaign_seed
from tests.harness.data import DataSource
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.perf.crash_compare import READERS, TEST_SCALE, OurJob, PeerJob, render, run_both

DB = "etl_test"


@pytest.fixture
def say(request):
    """Prints a finding, and shows it on the terminal even when output is captured (without -s)."""
    plugins = request.config.pluginmanager
    capture, terminal = plugins.get_plugin("capturemanager"), plugins.get_plugin("terminalreporter")

    def write(line: str) -> None:
        print(f"[crash-compare] {line}", flush=True)  # kept in a failing test's captured output
        if capture is not None and terminal is not None and request.config.getoption("capture") != "no":
            with capture.global_and_fixture_disabled():
                terminal.write_line(f"[crash-compare] {line}")
    return write


@pytest.fixture
def peer_table(spark, hive_table_name):
    name = f"{DB}.{hive_table_name}_peer"
    yield name
    spark.sql(f"DROP TABLE IF EXISTS {name}")  # external: the files stay in tmp_path


@pytest.mark.slow
def test_our_job_is_exactly_once_through_every_reader_and_the_peer_through_its_log(
        spark, zk, stack, new_topic, produce, write_config, warehouse_dir, peer_table, tmp_path, say):
    kills = int(os.environ.get("ETL_PEER_CRASH_KILLS", "0"))
    if not kills:
        pytest.skip("the crash comparison with the peer runs with ETL_PEER_CRASH_KILLS=N (or bench.py --crash-compare)")
    seed = campaign_seed("ETL_PEER_CRASH_SEED", 20261126)
    say(f"{seed}, {kills} kills per job (ETL_PEER_CRASH_KILLS)")
    topics = {"ours": new_topic(partitions=4), "peer": new_topic(partitions=4)}
    config = write_config(kafka={"topics": topics["ours"]},
                          job={"max_records_per_partition": str(TEST_SCALE.batch_rows)},
                          zookeeper={"session_timeout_seconds": "4"})
    ours = OurJob(config, zk)
    peer = PeerJob(stack.kafka_bootstrap, topics["peer"], tmp_path / "peer", peer_table, stack.metastore_uri)
    sources = {ours.name: DataSource(topics["ours"], 4, produce), peer.name: DataSource(topics["peer"], 4, produce)}

    ours_run, peer_run = run_both(ours, peer, sources.__getitem__, spark, kills=kills, seed=seed.value,
                                  scale=TEST_SCALE, log=say)
    for line in render([ours_run, peer_run]).splitlines():
        say(line)

    assert len(ours_run.kills) == kills and len(peer_run.kills) == kills
    for run in ours_run.records:  # after every kill (and every run that finished first)
        for reader in READERS:  # DuckDB's raw glob too: our temp files end in .inprogress
            seen = run.counts[reader]
            assert (seen.duplicates, seen.missing, seen.unreadable, seen.error) == (0, 0, 0, None), \
                f"our job, {reader} after {run.describe()}"
    for reader in READERS:
        final = ours_run.final[reader]
        assert (final.duplicates, final.missing, final.uncommitted, final.unreadable, final.error) == \
            (0, 0, 0, 0, None), f"our job at the end, {reader}: {final}"
    check_exactly_once(hive_reader(spark), config, sources[ours.name].expected, warehouse_dir, run_verify=False)
    through_log = peer_run.final["spark"]
    assert (through_log.duplicates, through_log.missing, through_log.uncommitted, through_log.error) == \
        (0, 0, 0, None), f"the peer read through its _spark_metadata log at the end: {through_log}"
