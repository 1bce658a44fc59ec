"""Damage to the job's state in ZooKeeper (issue 26, defect 6), on the real stack: a snapshot chunk
holding garbage, a plan chunk of an open batch deleted, a chunk crafted well-formed with other
offsets. Every command stops with the ETL's own error (exit 1, no traceback) naming the damaged
node and what to do, and what it says to do works. Chunks written before checksums still load."""
from __future__ import annotations

import json
import shutil
import zlib

import pytest

from etl.config import load_config
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.state.paths import ZkPaths
from tests.harness.data import events_by_partition, loaded_job
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.state import wait_for_lock_release

DB = "etl_test"
COMMANDS = (("run",), ("status",), ("verify",), ("recover",), ("reset-offsets", "--to", "earliest", "--yes"),
            ("history",))
# `etl history` reads the batches' headers, never the committed offsets: a damaged snapshot does
# not stop it, and it still shows the batches (whose `snapshot` says which one a backup restores).
READS_SNAPSHOTS = COMMANDS[:-1]


def paths_of(config) -> ZkPaths:
    cfg = load_config(config)
    return ZkPaths(cfg.zookeeper.root, cfg.job.name)


def committed_chunk(zk, config) -> str:
    paths = paths_of(config)
    name = json.loads(zk.get(paths.committed)[0])["snapshot"]
    return paths.snapshot_chunk(name, 0)


def every_command_names(config, node: str, remedy: str, commands=COMMANDS) -> None:
    """Each command exits 1 with one error line naming the node and the remedy, no traceback."""
    for command in commands:
        done = etl_command(config, *command, timeout=300)
        assert done.returncode == 1, f"etl {' '.join(command)}: {done.describe()}"
        assert "Traceback" not in done.stderr, f"etl {' '.join(command)}: {done.stderr[-3000:]}"
        assert node in done.stderr and remedy in done.stderr, f"etl {' '.join(command)}: {done.stderr[-3000:]}"


def test_a_snapshot_chunk_holding_garbage_is_named_by_every_command_until_restored(
        spark, new_topic, produce, write_config, hive_table_name, zk):
    topic, config = loaded_job(new_topic, produce, write_config, partitions=2, per_partition=30)
    chunk = committed_chunk(zk, config)
    backup = zk.get(chunk)[0]
    zk.set(chunk, b"garbage, not what the ETL wrote")
    every_command_names(config, chunk, "ZooKeeper backup", READS_SNAPSHOTS)
    assert etl_command(config, "history").returncode == 0
    zk.set(chunk, backup)  # what the error says to do: restore the node as it was written
    produce(topic, events_by_partition(2, 20, first_id=1000))
    assert run_etl(config).returncode == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 50, 1: 50})


def test_a_snapshot_chunk_crafted_well_formed_with_other_offsets_is_refused_by_its_checksum(
        spark, new_topic, produce, write_config, hive_table_name, zk):
    """Without a checksum the crafted chunk loaded silently: the job would have loaded from
    offset 5 again, and duplicated 25 records of each partition."""
    topic, config = loaded_job(new_topic, produce, write_config, partitions=2, per_partition=30)
    chunk = committed_chunk(zk, config)
    backup = zk.get(chunk)[0]
    entries = json.loads(zlib.decompress(backup))
    for entry in entries:
        entry[2] = 5  # the committed offset: [topic, partition, offset, origin, last, max_event_ms, active_at]
    zk.set(chunk, zlib.compress(json.dumps(entries, separators=(",", ":"), sort_keys=True).encode()))
    every_command_names(config, chunk, "checksum", READS_SNAPSHOTS)
    zk.set(chunk, backup)
    assert run_etl(config).returncode == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 30, 1: 30})


def test_a_deleted_plan_chunk_of_an_open_batch_is_named_and_dropping_the_batch_as_documented_works(
        spark, new_topic, produce, write_config, hive_table_name, zk, warehouse_dir, tmp_path):
    # ZooKeeper's shortest session (as the crash tests): the killed run's lock goes in 4 s, not 10
    topic, config = loaded_job(new_topic, produce, write_config, partitions=2, per_partition=30,
                               zookeeper={"session_timeout_seconds": "4"})
    produce(topic, events_by_partition(2, 20, first_id=1000))
    assert run_etl(config, fault="state:WRITTEN").returncode == -9  # batch 2 is WRITTEN, its files in the table
    wait_for_lock_release(zk, config)
    paths = paths_of(config)
    chunk = paths.plan_chunk(2, 0)
    zk.delete(chunk)
    every_command_names(config, chunk, f"deleteall {paths.batch(2)}")
    # What the error and docs/operating.md#damage-in-zookeeper say: drop the batch, move out what
    # `etl verify` names as uncovered, run again.
    zk.delete(paths.batch(2), recursive=True)
    zk.delete(paths.plan(2), recursive=True)
    verify = etl_command(config, "verify", "--json", timeout=300)
    assert verify.returncode == 1, verify.describe()
    uncovered = [p for p in json.loads(verify.stdout)["problems"] if p["kind"] == "uncovered_file"]
    assert len(uncovered) == 2, verify.stdout
    aside = tmp_path / "aside"
    aside.mkdir()
    for problem in uncovered:
        path = problem["detail"].split(" covers offsets")[0]
        shutil.move(path.removeprefix("file://"), aside)
    assert run_etl(config).returncode == 0
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 50, 1: 50})
    assert etl_command(config, "verify", timeout=300).returncode == 0


def planned(batch_id, ranges):
    return Batch(batch_id, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"},
                 tuple(ranges))


def test_a_plan_chunk_crafted_with_other_ranges_is_refused_and_chunks_without_checksums_still_load(
        open_store, zk):
    """Chunks written before checksums (the plan node and the snapshot's znode record none) load
    as they did; a chunk whose parent records a checksum must match it."""
    from etl.errors import StateDamaged
    store = open_store()
    assert store.acquire_lock() is None
    ranges = [OffsetRange("t", p, 0, 10, None) for p in range(3)]
    store.write_plan(planned(1, ranges))
    chunk = store.paths.plan_chunk(1, 0)
    original = zk.get(chunk)[0]
    crafted = json.loads(original)
    crafted[0][3] = 1000  # the first range's end
    zk.set(chunk, json.dumps(crafted).encode())
    with pytest.raises(StateDamaged, match=chunk):
        store.read_batch(1)
    zk.set(chunk, original)
    plan = json.loads(zk.get(store.paths.plan(1))[0])
    zk.set(store.paths.plan(1), json.dumps({k: v for k, v in plan.items() if k != "checksums"}).encode())
    zk.set(chunk, json.dumps(crafted).encode())  # an old plan's chunk is not checked: it loads as written
    assert store.read_batch(1)[0].ranges[0].end == 1000
    zk.set(chunk, original)
    batch, version = store.read_batch(1)
    batch, version = store.advance(batch, version, BatchState.WRITTEN, rows=30, rejected=0)
    batch, version = store.advance(batch, version, BatchState.REGISTERED)
    store.commit(batch, version)
    name = store.committed_state().snapshot
    meta = json.loads(zk.get(store.paths.snapshot(name))[0])
    assert "checksums" in meta
    zk.set(store.paths.snapshot(name), json.dumps({k: v for k, v in meta.items() if k != "checksums"}).encode())
    store.offsets._state_cache = None
    assert {k: o.value for k, o in store.committed_offsets().items()} == {("t", p): 10 for p in range(3)}
