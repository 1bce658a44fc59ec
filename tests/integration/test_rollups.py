"""A rollup in Hive, kept by the card's own mechanism, and in PostgreSQL too, by the seed's
([rollup <name>], docs/rollups.md). In Hive each range's partial is a file named by the range's
offsets, published after the range's data file and before the batch is WRITTEN, registered as a
partition of `<rollup>_partials`, and merged by the view `<rollup>`. In PostgreSQL each batch's
merged partials are upserted and its offsets moved, guarded by `next_offset = start`, in one
transaction before ZooKeeper's commit (etl.job.rollup_mirror).

The oracle: through SIGKILLs between a data file's rename and its partial's, right after a
partial's rename, at WRITTEN, before the database's commit and between it and ZooKeeper's, and
in a compaction right after a folded partial's rename and between the two metastore switches; a
target added to a rollup that already holds rows (ZooKeeper ahead of the database), a database
restored from an older copy, the database stopped while a batch is REGISTERED, late rows by
event time, backwards resets, a merged file deleted and recovered, a changed definition,
rebuilds, and partials and offsets changed by hand: the view and the database's rows equal a
recount of the raw table, value for value (counts, sums, minimums and maximums, NULLs counted
as SQL counts them), and every data file has exactly one partial of the same name.
Nothing is hard-coded: the expected rows are recounted from the table in Spark SQL.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from etl.config import load_config
from etl.config.model import HiveFormat
from etl.model.naming import parse_final_name
from tests.harness.etl_process import EtlProcess, run_etl
from tests.harness.oracle import check_exactly_once, deep_verification, expected_offsets, hive_reader
from tests.harness.postgres import StackPostgres
from tests.harness.rollups import DB, ERRORS_ONLY, ROLLUP, in_utc, log_event, recounted
from tests.harness.state import wait_for_lock_release
from tests.harness.warehouse_files import DATA_SUFFIX, file_footer

PARTITIONS = 2
FILE_FORMAT = HiveFormat(DATA_SUFFIX[1:])
COLUMNS = "ts_minute, action, events, with_user, amount, first_seen, last_event"


@pytest.fixture(scope="module")
def postgres():
    """The local stack's PostgreSQL (Debian's, on loopback), started for this module alone."""
    with StackPostgres() as server:
        yield server


def file_stems(table_dir: Path) -> list[str]:
    """The stem of every committed file of the table: a batch's, or a merged one's. Superseded
    files are deleted at once here (keep_superseded_minutes = 0)."""
    return sorted(path.name.removesuffix(DATA_SUFFIX) for path in table_dir.rglob(f"*{DATA_SUFFIX}")
                  if parse_final_name(path.name, FILE_FORMAT) is not None)


def test_a_rollup_in_hive_and_in_postgres_equals_a_recount_through_kills_resets_and_hands(
        spark, zk, new_topic, produce, write_config, hive_table_name, warehouse_dir, postgres, tmp_path):
    topic = new_topic(partitions=PARTITIONS)
    produced = {p: 0 for p in range(PARTITIONS)}

    def produce_more(n: int, event=log_event) -> None:
        produce(topic, {p: [event(p * 100_000 + produced[p] + i) for i in range(n)] for p in range(PARTITIONS)})
        for p in range(PARTITIONS):
            produced[p] += n

    url = postgres.create_database(hive_table_name)
    secret = tmp_path / "rollups.password"
    secret.write_text("not-checked-by-trust-authentication\n")

    def database(sql: str, *params) -> list[tuple]:
        with psycopg.connect(url, options="-c TimeZone=UTC") as connection:
            cursor = connection.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    rollup = {key: value.format(table=hive_table_name) for key, value in ROLLUP.items()}
    view, partials = rollup["table"], f"{rollup['table']}_partials"
    kept = {**rollup, "target": url, "password_file": str(secret)}
    settings = dict(kafka={"topics": topic}, job={"max_records_per_partition": "150"},
                    zookeeper={"session_timeout_seconds": "4"})
    table_dir, partials_dir = (Path(warehouse_dir) / f"{DB}.db" / name for name in (hive_table_name, partials))

    def check_both(config, where: str = ROLLUP["where"]) -> set:
        check_exactly_once(hive_reader(spark), config, expected_offsets(topic, produced), warehouse_dir)
        rolled = check_view_is_a_recount(spark, hive_table_name, view, partials, table_dir, partials_dir, where)
        held = set(database(f"SELECT {COLUMNS} FROM {view}"))
        assert held == rolled, (sorted(rolled - held)[:3], sorted(held - rolled)[:3])
        return held

    # In Hive alone first: killed with partition 0's data file published and its partial not
    # written; then right after a partial's rename; then at WRITTEN (every partial in place, no
    # partition of the partials table added yet); then every batch to the end.
    hive_only = write_config(**settings, **{"rollup per_minute": rollup})
    produce_more(400)
    for fault in ("renamed:0", "rollup:1", "state:WRITTEN"):
        killed = run_etl(hive_only, fault=fault)
        assert killed.returncode == -9, killed.describe()
        wait_for_lock_release(zk, hive_only)
    assert run_etl(hive_only).returncode == 0  # the open batch, then the rest, until caught up
    check_exactly_once(hive_reader(spark), hive_only, expected_offsets(topic, produced), warehouse_dir)
    check_view_is_a_recount(spark, hive_table_name, view, partials, table_dir, partials_dir)

    # The target added: the first transaction catches up the batches ZooKeeper committed from
    # their partials (ZooKeeper before PostgreSQL). Killed before the database's commit, and
    # between it and ZooKeeper's (PostgreSQL before ZooKeeper): the resumed batch finds its
    # offsets there moved by itself, and adds nothing.
    config = write_config(**settings, **{"rollup per_minute": kept})
    produce_more(300)
    for fault in ("state:REGISTERED", "postgres:per_minute"):
        killed = run_etl(config, fault=fault)
        assert killed.returncode == -9, killed.describe()
        wait_for_lock_release(zk, config)
    assert run_etl(config).returncode == 0
    rows = check_both(config)

    # The database restored from a copy taken 100 records a partition ago: behind ZooKeeper, the
    # next batch catches up from the partials. Its records are late by event time: errors
    # stamped in the first minute, which add to that minute's row.
    copy = database(f"SELECT {COLUMNS} FROM {view}"), database("SELECT * FROM etl_rollup_offsets")
    produce_more(100)
    assert run_etl(config).returncode == 0
    with psycopg.connect(url) as connection:
        connection.execute(f"DELETE FROM {view}")
        connection.execute("DELETE FROM etl_rollup_offsets")
        connection.cursor().executemany(f"INSERT INTO {view} ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)", copy[0])
        connection.cursor().executemany("INSERT INTO etl_rollup_offsets VALUES (%s, %s, %s, %s, %s)", copy[1])
    first = min(row[0] for row in rows)
    minute = f"SELECT events FROM {view} WHERE ts_minute = %s AND action = 'error'"
    before = next(row[2] for row in recounted(spark, hive_table_name) if row[:2] == (first, "error"))
    produce_more(7, event=lambda i: json.dumps({"event_id": i, "user_id": "late", "action": "error", "amount": 1.0,
                                                "ts": first.strftime("%Y-%m-%d %H:%M:05"), "ok": True}).encode())
    assert run_etl(config).returncode == 0
    assert database(minute, first) == [(before + 7 * PARTITIONS,)], (before, database(minute, first))
    check_both(config)

    # The database stops answering mid-batch: the run is held right after its batch is
    # REGISTERED (Hive has the partitions, neither commit ran), the database stopped, the run let
    # go: its transaction is retried, then exit 75 (retry later), the batch left REGISTERED. The
    # next run, the database still down, exits 75 before it resumes the batch; the database back,
    # the next one finishes it, once (checked after the reset below).
    produce_more(5)
    holds = tmp_path / "holds"  # where the held run leaves its marker (etl.faults, hold:)
    holds.mkdir()
    held = EtlProcess(config, fault="state:REGISTERED", action=f"hold:{holds}")
    held.wait_until(lambda: any(holds.iterdir()), timeout=240, what="the run held at REGISTERED")
    postgres.stop()
    for marker in holds.iterdir():
        marker.unlink()
    code = held.wait(timeout=240)
    held.reap(grace=2.0)
    held.close()
    assert code == 75 and "cannot reach" in held.stderr, held.describe()
    down = run_etl(config)
    postgres.start()
    assert down.returncode == 75 and "cannot reach" in down.stderr, down.describe()
    resumed = run_etl(config)
    assert resumed.returncode == 0, resumed.describe()

    # A backwards reset would have to take rows out of the database: refused, exit 2, naming the
    # flag. With --rebuild-rollups and --move-aside, partition 0's last ranges move out with their
    # partials (a partial left behind would be counted beside the reloaded range's), and the
    # database's rows are made again from the partials left in place; the offsets are reloaded.
    back = ("--to", f"{topic}:0=550", "--move-aside", "--execute")
    refused = run_etl(config, *back, command="reset-offsets")
    assert refused.returncode == 2 and "--rebuild-rollups" in refused.stderr, refused.describe()
    reset = run_etl(config, *back, "--rebuild-rollups", command="reset-offsets")
    assert reset.returncode == 0 and "made again" in reset.stdout, reset.describe()
    moved = [p.name for p in (Path(warehouse_dir) / "_etl_moved_aside").rglob(f"*{partials}/*/*/*")]
    assert len(moved) >= 2, moved
    assert run_etl(config).returncode == 0
    check_both(config)

    # A compaction merges a partition's files, and folds their partials into one per merged file,
    # in a new folder the partials partition is switched to with the data's. Killed right after a
    # folded partial's rename, then between the two metastore switches; the next `etl compact`
    # carries it on. Then batches write into the moved partitions; `verify --deep` recomputes
    # each folded partial from its merged file.
    compaction = {"min_files": "2", "keep_superseded_minutes": "0"}
    compacting = write_config(**settings, compaction=compaction, **{"rollup per_minute": kept})
    partition = next(table_dir.glob("dt=*/hour=*")).relative_to(table_dir).as_posix()
    for fault in ("compact:partials-folded", "compact:partials-switched"):
        killed = run_etl(compacting, "--partition", partition, "--execute", command="compact", fault=fault)
        assert killed.returncode == -9, killed.describe()
        wait_for_lock_release(zk, compacting)
    compacted = run_etl(compacting, "--partition", partition, "--execute", command="compact")
    assert compacted.returncode == 0, compacted.describe()
    merged = [path for path in table_dir.rglob(f"*{DATA_SUFFIX}") if b"etl.ranges" in file_footer(path)]
    assert merged and all("_compacted" in path.parent.as_posix() for path in merged), merged
    folded = [path for path in partials_dir.rglob("*.parquet") if b"etl.checksums" in file_footer(path)]
    assert sorted(p.name for p in folded) == sorted(p.name for p in merged), (folded, merged)
    produce_more(10)
    assert run_etl(compacting).returncode == 0
    check_both(compacting)
    assert deep_verification(load_config(compacting), compacting)[1] == []
    # A merged file deleted by hand: `etl recover` moves its folded partial out and rewrites its
    # ranges from Kafka, each with its partial; the database, which counted them once, stays.
    merged[0].unlink()
    recovered = run_etl(compacting, "--execute", command="recover")
    assert recovered.returncode == 0, recovered.describe()
    check_both(compacting)

    # The rollup's definition changed, and another rollup added to the loaded table: each refused
    # before a batch is planned, naming it. Then each rollup is rebuilt from the rows the table
    # holds (a merged file's partial computed from it whole), the database's rows with it.
    produce_more(10)
    changed_rollup, late = {**kept, "where": ERRORS_ONLY}, {**rollup, "table": f"{hive_table_name}_late"}
    changed = write_config(**settings, compaction=compaction,
                           **{"rollup per_minute": changed_rollup, "rollup late": late})
    refused = run_etl(changed)
    assert refused.returncode == 2 and "another definition" in refused.stderr, refused.describe()
    only_late = write_config(**settings, **{"rollup per_minute": kept, "rollup late": late})
    refused = run_etl(only_late)
    assert refused.returncode == 2 and "[rollup late]: the table already holds rows" in refused.stderr, \
        refused.describe()
    for name in ("per_minute", "late"):
        rebuilt = run_etl(changed, "--rollup", name, "--execute", command="rollup rebuild")
        assert rebuilt.returncode == 0 and "done:" in rebuilt.stdout, rebuilt.describe()
    loaded = run_etl(changed)  # its partitions of both rollups' partials registered where compactions moved them
    assert loaded.returncode == 0, loaded.describe()
    check_both(changed, ERRORS_ONLY)
    check_view_is_a_recount(spark, hive_table_name, late["table"], f"{late['table']}_partials", table_dir,
                            table_dir.parent / f"{late['table']}_partials")

    # Hands: one group's count changed in the database; `etl verify --deep` names it, and nothing
    # else. Then one partial deleted, one's counts changed, and the database's offsets of
    # partition 1 moved 1,000 ahead. `etl verify --deep` recomputes each partial from its range's
    # rows and names both; the run refuses before planning (exit 2), naming the rebuild; a
    # rebuild mends all four.
    database(f"UPDATE {view} SET events = events + 1 WHERE ts_minute = %s AND action = 'error'", first)
    _, found = deep_verification(load_config(changed), changed)
    assert len(found) == 1 and re.findall(r"\[([a-z_]+)\] ", found[0]) == ["rollup_postgres_differs"], found
    held = sorted(path for path in partials_dir.rglob("*.parquet"))
    held[0].unlink()
    changed_counts = pq.read_table(held[1])
    pq.write_table(changed_counts.set_column(changed_counts.schema.get_field_index("events"), "events",
                                             pc.add(changed_counts["events"], 1)), held[1])
    _, found = deep_verification(load_config(changed), changed)
    kinds = {kind for kind in ("rollup_partial_missing", "rollup_partial_differs") if kind in "\n".join(found)}
    assert kinds == {"rollup_partial_missing", "rollup_partial_differs"}, found  # the database's row: uncompared
    database("UPDATE etl_rollup_offsets SET next_offset = next_offset + 1000 WHERE kafka_partition = 1")
    produce_more(20)
    refused = run_etl(changed)
    assert refused.returncode == 2 and "etl rollup rebuild" in refused.stderr, refused.describe()
    rebuilt = run_etl(changed, "--rollup", "per_minute", "--execute", command="rollup rebuild")
    assert rebuilt.returncode == 0 and "made again" in rebuilt.stdout, rebuilt.describe()
    assert run_etl(changed).returncode == 0
    final = check_both(changed, ERRORS_ONLY)
    print(f"\nrollup {view}: {len(rows)} groups, then {len(final)} (errors only), in Hive and in PostgreSQL, equal a "
          f"recount of {sum(produced.values())} records, through 7 SIGKILLs (3 around the partials, 1 before the "
          f"database's commit, 1 between it and ZooKeeper's, 2 in a compaction folding partials), a target added "
          f"late, a restore, late rows, a reset that moved {len(moved)} partials aside, a merged file deleted and "
          f"recovered, three rebuilds, and hands on partials and offsets")


def check_view_is_a_recount(spark, table: str, view: str, partials: str, table_dir: Path, partials_dir: Path,
                            where: str = ROLLUP["where"]) -> set:
    """The view's rows, once checked equal to a recount of the table, and each file's partial in place."""
    data_stems = file_stems(table_dir)
    partial_stems = sorted(path.name.removesuffix(".parquet") for path in partials_dir.rglob("*") if path.is_file())
    assert data_stems and partial_stems == data_stems, (data_stems, partial_stems)  # one each, no temp file
    spark.sql(f"REFRESH TABLE {DB}.{partials}")
    spark.sql(f"REFRESH TABLE {DB}.{table}")
    recount, rolled = recounted(spark, table, where), in_utc(spark, f"SELECT * FROM {DB}.{view}")
    assert len(recount) >= 10 and rolled == recount, (sorted(recount - rolled)[:5], sorted(rolled - recount)[:5])
    return rolled
