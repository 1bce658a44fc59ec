"""Issue 30, topic routes on the real stack: one job, one table per topic by a `{topic}` template.
Twelve topics land in twelve tables, each offset once; a topic created between runs gets its
table; a topic whose name makes another's table is not loaded, and `etl status` says why; status
and `etl run --dry-run` name each topic's table; `etl verify --deep` passes over all of them, read
through Hive as one with the rejected table, an empty topic's table never created included.
"""
from __future__ import annotations

import re
import uuid

from etl.config.routes import table_name
from tests.harness.data import events_by_partition
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.paths import EVENTS_SCHEMA

DB = "etl_test"


def _routed(write_config, name: str, **more):
    return write_config(kafka={"topics": None},
                        hive={"table": None, "schema": None, "rejected_table": f"{name}_rejected"},
                        **{"route raw": {"topics_regex": re.escape(name) + r"[._-].*", "table": "{topic}",
                                         "schema": str(EVENTS_SCHEMA)}}, **more)


def test_twelve_topics_land_in_twelve_tables_by_template_each_offset_once(spark, new_topic, produce, write_config):
    name = f"rt{uuid.uuid4().hex[:8]}"
    topics = [new_topic(2, f"{name}.t{i:02d}") for i in range(12)]
    empty = new_topic(1, f"{name}.empty")  # no record yet: its offsets are committed, its table not created
    for i, topic in enumerate(topics):
        produce(topic, events_by_partition(2, 10 + i))
    config = _routed(write_config, name)

    run = run_etl(config)
    assert run.returncode == 0, run.describe()
    for i, topic in enumerate(topics):
        assert table_offsets(spark, DB, table_name("{topic}", topic)) == expected_offsets(topic, {0: 10 + i, 1: 10 + i})

    newcomer = new_topic(1, f"{name}.late")  # a topic created between runs gets its own table
    # A name that makes t00's table (Kafka itself refuses {name}_t00 beside {name}.t00): not loaded, and said why
    clash = new_topic(1, f"{name}-t00")
    produce(newcomer, events_by_partition(1, 7))
    produce(clash, events_by_partition(1, 3))
    again = run_etl(config)
    assert again.returncode == 0, again.describe()
    assert table_offsets(spark, DB, table_name("{topic}", newcomer)) == expected_offsets(newcomer, {0: 7})
    status = etl_command(config, "status")
    assert f"topic not loaded: {clash}" in status.stdout, status.stdout
    assert f"topic {newcomer} -> table {table_name('{topic}', newcomer)}" in status.stdout, status.stdout
    produce(topics[3], events_by_partition(2, 2))
    dry = etl_command(config, "run", "--dry-run")
    assert dry.returncode == 0 and f"-> {table_name('{topic}', topics[3])}" in dry.stdout, dry.stdout + dry.stderr
    history = etl_command(config, "history")
    assert f"{table_name('{topic}', newcomer)} 7" in history.stdout, history.stdout  # rows by table
    verify = etl_command(config, "verify", "--deep")
    assert verify.returncode == 0 and "and every row (--deep): OK" in verify.stdout, verify.stdout + verify.stderr
    assert not spark.catalog.tableExists(f"{DB}.{table_name('{topic}', empty)}")
    assert f"notice: table {DB}.{table_name('{topic}', empty)} does not exist yet" in verify.stdout, verify.stdout
