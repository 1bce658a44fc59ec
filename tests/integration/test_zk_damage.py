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
from etl.errors import EXIT_BATCH_FAILED, StateDamaged
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.state.paths import ZkPaths
from tests.harness.data import events_by_partition, loaded_job
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import expected_offsets, table_offsets
from tests.harness.state import wait_for_lock_release

DB = "etl_test"
COMMANDS = (("run",), ("status",), ("verify",), ("recover", "--execute"),
            ("reset-offsets", "--to", "earliest", "--execute"), ("history",))
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
    snapshot = chunk.rsplit("/", 1)[0]
    meta = zk.get(snapshot)[0]
    stripped(zk, snapshot)  # the parent's checksums removed too: refused, not loaded unchecked
    every_command_names(config, snapshot, "records no checksums", (("run", "--dry-run"), ("run",)))
    zk.set(snapshot, meta)
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
    """Chunks written before checksums (the plan node records none, and the job's root has no
    mark) load as they did; a chunk whose parent records a checksum must match it."""
    from etl.errors import StateDamaged
    store = open_store()
    assert store.session.acquire_lock() is None
    ranges = [OffsetRange("t", p, 0, 10, None) for p in range(3)]
    store.batches.write_plan(planned(1, ranges))
    chunk = store.session.paths.plan_chunk(1, 0)
    original = zk.get(chunk)[0]
    crafted = json.loads(original)
    crafted[0][3] = 1000  # the first range's end
    zk.set(chunk, json.dumps(crafted).encode())
    with pytest.raises(StateDamaged, match=chunk):
        store.batches.read_batch(1)
    zk.set(chunk, original)
    zk.delete(store.session.paths.checksummed)  # a job an older version wrote: its root has no mark
    stripped(zk, store.session.paths.plan(1))
    store.session.release_lock()
    store = open_store()  # a command of this version on that job
    assert store.session.acquire_lock() is None
    zk.set(chunk, json.dumps(crafted).encode())  # an old plan's chunk is not checked: it loads as written
    assert store.batches.read_batch(1)[0].ranges[0].end == 1000
    zk.set(chunk, original)
    batch, version = store.batches.read_batch(1)
    batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=30, rejected=0)
    batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
    store.batches.commit(batch, version)
    name = store.offsets.committed_state().snapshot
    assert "checksums" in json.loads(zk.get(store.session.paths.snapshot(name))[0])
    assert zk.exists(store.session.paths.checksummed) is not None  # marked again by this version's first write
    assert {k: o.value for k, o in store.offsets.committed_offsets().items()} == {("t", p): 10 for p in range(3)}


def stripped(zk, node: str) -> None:
    """The node's JSON without its `checksums` list, as a hand edit leaves it."""
    meta = json.loads(zk.get(node)[0])
    zk.set(node, json.dumps({k: v for k, v in meta.items() if k != "checksums"}).encode())


def moved_back(zk, chunk: str, offset: int) -> None:
    """A snapshot chunk crafted well-formed: every partition's committed offset set to `offset`."""
    entries = json.loads(zlib.decompress(zk.get(chunk)[0]))
    for entry in entries:
        entry[2] = offset
    zk.set(chunk, zlib.compress(json.dumps(entries, separators=(",", ":"), sort_keys=True).encode()))


def committed_to_49(store):
    """`store` with one batch committed: partition t[0] loaded to offset 49."""
    assert store.session.acquire_lock() is None
    store.batches.write_plan(planned(1, [OffsetRange("t", 0, 0, 49, None)]))
    batch, version = store.batches.read_batch(1)
    batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=49, rejected=0)
    batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
    store.batches.commit(batch, version)
    return store


def test_a_snapshot_stripped_of_its_checksums_is_refused_once_the_job_is_checksummed(open_store, zk):
    """Removing the parent's `checksums` list made a crafted chunk (offset 49 moved back to 20)
    load unchecked, as if written before checksums: the next run (and the dry run) planned 29
    committed offsets again. The job's root records that its state is checksummed, so a parent
    written since without checksums is refused, naming it (every command stops on it with exit 1
    before writing anything: test_a_snapshot_chunk_crafted_well_formed_with_other_offsets_...)."""
    store = committed_to_49(open_store())
    assert zk.exists(store.session.paths.checksummed) is not None  # marked with the first checksummed write
    name = store.offsets.committed_state().snapshot
    stripped(zk, store.session.paths.snapshot(name))
    moved_back(zk, store.session.paths.snapshot_chunk(name, 0), 20)
    reader = open_store()  # another command, with no cache of the state
    with pytest.raises(StateDamaged, match=f"node {store.session.paths.snapshot(name)} records no checksums") as caught:
        reader.offsets.committed_offsets()
    assert caught.value.exit_code == EXIT_BATCH_FAILED and "ZooKeeper backup" in str(caught.value)


def test_a_job_root_from_before_the_mark_loads_unchecked_and_is_marked_by_its_first_checksummed_write(
        open_store, zk):
    """A job whose state an older version wrote: no mark, parents without checksums. It loads as
    before; the first checksummed state this version writes marks the root in the same
    transaction; a parent written before the mark still loads, one changed since must be checked."""
    store = committed_to_49(open_store())
    name = store.offsets.committed_state().snapshot
    zk.delete(store.session.paths.checksummed)  # as an older version left the job: no mark ...
    stripped(zk, store.session.paths.snapshot(name))  # ... and no checksums
    stripped(zk, store.session.paths.plan(1))
    old = open_store()
    assert old.offsets.committed_offsets()[("t", 0)].value == 49  # loads unchecked, as before
    assert old.batches.read_batch(1)[0].ranges[0].end == 49
    store.session.release_lock()
    assert old.session.acquire_lock() is None
    old.batches.write_plan(planned(2, [OffsetRange("t", 0, 49, 60, 49)]))
    mark = zk.exists(old.session.paths.checksummed)
    assert mark is not None and mark.czxid == zk.exists(old.session.paths.plan(2)).czxid  # one transaction
    assert open_store().offsets.committed_offsets()[("t", 0)].value == 49  # written before the mark: still loads
    assert open_store().batches.read_batch(1)[0].ranges[0].end == 49
    stripped(zk, old.session.paths.plan(2))
    with pytest.raises(StateDamaged, match=f"node {old.session.paths.plan(2)} records no checksums"):
        open_store().batches.read_batch(2)


def test_a_merged_files_record_holding_garbage_is_named(open_store, zk):
    """`etl verify --deep` and `etl compact` ask /merged/<id> which merged files must carry checksums."""
    store = open_store()
    record = store.session.paths.merged_record(1)
    zk.create(record, b"garbage", makepath=True)
    with pytest.raises(StateDamaged, match=f"node {record} is not a record of merged files this version wrote"):
        store.compactions.checksummed_outputs()
