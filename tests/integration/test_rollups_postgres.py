"""A rollup kept in PostgreSQL too ([rollup] target, docs/rollups.md), by the seed's mechanism: each
batch's merged aggregates upserted and its offsets moved, guarded by `next_offset = start`, in one
database transaction, before ZooKeeper's commit (etl.job.rollup_mirror).

The oracle: through SIGKILLs before the database's commit and between it and ZooKeeper's, a
target added to a rollup that already holds rows (ZooKeeper ahead of the database), a database
restored from an older copy, late rows by event time, a backwards reset and offsets written by
hand, the database's rows equal a recount of the raw table, value for value. Nothing is
hard-coded: the expected rows are recounted from the table in Spark SQL.
"""
from __future__ import annotations

import json

import psycopg
import pytest

from tests.harness.etl_process import run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader
from tests.harness.postgres import PrivatePostgres
from tests.harness.rollups import ROLLUP, log_event, recounted
from tests.harness.state import wait_for_lock_release

PARTITIONS = 2
COLUMNS = "ts_minute, action, events, with_user, amount, first_seen, last_event"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with PrivatePostgres(tmp_path_factory.mktemp("postgres")) as server:
        yield server


def test_a_rollup_in_postgres_equals_a_recount_through_each_order_of_the_two_commits(
        spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir, postgres, tmp_path):
    postgres.create_database(hive_table_name)
    url = f"postgresql://{postgres.user}@127.0.0.1:{postgres.port}/{hive_table_name}"
    secret = tmp_path / "rollups.password"
    secret.write_text("not-checked-by-trust-authentication\n")
    topic = new_topic(partitions=PARTITIONS)
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce_more(n: int, event=log_event) -> None:
        produce(topic, {p: [event(p * 100_000 + produced[p] + i) for i in range(n)] for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            produced[p] += n

    def database(sql: str, *params) -> list[tuple]:
        with psycopg.connect(url, options="-c TimeZone=UTC") as connection:
            cursor = connection.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    hive_only = {key: value.format(table=hive_table_name) for key, value in ROLLUP.items()}
    table = hive_only["table"]
    kept = {**hive_only, "target": url, "password_file": str(secret)}
    settings = dict(kafka={"topics": topic}, job={"max_records_per_partition": "150"},
                    zookeeper={"session_timeout_seconds": "4"})
    produce_more(200)
    assert run_etl(write_config(**settings, **{"rollup per_minute": hive_only})).returncode == 0
    config = write_config(**settings, **{"rollup per_minute": kept})

    def check_equal(what: str) -> set:
        check_exactly_once(hive_reader(spark), config, expected_offsets(topic, produced), warehouse_dir)
        held, recount = set(database(f"SELECT {COLUMNS} FROM {table}")), recounted(spark, hive_table_name)
        assert len(recount) >= 10 and held == recount, (what, sorted(recount - held)[:3], sorted(held - recount)[:3])
        return held

    # The target added to a rollup whose table holds two batches: the first transaction catches
    # up from their partials (ZooKeeper before PostgreSQL). Then killed before the database's
    # commit, and between it and ZooKeeper's (PostgreSQL before ZooKeeper): the resumed batch
    # finds its offsets there already, moved by itself, and adds nothing.
    produce_more(400)
    for fault in ("state:REGISTERED", "postgres:per_minute", "postgres:per_minute"):
        killed = run_etl(config, fault=fault)
        assert killed.returncode == -9, killed.describe()
        wait_for_lock_release(zk, config)
    assert run_etl(config).returncode == 0
    rows = check_equal("after the kills")

    # The database restored from an older copy: behind ZooKeeper, it catches up from the partials.
    copy = database(f"SELECT {COLUMNS} FROM {table}"), database("SELECT * FROM etl_rollup_offsets")
    produce_more(100)
    assert run_etl(config).returncode == 0
    with psycopg.connect(url, options="-c TimeZone=UTC") as connection:
        connection.execute(f"DELETE FROM {table}")
        connection.execute("DELETE FROM etl_rollup_offsets")
        connection.cursor().executemany(f"INSERT INTO {table} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                                        copy[0])
        connection.cursor().executemany("INSERT INTO etl_rollup_offsets VALUES (%s, %s, %s, %s, %s)", copy[1])
    assert set(copy[0]) == rows
    produce_more(50)
    assert run_etl(config).returncode == 0
    check_equal("after a restore")

    # Late rows by event time: errors stamped in the first minute, long after it, add to its row.
    first = min(row[0] for row in rows)
    before = database(f"SELECT events FROM {table} WHERE ts_minute = %s AND action = 'error'", first)[0][0]
    produce_more(7, event=lambda i: json.dumps({"event_id": i, "user_id": "late", "action": "error", "amount": 1.0,
                                                "ts": first.strftime("%Y-%m-%d %H:%M:05"), "ok": True}).encode())
    assert run_etl(config).returncode == 0
    after = database(f"SELECT events FROM {table} WHERE ts_minute = %s AND action = 'error'", first)[0][0]
    assert after == before + 7 * PARTITIONS, (before, after)
    check_equal("after late rows")

    # A backwards reset would have to take rows out of the database: refused, exit 2, naming the
    # flag; with --rebuild-rollups, the rows there are made again from the partials left in place.
    back = ("--to", f"{topic}:0=350", "--move-aside", "--execute")
    refused = run_etl(config, *back, command="reset-offsets")
    assert refused.returncode == 2 and "--rebuild-rollups" in refused.stderr, refused.describe()
    reset = run_etl(config, *back, "--rebuild-rollups", command="reset-offsets")
    assert reset.returncode == 0 and "made again" in reset.stdout, reset.describe()
    assert run_etl(config).returncode == 0
    check_equal("after a reset and the reload")

    # Offsets written ahead by hand: the next batch is refused, naming the rebuild, which mends it.
    database("UPDATE etl_rollup_offsets SET next_offset = next_offset + 1000 WHERE kafka_partition = 1")
    produce_more(20)
    refused = run_etl(config)
    assert refused.returncode == 2 and "etl rollup rebuild" in refused.stderr, refused.describe()
    rebuilt = run_etl(config, "--rollup", "per_minute", "--execute", command="rollup rebuild")
    assert rebuilt.returncode == 0 and "made again" in rebuilt.stdout, rebuilt.describe()
    assert run_etl(config).returncode == 0
    held = check_equal("after a rebuild")
    print(f"\nrollup {table} in PostgreSQL: {len(held)} groups equal a recount of {sum(produced.values())} records "
          f"through 3 SIGKILLs (1 before its commit, 2 between it and ZooKeeper's), a target added late, a restore, "
          f"late rows, a reset and a rebuild")
