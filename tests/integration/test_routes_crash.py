"""Issue 30: SIGKILLs of a routed job, then the per-table oracle. Two topics each into its own
table by a `{topic}` template, two more into one shared table, and one split by a field between
two tables (one taking the rest), one job, one plan and one commit for all five; `etl run` is
killed at random moments (tests.harness.campaign), then run to completion. Every produced
(topic, partition, offset) must be exactly once in one of its topic's tables or in the job's
rejected table, the files must tile each partition across all tables, and `etl verify` must pass
(tests.harness.oracle, which reads a routed job's tables from its routes).

Replay with ETL_ROUTES_CRASH_SEED=<seed>; scale with ETL_ROUTES_CRASH_KILLS=<n> (CI: 4).

The random kills land mostly before WRITTEN (the tasks are most of a run), so a second test
kills one routed batch at WRITTEN, its resumed run after one table's partition was registered
and before the others' (registered:<table>), and the next at REGISTERED: after the first, no
table shows a row; after the second, that table does and not every table; after the third, every
table shows its rows before any offset is committed; the fourth run commits the batch, and the
oracle holds.
"""
from __future__ import annotations

import json
import os
import re
import signal
import uuid

import pytest

from etl.config.routes import table_name
from tests.harness.campaign import campaign_seed, kill_campaign
from tests.harness.data import DataSource, TopicsSource
from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, hive_reader
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.state import job_state, wait_for_lock_release


@pytest.mark.slow
def test_random_sigkills_of_a_routed_job_leave_every_offset_once_in_its_own_table(
        spark, zk, new_topic, produce, write_config, warehouse_dir):
    seed = campaign_seed("ETL_ROUTES_CRASH_SEED", 20261126)
    kills = int(os.environ.get("ETL_ROUTES_CRASH_KILLS", "3"))
    name = f"rc{uuid.uuid4().hex[:8]}"
    own = [new_topic(2, f"{name}.own{i}") for i in range(2)]
    shared = [new_topic(2, f"{name}.shared{i}") for i in range(2)]
    split = new_topic(2, f"{name}.split")
    source = TopicsSource([DataSource(topic, 2, produce) for topic in own + shared] +
                          [DataSource(split, 2, produce, make_event=_action_event)])
    source.produce(60)
    config = write_config(
        kafka={"topics": None}, zookeeper={"session_timeout_seconds": "4"},
        job={"max_records_per_partition": "30"},
        hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected"},
        **{"route own": {"topics_regex": re.escape(name) + r"[.]own.*", "table": "{topic}",
                         "schema": str(EVENTS_SCHEMA)},
           "route shared": {"topics": ", ".join(shared), "table": f"{name}_shared", "schema": str(EVENTS_SCHEMA)},
           "route clicks": {"topics": split, "field": "action", "values": "click", "table": f"{name}_clicks",
                            "schema": str(EVENTS_SCHEMA)},
           "route rest": {"topics": split, "field": "action", "values": "*", "table": f"{name}_rest",
                          "schema": str(EVENTS_SCHEMA)}})

    baseline = run_etl(config)  # two batches of 30 a partition, over all four topics at once
    assert baseline.returncode == 0, baseline.describe()
    assert baseline.stdout.count("COMMITTED") == 2, baseline.stdout
    print(f"[routes-crash] {seed}, {kills} kills; baseline {baseline.seconds:.1f}s")

    campaign = kill_campaign(config, zk, source, warehouse_dir, kills=kills, seed=seed.value,
                             baseline_seconds=baseline.seconds, read_table=hive_reader(spark),
                             produce_per_partition=(20, 60), min_backlog=60 * 10, max_backlog=120 * 10)
    print(f"[routes-crash] {campaign.summary()}")
    assert len(campaign.kills) == kills

    final = run_etl(config)  # `etl recover` does not take routes yet: the run resumes the open batch itself
    assert final.returncode == 0, final.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    tables = {table_name("{topic}", topic) for topic in own} | {f"{name}_shared", f"{name}_clicks", f"{name}_rest"}
    for table in tables:  # each table holds its own topics' records, and some
        assert spark.sql(f"SELECT count(*) FROM etl_test.`{table}`").collect()[0][0] > 0, table
    print(f"[routes-crash] final run {final.seconds:.1f}s; {oracle.describe()}; "
          f"batches: {job_state(config).last_batch_id}; kills by state: {campaign.histogram('state')}")


@pytest.mark.slow
def test_a_routed_batch_killed_at_written_then_at_registered_is_exactly_once_in_every_table(
        spark, zk, new_topic, produce, write_config, warehouse_dir):
    name, source, config, tables = whole_and_split_job(new_topic, produce, write_config)

    def visible() -> dict[str, int]:
        for table in tables:
            spark.catalog.refreshTable(f"etl_test.`{table}`")
        return {t: spark.sql(f"SELECT count(*) FROM etl_test.`{t}`").collect()[0][0] for t in tables}

    # Between WRITTEN and REGISTERED, the kill lands after the clicks table's partition was
    # registered and before another's (registered:<table>): one table shows its rows, not all.
    partly = {f"{name}_clicks"}
    for point, state, shown in (("state:WRITTEN", "WRITTEN", set()), (f"registered:{name}_clicks", "WRITTEN", partly),
                                ("state:REGISTERED", "REGISTERED", set(tables))):
        killed = run_etl(config, fault=point)
        assert killed.returncode == -signal.SIGKILL, killed.describe()
        after = job_state(config)
        assert (after.last_batch_id, after.last_state, after.committed) == (1, state, {}), (after, killed.describe())
        rows = visible()
        assert {table for table, count in rows.items() if count} >= shown, (point, rows)
        assert shown != partly or not all(rows.values()), (point, rows)  # registered part of the way
        assert shown or not any(rows.values()), (point, rows)
        print(f"[routes-crash] killed at {point}: batch 1 {after.last_state}, rows visible {rows}")
        wait_for_lock_release(zk, config)
    final = run_etl(config)
    assert final.returncode == 0 and "batch 1 (resumed) COMMITTED" in final.stdout, final.describe()
    oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
    assert visible()[f"{name}_clicks"] == sum(1 for i in range(60) if i % 3 == 0), visible()  # ids 0-59
    print(f"[routes-crash] WRITTEN, then REGISTERED, then resumed: {oracle.describe()}")


def whole_and_split_job(new_topic, produce, write_config, per_partition: int = 30):
    """A topic by `{topic}` template and one split by `action` (clicks, the rest), 30 records a
    partition produced, 4 s sessions: (name, source, config, [whole's, clicks', rest's table])."""
    name = f"rk{uuid.uuid4().hex[:8]}"
    whole, split = new_topic(2, f"{name}.whole"), new_topic(2, f"{name}.split")
    source = TopicsSource([DataSource(whole, 2, produce), DataSource(split, 2, produce, make_event=_action_event)])
    source.produce(per_partition)
    route = {"schema": str(EVENTS_SCHEMA)}
    config = write_config(
        kafka={"topics": None}, zookeeper={"session_timeout_seconds": "4"},
        hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected"},
        **{"route whole": {**route, "topics": whole, "table": "{topic}"},
           "route clicks": {**route, "topics": split, "field": "action", "values": "click", "table": f"{name}_clicks"},
           "route rest": {**route, "topics": split, "field": "action", "values": "*", "table": f"{name}_rest"}})
    return name, source, config, [table_name("{topic}", whole), f"{name}_clicks", f"{name}_rest"]


def _action_event(i: int) -> bytes:
    """An event whose action splits it: every third a click, the others to the rest."""
    return json.dumps({"event_id": i, "user_id": f"u{i % 7}", "action": "click" if i % 3 == 0 else "view",
                       "ts": "2026-11-21 10:00:00"}).encode()
