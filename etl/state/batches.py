"""The batches part of the job's state (etl.state.protocols.BatchPart): each batch's header
znode and the chunks beside it (etl.state.batch_nodes), moved state by state over the version
the caller read, and the plan and the commit, whatever the number of partitions.

A plan goes to ZooKeeper in small fenced writes: `/plans/<id>` with the pointer version the plan
starts from (etl.state.snapshots), its range chunks (sent together, answered together), and only
then the batch's header, which makes the batch visible. A crash in between leaves a plan node
without a header, which the next plan with that id deletes first.

The offsets after a batch (etl.state.offsets_after) are a new snapshot, written when the batch
moves to REGISTERED (or at commit, for a batch registered before snapshots existed or whose
snapshot is stale). The commit itself is one transaction of six operations: the fence checks, the
snapshot's existence, the pointer's move over the version the snapshot was built on, the header
-> COMMITTED, and the load totals (etl.state.totals).
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Callable

from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError

from etl import faults
from etl.errors import LockLost, StateConflict
from etl.model.batch import Batch, BatchKind, BatchState
from etl.model.events import Skipped
from etl.state.batch_nodes import (drop_batch_remedy, has_record_chunks, merge_markers, merge_records,
                                   partition_chunk_count, partition_chunks, ranges_source, record_chunk_count,
                                   record_chunks)
from etl.state.chunks import checksums, damaged, decode, read_chunks
from etl.state.compaction_records import CompactionRecords
from etl.state.marker_chunks import header_with_markers, marker_paths
from etl.state.offsets_after import commit_conflict, offsets_after
from etl.state.records import OperatorRecords
from etl.state.session import SessionBound, ZkSession
from etl.state.snapshots import CommittedState, SnapshotRecords
from etl.state.totals import TotalsRecords
from etl.state.znodes import dump

BATCHES_KEPT = 50
RANGES_PER_CHUNK = 2000  # ~40 bytes a range: a chunk stays far below the 1 MB request limit


class ZkBatches(SessionBound):
    """Plans and batch states on the run's session. The commit spans parts (etl.state.protocols):
    it adds the offsets part's pointer move and the totals to the header's transaction."""

    def __init__(self, session: ZkSession, offsets: SnapshotRecords, totals: TotalsRecords,
                 operator: OperatorRecords, compactions: CompactionRecords):
        super().__init__(session)
        self.offsets, self.totals, self.operator = offsets, totals, operator
        self.compactions = compactions  # a REPAIR's plan drops the merged files it rewrites from their records

    # -- plans ----------------------------------------------------------------------------
    def write_plan(self, batch: Batch) -> int:
        """Store a PLANNED batch: its base and range chunks first, then the header that makes it
        visible (with its skip events). Returns the header's version."""
        self.assert_lock_held()
        plan = self.paths.plan(batch.batch_id)
        self._read(lambda: self.client.ensure_path(self.paths.plans), "create the plans node")
        if self._read(lambda: self.client.exists(plan), "look for a crashed plan") is not None:
            self.delete_fenced(plan, f"delete what a crashed plan of batch {batch.batch_id} left")
        chunks = [dump([r.to_json() for r in batch.ranges[i:i + RANGES_PER_CHUNK]])
                  for i in range(0, len(batch.ranges), RANGES_PER_CHUNK)]
        txn = self.client.transaction()
        self._fence(txn)
        self._mark_checksummed(txn)
        txn.create(plan, dump({"base": self.offsets.pointer_version(), "range_count": len(batch.ranges),
                               "checksums": checksums(chunks)}))  # checked by every read (etl.state.chunks)
        self._commit_fenced(txn, f"start the plan of batch {batch.batch_id}")
        self.create_fenced([(self.paths.plan_chunk(batch.batch_id, i), chunk) for i, chunk in enumerate(chunks)],
                           f"store the ranges of batch {batch.batch_id}")
        faults.checkpoint("plan:ranges-written")
        txn = self.client.transaction()
        self._fence(txn)
        txn.create(self.paths.batch(batch.batch_id), header_with_markers(self, batch))
        for skipped in batch.skipped:
            self.operator.add_event(txn, Skipped.of(batch.batch_id, batch.planned_at, skipped))
        if batch.kind is BatchKind.REPAIR:
            self.compactions.forget_rewritten(txn, {r.file_range.stem for r in batch.ranges})
        self._commit_fenced(txn, f"store the plan of batch {batch.batch_id}")
        return 0  # a new znode's version

    def plan_base(self, batch_id: int) -> int | None:
        """The pointer version a plan started from; None for plans made before snapshots (their
        ranges' expected offsets are then all the commit checks, as before)."""
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.plan(batch_id)), f"read plan {batch_id}")
        except NoNodeError:
            return None
        return json.loads(data)["base"]

    def read_ranges(self, batch_id: int, range_count: int, remedy: str) -> list:
        """The plan's ranges, each chunk checked against the checksum its plan node records."""
        chunk, expected, plan_stat = ranges_source(self.client, self.paths, batch_id, remedy)
        paths = [chunk(batch_id, i) for i in range(-(-range_count // RANGES_PER_CHUNK))]
        required = plan_stat is not None and self._must_record_checksums(plan_stat)
        return [r for part in read_chunks(self.client, paths, expected, False, remedy, required) for r in part]

    # -- commit ---------------------------------------------------------------------------
    def prepare_commit(self, batch: Batch) -> str:
        """Write the snapshot of the offsets after `batch` (the move to REGISTERED does, so that
        the commit is small); "" when the offsets moved since the plan: the commit will say so."""
        self.assert_lock_held()  # a fenced-out run must hear that before it reads anything
        state = self.offsets.committed_state()
        if batch.kind is BatchKind.REPAIR or self._conflict(batch, state):
            return ""
        return self._snapshot_after(batch, state)

    def commit(self, batch: Batch, version: int, written_bytes: int | None = None) -> Batch:
        """Move the pointer to the snapshot of the offsets after this batch and mark the batch
        COMMITTED, in one transaction that aborts if any offset moved since the plan. A REPAIR
        batch moves no offset: it only checks that none moved since it was planned. The same
        transaction moves the load totals (etl.state.totals; `written_bytes` None: not measured)."""
        committed = batch.advanced(BatchState.COMMITTED)
        self.assert_lock_held()  # a fenced-out run must hear that, not a misleading offset mismatch
        state = self.offsets.committed_state()
        conflict = self._conflict(batch, state)
        if conflict:
            raise StateConflict(conflict)
        self.store_records(batch, committed)  # a header from before chunks: its maps go beside it first
        txn = self.client.transaction()
        self._fence(txn)
        if batch.kind is BatchKind.REPAIR:
            txn.check(self.paths.committed, state.version)
        else:
            name = batch.snapshot if batch.snapshot and self.offsets.snapshot_base(batch.snapshot) == state.version \
                else self._snapshot_after(batch, state)
            faults.checkpoint("commit:snapshot-written")
            self.offsets.move_pointer(txn, name, state.version, batch=batch.batch_id)
        txn.set_data(self.paths.batch(batch.batch_id), header_with_markers(self, committed), version=version)
        self.totals.move_totals(txn, batch, written_bytes)  # counted once: only with the commit itself
        try:
            self._commit_fenced(txn, f"commit batch {batch.batch_id}")
        except (ConnectionLoss, OperationTimeoutError, LockLost) as exc:
            # After a lost connection or session the outcome is unknown: the transaction may
            # have been applied before the answer was lost. The batch node says which.
            unknown = not isinstance(exc, LockLost) or isinstance(exc.__cause__, SessionExpiredError)
            if not unknown or self.read_batch(batch.batch_id)[0].state is not BatchState.COMMITTED:
                raise
        if batch.kind is not BatchKind.REPAIR:  # each range's partition is committed at its end (_moved)
            self.session.offsets_moved({(r.topic, r.partition): r.end for r in batch.ranges})
        return committed

    def _conflict(self, batch: Batch, state: CommittedState) -> str:
        return commit_conflict(batch, state, self.plan_base(batch.batch_id))

    def _snapshot_after(self, batch: Batch, state: CommittedState) -> str:
        offsets, topic_ids = offsets_after(batch, state)
        return self.offsets.write_snapshot(offsets, topic_ids, state.version, f"batch {batch.batch_id}")

    # -- batches --------------------------------------------------------------------------
    def batch_ids(self) -> list[int]:
        children = self._read(lambda: self.client.get_children(self.paths.batches), "list batches")
        return sorted(int(c) for c in children)

    def last_batch(self) -> tuple[Batch, int] | None:
        """The newest batch and its znode version, or None before the first batch."""
        ids = self.batch_ids()
        return self.read_batch(ids[-1]) if ids else None

    def open_batch(self) -> tuple[Batch, int] | None:
        last = self.last_batch()
        return last if last and last[0].state is not BatchState.COMMITTED else None

    def read_batch(self, batch_id: int) -> tuple[Batch, int]:
        return self._read(lambda: self._read_batch(batch_id), f"read batch {batch_id}")

    def _read_batch(self, batch_id: int) -> tuple[Batch, int]:
        """A batch with its chunks, each checked (etl.state.chunks); damage is named with its remedy."""
        batch_node = self.paths.batch(batch_id)
        data, stat = self.client.get(batch_node)
        header = decode(batch_node, data, None, False, drop_batch_remedy(self.paths, batch_id, None))
        remedy = drop_batch_remedy(self.paths, batch_id, header.get("state") if isinstance(header, dict) else None)
        try:
            sums = header.get("checksums", {})
            ranges = self.read_ranges(batch_id, header["range_count"], remedy)
            records = [self.paths.record_chunk(batch_id, i) for i in range(record_chunk_count(header))]
            required = self._must_record_checksums(stat)  # written since the mark: its chunks must be checked
            header = merge_records(header, read_chunks(self.client, records, sums.get("records"), True, remedy,
                                                       required))
            partitions = None
            if "partition_count" in header:
                touched = [self.paths.touched(batch_id, i) for i in range(partition_chunk_count(header))]
                partitions = [p for part in read_chunks(self.client, touched, sums.get("partitions"), False, remedy,
                                                        required) for p in part]
            markers, sums = marker_paths(self.paths, batch_id, header)
            header = merge_markers(header, read_chunks(self.client, markers, sums, True, remedy))
            return Batch.from_json(header, ranges, partitions), stat.version
        except (TypeError, KeyError, ValueError, AttributeError) as exc:  # JSON of another shape
            raise damaged(batch_node, f"is not a batch this version wrote ({type(exc).__name__}: {exc})",
                          remedy) from None

    def advance(self, batch: Batch, version: int, to: BatchState, **changes) -> tuple[Batch, int]:
        moved = batch.advanced(to, **changes)
        if to is BatchState.REGISTERED:  # the offsets after the batch, so that the commit stays small
            moved = replace(moved, snapshot=self.prepare_commit(moved))
        node = self.paths.batch(batch.batch_id)
        self.store_records(batch, moved)
        if not batch.event_time.partitions_known and moved.event_time.partitions_known:  # WRITTEN by event time
            self._write_beside("partitions", self.paths.touched, partition_chunks(moved), batch.batch_id)
        txn = self.client.transaction()
        self._fence(txn)
        self._mark_checksummed(txn)
        txn.set_data(node, header_with_markers(self, moved), version=version)
        results = self._commit_fenced(txn, f"move batch {batch.batch_id} to {to.value}")
        return moved, results[-1].version

    def store_records(self, before: Batch, moved: Batch) -> None:
        """Write the per-partition maps beside the header (etl.state.batch_nodes) when they
        changed, or when a header from before chunks held them inline and is about to drop them."""
        first = self.paths.record_chunk(moved.batch_id, 0)
        changed = ((moved.last_records, moved.event_time.event_high)
                   != (before.last_records, before.event_time.event_high))
        if changed or has_record_chunks(moved) and \
                self._read(lambda: self.client.exists(first), "look for a batch's records") is None:
            self._write_beside("records", self.paths.record_chunk, record_chunks(moved), moved.batch_id)

    def _write_beside(self, prefix: str, chunk_path: Callable[[int, int], str], chunks: list[bytes],
                      batch_id: int) -> None:
        """Chunks under a batch's znode (`chunk_path`, a ZkPaths method, names each `<prefix>-NNNNN`),
        each its own fenced write, before the header that counts them; a crash's leftovers (the
        header not yet moved) are deleted first."""
        node = self.paths.batch(batch_id)
        stale = [c for c in self._read(lambda: self.client.get_children(node), "list a batch's chunks")
                 if c.startswith(f"{prefix}-")]
        if stale:
            txn = self.client.transaction()
            self._fence(txn)
            for child in stale:
                txn.delete(self.paths.child(node, child))
            self._commit_fenced(txn, f"delete what a crash left of batch {batch_id}'s {prefix}")
        self.create_fenced([(chunk_path(batch_id, i), c) for i, c in enumerate(chunks)],
                           f"store batch {batch_id}'s {prefix}")

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]:
        """Rewrite the header of a batch, state unchanged (fenced, and only over `version`)."""
        amended = batch.amended(**changes)
        self.store_records(batch, amended)
        txn = self.client.transaction()
        self._fence(txn)
        self._mark_checksummed(txn)
        txn.set_data(self.paths.batch(batch.batch_id), header_with_markers(self, amended), version=version)
        results = self._commit_fenced(txn, f"update batch {batch.batch_id}")
        return amended, results[-1].version

    def prune_batches(self) -> None:
        """Keep the newest committed batches only; they serve status and recovery reports. Their
        plans go with them, and every snapshot but the committed one and an open batch's."""
        ids = self.batch_ids()
        for batch_id in ids[:-BATCHES_KEPT]:
            self._read(lambda b=batch_id: self.client.delete(self.paths.batch(b), recursive=True),
                       f"delete old batch {batch_id}")
        kept = set(ids[-BATCHES_KEPT:])
        plans = self._read(lambda: self.client.get_children(self.paths.plans), "list plans")
        for plan in sorted(int(p) for p in plans):
            if plan not in kept and kept and plan < max(kept):  # the next plan clears one after the last
                self.delete_fenced(self.paths.plan(plan), f"delete the plan of old batch {plan}")
        opened = self.open_batch()
        self.offsets.prune_snapshots({opened[0].snapshot} if opened and opened[0].snapshot else set())
