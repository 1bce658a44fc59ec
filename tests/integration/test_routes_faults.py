"""Issue 30: a routed job (a topic by `{topic}` template, one split by a field between two tables)
through the faults the one-table job is tested against in test_crash.py and
test_operator_mistakes.py, where a routed job could differ: its batch registers several tables
one after another, and its commit covers every table's offsets at once.

- The driver is SIGSTOPped after one table's partition was registered and before the next's
  (registered:<table>), until its ZooKeeper session expires; another run takes the lock and
  commits the batch. The first run, let go, finds its lock lost and commits nothing: every
  offset is once in its own table (the per-table oracle, verify --deep's check included).
- Two runs started together: one loads, the other says the job is already running.
- A topic deleted and recreated under its route stops the run naming it (exit 1), and no
  table's offsets move, not even those of the topics that were not recreated.
"""
from __future__ import annotations

import concurrent.futures

import pytest

from etl.errors import EXIT_RETRYABLE
from tests.harness.data import events_by_partition
from tests.harness.etl_process import EtlProcess, run_etl, take_over_past_its_session
from tests.harness.kills import CLEANUP
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.state import job_state
from tests.integration.test_pipeline import recreate_topic
from tests.integration.test_routes_crash import whole_and_split_job

pytestmark = pytest.mark.slow


def registered(spark, table: str) -> bool:
    """Whether the table exists and Hive lists a partition of it (the metastore, asked afresh)."""
    return spark.catalog.tableExists(f"etl_test.{table}") and \
        bool(spark.sql(f"SHOW PARTITIONS etl_test.`{table}`").collect())


def test_a_routed_run_stopped_mid_registration_past_its_session_commits_nothing_after_another_took_over(
        spark, zk, new_topic, produce, write_config, warehouse_dir):
    name, source, config, _tables = whole_and_split_job(new_topic, produce, write_config)
    # The pause only has to last until the test has seen the partial registration and stopped
    # the driver (as test_crash.py's session test): time passes for the stopped sleep too.
    first = EtlProcess(config, fault=f"registered:{name}_clicks", action="sleep:5")
    try:
        first.wait_until(lambda: registered(spark, f"{name}_clicks"), 300, "the clicks table's partition registered",
                         poll=0.2)
        assert job_state(config).last_state == "WRITTEN"
    except BaseException:
        first.kill(CLEANUP)
        raise
    took = take_over_past_its_session(first, zk, config)
    print(f"[routes-faults] driver SIGSTOPped between two tables' registrations; session 0x{took.session:x} "
          f"expired, lock gone after {took.lock_gone_after:.1f}s")
    second, code = took.second, took.first_code
    assert second.returncode == 0 and "batch 1 (resumed) COMMITTED" in second.stdout, second.describe()
    assert "no longer holds the job lock" in first.stderr or "lost the job lock" in first.stderr, first.describe()
    assert code == EXIT_RETRYABLE and "Traceback" not in first.stderr, first.describe()
    state = job_state(config)
    assert (state.last_batch_id, state.last_state) == (1, "COMMITTED"), state
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    print(f"[routes-faults] the stopped run, let go, exited {code}; {oracle.describe()}")


def test_two_routed_runs_at_once_load_once_and_a_recreated_topic_stops_every_table_naming_it(
        spark, new_topic, produce, write_config, warehouse_dir, kafka_admin):
    name, source, config, tables = whole_and_split_job(new_topic, produce, write_config)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        together = list(pool.map(lambda _: run_etl(config), range(2)))
    assert [r.returncode for r in together] == [0, 0], [r.describe() for r in together]
    assert sum("is already running" in r.stdout for r in together) >= 1, [r.stdout for r in together]
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    print(f"[routes-faults] two runs at once: {oracle.describe()}")

    whole, split = (s.topic for s in source.sources)
    before = job_state(config).committed
    recreate_topic(kafka_admin, whole, partitions=2)
    produce(whole, events_by_partition(2, 40, first_id=1000))
    source.sources[1].produce(10)  # the split topic gets more too: it waits with the others
    refused = run_etl(config)
    assert refused.returncode == 1, refused.describe()
    assert f"topic {whole!r} was deleted and recreated" in refused.stderr, refused.describe()
    assert job_state(config).committed == before
    rows = {t: spark.sql(f"SELECT count(*) FROM etl_test.`{t}`").collect()[0][0] for t in tables}
    assert sum(rows.values()) == 120, rows  # the first load's rows, nothing of the refused run's
    print(f"[routes-faults] {whole} recreated: the run exited 1 naming it; rows per table unchanged {rows}")
