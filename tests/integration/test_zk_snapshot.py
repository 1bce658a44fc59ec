"""Committed offsets as chunked snapshots behind one pointer znode, against a real ZooKeeper:
plans and commits of more partitions than one ZooKeeper request holds, the pointer as the
compare-and-set, and pruning. That a plan made before the pointer moved cannot commit is in the
store contract (tests.harness.store_contract), run on ZooKeeper and on the memory store."""
import pytest
from kazoo.exceptions import ConnectionLoss

from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.identity import RecordFingerprint


def planned(batch_id, ranges):
    return Batch(batch_id, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {"dt": "2026-01-01", "hour": "00"},
                 tuple(ranges))


def load(store, batch, **written):
    """Plan, write, register and commit a batch; returns it COMMITTED."""
    version = store.batches.write_plan(batch)
    batch, version = store.batches.read_batch(batch.batch_id)
    batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=batch.record_count, rejected=0,
                                           **written)
    batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
    return store.batches.commit(batch, version)


def test_a_batch_of_20000_partitions_plans_and_commits_below_the_request_limit(open_store):
    """One ZooKeeper request holds at most 1 MB: 20,000 per-partition compare-and-sets (or one
    transaction of all range chunks) do not fit, a snapshot in chunks behind a pointer does."""
    store = open_store()
    assert store.session.acquire_lock() is None
    n = 20000
    first = [OffsetRange(f"topic-with-a-long-name-{p % 7}", p, 0, 3, None) for p in range(n)]
    last = {f"{r.topic}:{r.partition}": RecordFingerprint(2, 1767225600000 + r.partition, f"{r.partition:016x}")
            for r in first}
    load(store, planned(1, first), last_records=last)
    second = [OffsetRange(r.topic, r.partition, 3, 5, 3) for r in first]
    load(store, planned(2, second))
    offsets = store.offsets.committed_offsets()
    assert len(offsets) == n and {o.value for o in offsets.values()} == {5}
    sample = offsets[("topic-with-a-long-name-3", 10)]
    assert sample.origin == 0 and sample.last.to_json() == [2, 1767225600010, f"{10:016x}"]
    assert store.batches.open_batch() is None


def test_the_commit_is_one_small_transaction_whatever_the_partition_count(open_store, zk, zk_root):
    """The step that makes a batch COMMITTED writes the pointer, the header and the load
    totals only (with the lock's check, the plan's and the pointer's versions): the snapshot it
    names was written, in chunks, before."""
    store = open_store()
    assert store.session.acquire_lock() is None
    ranges = [OffsetRange("t", p, 0, 1, None) for p in range(6000)]
    batch = planned(1, ranges)
    version = store.batches.write_plan(batch)
    batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=6000, rejected=0)
    batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
    ops = []
    real = store.session.client.transaction

    def counting():
        txn = real()
        ops.append(txn.operations)
        return txn
    store.session.client.transaction = counting
    store.batches.commit(batch, version)
    assert len(ops) == 1 and len(ops[0]) <= 6, [type(o).__name__ for o in ops[0]]


def test_old_snapshots_and_plans_are_pruned_with_their_batches(open_store, zk, zk_root, monkeypatch):
    monkeypatch.setattr("etl.state.batches.BATCHES_KEPT", 2)
    store = open_store()
    assert store.session.acquire_lock() is None
    for batch_id in range(1, 5):
        load(store, planned(batch_id, [OffsetRange("t", 0, batch_id - 1, batch_id, batch_id - 1 or None)]))
        store.batches.prune_batches()
    snapshots = zk.get_children(f"{zk_root}/job/snapshots")
    assert snapshots == [store.offsets.committed_state().snapshot]
    assert sorted(zk.get_children(f"{zk_root}/job/plans")) == ["0000000003", "0000000004"]
    assert store.batches.batch_ids() == [3, 4] and store.offsets.committed_offsets()[("t", 0)].value == 4


@pytest.mark.parametrize("applied", [True, False])
def test_a_commit_whose_answer_was_lost_knows_whether_it_was_applied(open_store, applied):
    """The connection drops after the commit request was sent: the header, moved in the same
    transaction as the pointer, says whether it went through."""
    store = open_store()
    assert store.session.acquire_lock() is None
    batch = planned(1, [OffsetRange("t", p, 0, 4, None) for p in range(3000)])
    version = store.batches.write_plan(batch)
    batch, version = store.batches.advance(batch, version, BatchState.WRITTEN, rows=12000, rejected=0)
    batch, version = store.batches.advance(batch, version, BatchState.REGISTERED)
    real = store.session.client.transaction

    def answer_lost():
        txn = real()
        send = txn.commit

        def commit():
            if applied:
                send()
            raise ConnectionLoss()
        txn.commit = commit
        return txn
    store.session.client.transaction = answer_lost
    if applied:
        assert store.batches.commit(batch, version).state is BatchState.COMMITTED
    else:
        with pytest.raises(ConnectionLoss):
            store.batches.commit(batch, version)
    store.session.client.transaction = real
    offsets = store.offsets.committed_offsets()
    assert (len(offsets), store.batches.open_batch() is None) == ((3000, True) if applied else (0, False))
