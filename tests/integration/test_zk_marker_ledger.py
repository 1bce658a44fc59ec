"""The partitions awaiting `_SUCCESS` (the marker ledger in the newest batch's header) against a
real ZooKeeper, at the size of a multi-year backfill by event time (issue 26, defect 10): five
years of hourly partitions are 43,800 entries, 1.4 MB inline, past ZooKeeper's 1 MB request
limit (jute.maxbuffer). They go to checksummed chunks beside the plan, and the header stays small
through plan, state moves, commit and a marker pass's amend."""
from __future__ import annotations

import datetime as dt

import pytest

from etl.model.batch import Batch, BatchState, OffsetRange

HOURS = 5 * 8760
ZK_LIMIT = 1024 * 1024 - 1  # jute.maxbuffer's default, 0xfffff


def hourly(n: int) -> list[dict]:
    start = dt.datetime(2021, 1, 1)
    return [{"dt": (start + dt.timedelta(hours=h)).strftime("%Y-%m-%d"), "hour": f"{h % 24:02d}"} for h in range(n)]


def largest_node(zk, path: str) -> tuple[int, str]:
    data, _ = zk.get(path)
    found = (len(data), path)
    for child in zk.get_children(path):
        found = max(found, largest_node(zk, f"{path}/{child}"))
    return found


def test_a_five_year_backfill_awaiting_markers_stays_below_the_node_limit(open_store, zk, zk_root):
    store = open_store()
    assert store.session.acquire_lock() is None
    ledger = {"unmarked": hourly(HOURS), "late_count": 0, "late": []}
    batch = Batch(1, BatchState.PLANNED, "2026-01-01T00:00:00+00:00", {}, (OffsetRange("t", 0, 0, 5, None),),
                  extra={"markers": ledger})
    version = store.batches.write_plan(batch)
    read, version = store.batches.read_batch(1)
    assert read.extra["markers"] == ledger
    read, version = store.batches.advance(read, version, BatchState.WRITTEN, rows=5, rejected=0)
    read, version = store.batches.advance(read, version, BatchState.REGISTERED)
    store.batches.commit(read, version)
    committed, version = store.batches.read_batch(1)
    fewer = {**ledger, "unmarked": ledger["unmarked"][100:]}  # a marker pass marked the first 100
    store.batches.amend(committed, version, extra={"markers": fewer})
    assert store.batches.read_batch(1)[0].extra["markers"] == fewer
    size, path = largest_node(zk, f"{zk_root}/job")
    assert size < 300_000, (size, path)  # printed with -s: the largest node of the job
    print(f"largest znode: {size} bytes at {path}")
    plan = f"{zk_root}/job/plans/0000000001"
    chunks = sorted(c for c in zk.get_children(plan) if c.startswith("markers-"))
    # The amended ledger's chunks, and the ones of the header before it, deleted at the next change
    # (a crash between the chunks and the header must leave the header it did not replace whole).
    assert len(chunks) == -(-(HOURS - 100) // 5000) + -(-HOURS // 5000)
    from etl.errors import StateDamaged
    zk.set(f"{plan}/{chunks[0]}", b"garbage")
    with pytest.raises(StateDamaged, match=f"{plan}/{chunks[0]}"):
        store.batches.read_batch(1)
