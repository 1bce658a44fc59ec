"""A job's state from before snapshots moves to them on the first run that takes the lock, and
a crash at any step of a plan, a commit or that move leaves state the next run finishes. Old
state is built as the earlier versions wrote it: a znode per partition under /offsets/<topic>
(whose data is the topic id), and batches with their range chunks under the header."""
import os
import signal
import subprocess
import sys
import time

import pytest

from etl.config import RetryConfig, ZooKeeperConfig
from etl.errors import InjectedFault, StateConflict
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.identity import RecordFingerprint
from etl.state.store import ZkStateStore
from etl.state.znodes import CommittedOffset, dump
from tests.harness.kills import fault_point_landed

RETRY = RetryConfig(attempts=2, initial_wait_seconds=0.1, max_wait_seconds=0.2)
OLD = {("clicks", 0): CommittedOffset(120, 0, 0, RecordFingerprint(119, 1767225600000, "00aa11bb22cc33dd")),
       ("clicks", 1): CommittedOffset(80, 0, 10, None),
       ("views", 0): CommittedOffset(7, 0, 0, None, 1767225600123, "2026-01-01T00:00:00+00:00")}
IDS = {"clicks": "AaIFnTSZfgCuWxfsrPJLjg"}


def zk_config(stack, zk_root):
    return ZooKeeperConfig(hosts=stack.zk_hosts, root=zk_root, session_timeout_seconds=4)


def write_old_layout(zk, job: str, open_batch: bool = False) -> None:
    """The znodes as versions before snapshots left them: offsets (one in the first format, the
    offset alone), topic ids, a committed batch and, optionally, a REGISTERED one."""
    for (topic, partition), found in OLD.items():
        zk.ensure_path(f"{job}/offsets/{topic}")
        zk.set(f"{job}/offsets/{topic}", dump({"topic_id": IDS[topic]}) if topic in IDS else b"")
        zk.create(f"{job}/offsets/{topic}/{partition}", found.to_bytes())
    zk.create(f"{job}/offsets/views/1", b"42")  # the first format
    zk.ensure_path(f"{job}/batches")
    zk.ensure_path(f"{job}/events")
    _old_batch(zk, job, 1, BatchState.COMMITTED, [OffsetRange("clicks", 0, 100, 120, 100)])
    if open_batch:
        _old_batch(zk, job, 2, BatchState.REGISTERED, [OffsetRange("clicks", 0, 120, 130, 120),
                                                       OffsetRange("views", 1, 42, 50, 42)])


def _old_batch(zk, job, batch_id, state, ranges):
    batch = Batch(batch_id, state, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"}, tuple(ranges))
    zk.create(f"{job}/batches/{batch_id:010d}", dump(batch.header_json()))
    zk.create(f"{job}/batches/{batch_id:010d}/ranges-00000", dump([r.to_json() for r in ranges]))


def expected_offsets() -> dict:
    return {**{key: (o.value, o.origin, o.last, o.max_event_ms, o.active_at) for key, o in OLD.items()},
            ("views", 1): (42, None, None, None, None)}


def offsets_of(store) -> dict:
    return {key: (o.value, o.origin, o.last, o.max_event_ms, o.active_at)
            for key, o in store.offsets.committed_offsets().items()}


def take_lock(store, within=30):
    deadline = time.monotonic() + within
    while store.session.acquire_lock() is not None:  # a killed run's lock lives until its session expires
        assert time.monotonic() < deadline, "the lock was not released"
        time.sleep(0.2)


def test_the_first_run_moves_old_offsets_and_topic_ids_into_a_snapshot(stack, zk, zk_root):
    write_old_layout(zk, f"{zk_root}/job")
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        assert offsets_of(store) == expected_offsets()  # readable before the move too
        take_lock(store)
        assert offsets_of(store) == expected_offsets() and store.offsets.topic_ids() == IDS
        version = store.offsets.pointer_version()
        assert version == 0 and store.batches.read_batch(1)[0].ranges == (OffsetRange("clicks", 0, 100, 120, 100),)
        store.session.release_lock()
        take_lock(store)  # a second run finds the pointer and moves nothing
        assert store.offsets.pointer_version() == version and offsets_of(store) == expected_offsets()
        store.session.release_lock()
    assert zk.get(f"{zk_root}/job/offsets/clicks/0")[0] == OLD[("clicks", 0)].to_bytes()  # left as they were


def test_an_older_version_started_after_the_move_fails_on_reading_the_offsets(stack, zk, zk_root):
    """What the versions before snapshots ran to read the offsets, against the moved state."""
    write_old_layout(zk, f"{zk_root}/job")
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        store.session.release_lock()
    offsets = f"{zk_root}/job/offsets"
    with pytest.raises(ValueError):
        [int(part) for topic in zk.get_children(offsets) for part in zk.get_children(f"{offsets}/{topic}")]


def test_a_batch_registered_before_the_move_commits_after_it(stack, zk, zk_root):
    write_old_layout(zk, f"{zk_root}/job", open_batch=True)
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        batch, version = store.batches.open_batch()
        assert batch.state is BatchState.REGISTERED and len(batch.ranges) == 2
        store.batches.commit(batch, version)
        found = offsets_of(store)
        assert found[("clicks", 0)][0] == 130 and found[("views", 1)][0] == 50
        assert found[("clicks", 1)] == expected_offsets()[("clicks", 1)]
        store.session.release_lock()


def test_a_move_killed_before_the_pointer_is_done_again_by_the_next_run(stack, zk, zk_root):
    write_old_layout(zk, f"{zk_root}/job")
    code = ("import sys; from etl.config import RetryConfig, ZooKeeperConfig; from etl.state.store import ZkStateStore;"
            f"s = ZkStateStore(ZooKeeperConfig(hosts={stack.zk_hosts!r}, root={zk_root!r}, session_timeout_seconds=4),"
            " 'job', RetryConfig(attempts=2, initial_wait_seconds=0.1, max_wait_seconds=0.2)); s.connect();"
            " s.session.acquire_lock(); sys.exit(3)")
    env = {**os.environ, "ETL_FAULT_POINT": "migrate:snapshot-written", "ETL_FAULT_ACTION": "kill"}
    done = subprocess.run([sys.executable, "-c", code], env=env, start_new_session=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    fault_point_landed("offsets' move to a snapshot")
    assert zk.exists(f"{zk_root}/job/committed") is None and len(zk.get_children(f"{zk_root}/job/snapshots")) == 1
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        assert offsets_of(store) == expected_offsets() and store.offsets.topic_ids() == IDS
        store.batches.prune_batches()
        assert zk.get_children(f"{zk_root}/job/snapshots") == [store.offsets.committed_state().snapshot]
        store.session.release_lock()


def test_a_plan_broken_off_before_its_header_is_invisible_and_replaced(stack, zk_root, monkeypatch):
    ranges = tuple(OffsetRange("t", p, 0, 5, None) for p in range(4500))
    batch = Batch(1, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"}, ranges)
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        monkeypatch.setenv("ETL_FAULT_POINT", "plan:ranges-written")
        monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
        with pytest.raises(InjectedFault):
            store.batches.write_plan(batch)
        monkeypatch.delenv("ETL_FAULT_POINT")
        assert store.batches.batch_ids() == [] and store.batches.open_batch() is None
        version = store.batches.write_plan(batch)
        assert store.batches.read_batch(1) == (batch, version)


def test_a_commit_broken_off_after_its_snapshot_moves_nothing_and_is_done_again(stack, zk, zk_root, monkeypatch):
    batch = Batch(1, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"},
                  (OffsetRange("t", 0, 0, 5, None),))
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        version = store.batches.write_plan(batch)
        batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=5, rejected=0)
        batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
        monkeypatch.setenv("ETL_FAULT_POINT", "commit:snapshot-written")
        monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
        with pytest.raises(InjectedFault):
            store.batches.commit(*store.batches.open_batch())
        monkeypatch.delenv("ETL_FAULT_POINT")
        assert store.offsets.committed_offsets() == {} and store.batches.open_batch()[0].state is BatchState.REGISTERED
        store.batches.prune_batches()  # keeps the open batch's snapshot
        assert len(zk.get_children(f"{zk_root}/job/snapshots")) == 2
        store.batches.commit(*store.batches.open_batch())
        store.batches.prune_batches()
        assert store.offsets.committed_offsets()[("t", 0)].value == 5
        assert zk.get_children(f"{zk_root}/job/snapshots") == [store.offsets.committed_state().snapshot]


def test_a_large_batch_written_before_the_move_keeps_its_fingerprints_through_commit(stack, zk, zk_root):
    """Older versions kept every partition's last record in the header; once the header moves
    on, they go beside it in chunks, so the batch still reads back whole after its commit."""
    job = f"{zk_root}/job"
    write_old_layout(zk, job)
    ranges = tuple(OffsetRange("wide", p, 0, 2, None) for p in range(1500))
    last = {f"wide:{p}": RecordFingerprint(1, 1767225600000, f"{p:016x}") for p in range(1500)}
    batch = Batch(2, BatchState.WRITTEN, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"}, ranges,
                  last_records=last)
    zk.create(f"{job}/batches/{2:010d}", dump(batch.header_json()))
    zk.create(f"{job}/batches/{2:010d}/ranges-00000", dump([r.to_json() for r in ranges]))
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        opened, version = store.batches.open_batch()
        assert opened == batch
        registered, version = store.batches.advance(opened, version, BatchState.REGISTERED)
        store.batches.commit(registered, version)
        assert store.batches.read_batch(2)[0].last_records == last
        assert store.offsets.committed_offsets()[("wide", 7)].last == last["wide:7"]
        store.session.release_lock()


def test_a_deleted_pointer_after_the_move_is_refused_not_migrated_again(stack, zk, zk_root):
    """An operator who deletes `committed` by hand must not send the job back to the offsets it
    had before the move (a reload of everything since): every reader refuses and says what to do."""
    job = f"{zk_root}/job"
    write_old_layout(zk, job, open_batch=True)
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        batch, version = store.batches.open_batch()
        store.batches.commit(batch, version)  # clicks[0] moves from 120 to 130
        store.session.release_lock()
    snapshots = zk.get_children(f"{job}/snapshots")
    zk.delete(f"{job}/committed")
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        with pytest.raises(StateConflict, match=r"no .*committed pointer.*deleted.*etl history --json"):
            store.offsets.committed_offsets()
        with pytest.raises(StateConflict, match=r"committed pointer"):
            take_lock(store)
        store.session.release_lock()
    assert zk.exists(f"{job}/committed") is None and zk.get_children(f"{job}/snapshots") == snapshots


def test_a_deleted_snapshot_chunk_is_named_not_a_raw_zookeeper_error(stack, zk, zk_root):
    job = f"{zk_root}/job"
    write_old_layout(zk, job)
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        take_lock(store)
        store.session.release_lock()
        name = store.offsets.committed_state().snapshot
    zk.delete(f"{job}/snapshots/{name}", recursive=True)
    with ZkStateStore(zk_config(stack, zk_root), "job", RETRY) as store:
        with pytest.raises(StateConflict, match=rf"snapshot {name}.*missing"):
            store.offsets.committed_offsets()
