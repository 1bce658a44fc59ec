"""The ZooKeeper state store against a real ZooKeeper: what ZooKeeper itself does for the lock,
fencing across sessions, chunked plans and commits. The behaviour every store shares (one lock
holder, a commit refused when offsets moved) is the store contract (tests.harness.store_contract),
run on ZooKeeper and on the memory store."""
import threading
import time
import zlib
from dataclasses import replace

import pytest
from kazoo.exceptions import SessionExpiredError

from etl.errors import LockLost
from etl.model.batch import Batch, BatchState, OffsetRange, TouchedPartition
from tests.harness.state import expire_session
from tests.harness.store_contract import compaction, switched


def batch(batch_id=1, ranges=(OffsetRange("t", 0, 0, 10, None), OffsetRange("t", 1, 0, 5, None))):
    return Batch(batch_id, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"},
                 tuple(ranges))


def test_plan_round_trips_in_chunks_and_commit_moves_offsets(open_store):
    store = open_store()
    store.session.acquire_lock()
    big = batch(ranges=[OffsetRange("t", p, 0, p + 1, None) for p in range(5000)])
    version = store.batches.write_plan(big)
    loaded, loaded_version = store.batches.read_batch(1)
    assert loaded.ranges == big.ranges and loaded_version == version
    written, version = store.batches.advance(loaded, version, BatchState.WRITTEN, rows=1, rejected=0)
    registered, version = store.batches.advance(written, version, BatchState.REGISTERED)
    store.batches.commit(registered, version)
    offsets = store.offsets.committed_offsets()
    assert len(offsets) == 5000 and offsets[("t", 4999)].value == 5000
    assert store.batches.open_batch() is None


def test_expired_session_cannot_commit_and_does_not_harm_the_run_that_took_over(open_store, stack):
    zombie = open_store()
    zombie.session.acquire_lock()
    planned = batch()
    zombie.batches.write_plan(planned)
    written, v = zombie.batches.advance(planned, 0, BatchState.WRITTEN)
    expire_session(zombie, stack.zk_hosts)
    successor = open_store()
    assert successor.session.acquire_lock() is None  # the ephemeral lock died with the session
    with pytest.raises(LockLost):
        zombie.batches.advance(written, v, BatchState.REGISTERED)
    zombie.session._session_lost.clear()  # even a client that missed the LOST event is fenced
    with pytest.raises(LockLost):
        zombie.batches.advance(written, v, BatchState.REGISTERED)
    resumed, version = successor.batches.open_batch()
    assert resumed.state is BatchState.WRITTEN
    registered, version = successor.batches.advance(resumed, version, BatchState.REGISTERED)
    successor.batches.commit(registered, version)
    assert successor.offsets.committed_offsets()[("t", 0)].value == 10


def test_a_read_that_outlives_the_lock_holders_session_is_a_lost_lock(open_store):
    """Reads come before the fenced writes of a step (the commit reads the offsets first); when
    the session behind the lock expired, the run hears LockLost, not a raw kazoo error. The
    failing call stands in for kazoo's: a real expiry reaches it only in a race (see above)."""
    def expired():
        raise SessionExpiredError()
    store = open_store()
    store.session.acquire_lock()
    with pytest.raises(LockLost, match="session expired") as caught:
        store.session._read(expired, "read committed offsets")
    assert isinstance(caught.value.__cause__, SessionExpiredError)
    store.session.release_lock()
    with pytest.raises(SessionExpiredError):  # without the lock there is no lock to lose
        store.session._read(expired, "read committed offsets")


def test_the_partitions_a_batch_touched_are_stored_in_chunks_at_written(open_store):
    """By event time a backfill batch may touch thousands of Hive partitions: they sit in chunks
    beside the header, far below the 1 MB znode limit, written with the move to WRITTEN."""
    store = open_store()
    store.session.acquire_lock()
    version = store.batches.write_plan(batch())
    touched = tuple(TouchedPartition(f"dt=2026-01-{d:02d}/hour={h:02d}", h, 0)
                    for d in range(1, 29) for h in range(24)) * 20  # 13,440 entries, ~800 KB as one list
    loaded, version = store.batches.read_batch(1)
    assert loaded.event_time.partitions is None
    written, version = store.batches.advance(loaded, version, BatchState.WRITTEN, rows=1, rejected=0,
                                             event_time=replace(loaded.event_time, partitions=touched))
    again, again_version = store.batches.read_batch(1)
    assert again.event_time.partitions == touched and again_version == version
    registered, version = store.batches.advance(again, version, BatchState.REGISTERED)
    assert store.batches.read_batch(1)[0].event_time.partitions == touched  # later moves keep them


ATTEMPT = "container_e03_1795672377170_0001_{:02d}_000001"  # a YARN AM's CONTAINER_ID, attempt N


def test_a_lock_held_by_an_earlier_yarn_attempt_is_taken_once_its_session_expires(open_store, stack, monkeypatch):
    """YARN starts attempt 2 of a cluster-mode driver only after attempt 1 died, but attempt 1's
    session (and so its ephemeral lock) lives until the timeout: attempt 2 waits for it."""
    monkeypatch.setenv("CONTAINER_ID", ATTEMPT.format(1))
    dead = open_store()
    assert dead.session.acquire_lock() is None
    monkeypatch.setenv("CONTAINER_ID", ATTEMPT.format(2))
    successor = open_store()
    assert successor.session.acquire_lock() == dead.session.me  # held: a plain acquire gives up at once
    expiry = threading.Timer(1.0, expire_session, (dead, stack.zk_hosts))
    expiry.start()
    try:
        assert successor.session.take_lock() is None
    finally:
        expiry.join()
    assert successor.session.lock_holder() == successor.session.me
    assert (successor.session.me.yarn_application, successor.session.me.yarn_attempt) == \
        ("application_1795672377170_0001", 2)


@pytest.mark.parametrize("holder_container", [None, "container_e03_1795672377170_0007_01_000001",
                                              ATTEMPT.format(2)])
def test_a_lock_held_by_any_other_run_is_not_waited_for(open_store, monkeypatch, holder_container):
    """Another application, a run outside YARN, or the same attempt (a client-mode retry's
    driver is alive): take_lock gives up at once, as acquire_lock does."""
    if holder_container:
        monkeypatch.setenv("CONTAINER_ID", holder_container)
    holder = open_store()
    assert holder.session.acquire_lock() is None
    monkeypatch.setenv("CONTAINER_ID", ATTEMPT.format(2))
    started = time.monotonic()
    assert open_store().session.take_lock() == holder.session.me
    assert time.monotonic() - started < holder.session.config.session_timeout_seconds


def test_a_one_table_jobs_relocations_are_stored_as_before_routes_could_be_compacted(open_store):
    store = open_store()
    store.session.acquire_lock()
    plan = switched(store, compaction(1))
    data, _ = store.session.client.get(store.session.paths.relocations)
    assert zlib.decompress(data) == b'{"main":{"dt=2026-01-01/hour=00":' \
                                    b'"_compacted/dt=2026-01-01/hour=00/c0000000001"},' \
                                    b'"rejected":{}}'
    assert store.session.client.exists(store.session.paths.table_relocations) is None
    assert b"table_name" not in store.session.client.get(store.session.paths.compaction(plan.compaction_id))[0]
