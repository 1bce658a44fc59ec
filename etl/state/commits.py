"""Storing a plan and committing a batch, whatever the number of partitions.

A plan goes to ZooKeeper in small fenced writes: `/plans/<id>` with the pointer version the plan
starts from (etl.state.snapshots), its range chunks (sent together, answered together), and only
then the batch's header, which makes the batch visible. A crash in between leaves a plan node
without a header, which the next plan with that id deletes first.

The offsets after a batch are a new snapshot, written when the batch moves to REGISTERED (or at
commit, for a batch registered before snapshots existed or whose snapshot is stale). The commit
itself is one transaction of six operations: the fence checks, the snapshot's existence, the
pointer's move over the version the snapshot was built on, the header -> COMMITTED, and the
load totals (etl.state.totals).
"""
from __future__ import annotations

import json
import logging

from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError

from etl import faults
from etl.errors import LockLost, StateConflict
from etl.model.batch import Batch, BatchKind, BatchState, OffsetRange, utc_now_iso
from etl.model.events import Skipped
from etl.model.identity import RecordFingerprint
from etl.model.naming import final_name
from etl.state.batch_nodes import ranges_source
from etl.state.chunks import checksums, read_chunks
from etl.state.compaction_records import CompactionRecords
from etl.state.marker_chunks import header_with_markers
from etl.state.records import OperatorRecords
from etl.state.session import SessionBound
from etl.state.snapshots import CommittedState, SnapshotRecords
from etl.state.totals import TotalsRecords
from etl.state.znodes import CommittedOffset, dump

log = logging.getLogger(__name__)
RANGES_PER_CHUNK = 2000  # ~40 bytes a range: a chunk stays far below the 1 MB request limit


class Commits(SessionBound):
    """The plan and the commit of the batches part (etl.state.batches.ZkBatches, which holds the
    other parts named here and the batch reads and moves used here)."""

    offsets: SnapshotRecords
    totals: TotalsRecords
    operator: OperatorRecords
    compactions: CompactionRecords

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
            self.compactions.forget_rewritten(txn, {final_name(r.topic, r.partition, r.start, r.end)
                                                    for r in batch.ranges})
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


def commit_conflict(batch: Batch, state: CommittedState, base: int | None) -> str:
    """Why the batch cannot commit over `state`: an offset is not where the plan started,
    or anything moved the pointer since the plan (a reset, another commit; `base` is the
    pointer version the plan started from); "" if nothing."""
    mismatches = []
    for r in batch.ranges:
        found = state.offsets.get((r.topic, r.partition))
        found_value = None if found is None else found.value
        if found_value != r.expected:
            mismatches.append(f"{r.topic}[{r.partition}]: plan expects {r.expected}, ZooKeeper has {found_value}")
    if not mismatches and (base is None or base == state.version):
        return ""
    why = "; ".join(mismatches[:10]) or (f"the committed offsets were moved (pointer version {state.version}, "
                                         f"the plan started from {base})")
    return (f"batch {batch.batch_id} cannot commit: committed offsets moved since it was planned ({why}). "
            f"Another writer or a manual reset changed them; run `etl status` and reconcile before running "
            f"again.")


def offsets_after(batch: Batch, state: CommittedState) -> tuple[dict[tuple[str, int], CommittedOffset],
                                                                  dict[str, str]]:
    """The committed offsets and topic ids once `batch` is committed over `state`."""
    offsets = dict(state.offsets)
    skipped = {(s.topic, s.partition) for s in batch.skipped}
    for r in batch.ranges:
        offsets[(r.topic, r.partition)] = _moved(batch, r, offsets.get((r.topic, r.partition)), skipped)
    topic_ids = dict(state.topic_ids)
    if batch.kind is BatchKind.LOAD:
        topic_ids.update((topic, topic_id) for topic, topic_id in batch.topic_ids.items() if topic_id)
    return offsets, topic_ids


def _moved(batch: Batch, r: OffsetRange, found: CommittedOffset | None, skipped: set) -> CommittedOffset:
    """The partition's committed offset once the range is loaded."""
    last = RecordFingerprint.from_json(batch.last_records.get(f"{r.topic}:{r.partition}"))
    high, active = _event_time(batch, r, found)
    if found is None:
        return CommittedOffset(r.end, 0, r.start, last, high, active, r.incarnation)
    # After a skip the old record is no witness of the new log; else keep it when the range read none.
    kept = last or (None if (r.topic, r.partition) in skipped else found.last)
    if r.incarnation != found.incarnation:  # the topic was recreated: the new incarnation starts at the range
        return CommittedOffset(r.end, 0, r.start, kept, high, active, r.incarnation, found.incarnations)
    return CommittedOffset(r.end, 0, found.origin, kept, high, active, found.incarnation, found.past)


def _event_time(batch: Batch, r: OffsetRange, found: CommittedOffset | None) -> tuple[int | None, str | None]:
    """The partition's latest event time and last activity, carried forward and moved by this
    batch's range: what the event-time watermark is computed from."""
    high, active = (None, None) if found is None else (found.max_event_ms, found.active_at)
    bound = (batch.placement or {}).get("future_after_ms")
    if high is not None and bound is not None and high > bound:
        # Only a release without [hive] max_future_seconds stored a time this far ahead (a
        # sentinel such as 9999-12-31): kept, it would pin the watermark for good.
        log.warning("%s[%d]: the stored latest event time is more than [hive] max_future_seconds ahead of batch "
                    "%d's planning time; replaced by the batch's own", r.topic, r.partition, batch.batch_id)
        high = None
    new = batch.event_high.get(f"{r.topic}:{r.partition}")
    if new is not None:
        high = new if high is None else max(high, new)
    if r.size > 0 and batch.placement.get("column"):  # planned by event time: its Placement has the column
        active = utc_now_iso()
    return high, active
