"""A job's first run under snapshots: the per-partition offset znodes become the first snapshot.

Run by whoever takes the job lock, so every write is fenced. Steps, each safe to die after:
1. read `/offsets/<topic>/<partition>` and the topic ids, as versions before snapshots wrote them;
2. write them as a snapshot (small fenced writes; nothing points to it yet);
3. one fenced transaction: create `/committed` naming it, and `/offsets/~migrated` with a child
   that older versions cannot parse.
A death before 3 leaves an unreferenced snapshot that pruning deletes, and the next lock holder
starts again from 1; after 3 there is nothing left to do. A new job takes the same path with no
offsets, so that every writer finds a pointer to compare-and-set.

The old znodes are left as they were, read-only: nothing reads them once the pointer exists, and
they document what the job held when it moved. `~migrated` makes an older version of the job
that is started by mistake fail on reading the offsets (its `int(partition)` of that child's
name raises) instead of planning from offsets that no longer move.
"""
from __future__ import annotations

import logging

from etl import faults
from etl.state.snapshots import SnapshotRecords

log = logging.getLogger(__name__)
WHY = "the offsets moved to /committed and /snapshots: this job's state is no longer kept under /offsets"


def migrate_offsets(store: SnapshotRecords) -> None:
    """Create the pointer from the layout before snapshots, unless it exists. `store` is the
    offsets part (etl.state.snapshots) on the session that just took the job lock."""
    if store.pointer_version() is not None:
        return
    legacy = store.committed_state()  # no pointer: this reads the per-partition znodes
    name = store.write_snapshot(legacy.offsets, legacy.topic_ids, None, "migrated from /offsets")
    faults.checkpoint("migrate:snapshot-written")
    store._read(lambda: store.client.ensure_path(store.paths.offsets), "create the offsets node")
    tombstone = store._read(lambda: store.client.exists(store.paths.migrated), "look for the migration mark")
    txn = store.client.transaction()
    store._fence(txn)
    store.move_pointer(txn, name, None, migrated=len(legacy.offsets))
    if tombstone is None:
        txn.create(store.paths.migrated, b"")
        txn.create(store.paths.migrated_note, WHY.encode())
    store._commit_fenced(txn, "move the committed offsets to a snapshot")
    if legacy.offsets:
        log.info("moved the committed offsets of %d partitions to snapshot %s", len(legacy.offsets), name)
