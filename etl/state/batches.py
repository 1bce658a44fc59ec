"""The batches part of the job's state (etl.state.protocols.BatchPart): each batch's header
znode and the chunks beside it (etl.state.batch_nodes), moved state by state over the version
the caller read; the plan and the commit are in etl.state.commits.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from etl.model.batch import Batch, BatchState
from etl.state.batch_nodes import (drop_batch_remedy, has_record_chunks, merge_markers, merge_records,
                                   partition_chunk_count, partition_chunks, record_chunk_count, record_chunks)
from etl.state.chunks import damaged, decode, read_chunks
from etl.state.commits import Commits
from etl.state.compaction_records import CompactionRecords
from etl.state.marker_chunks import header_with_markers, marker_paths
from etl.state.records import OperatorRecords
from etl.state.session import ZkSession
from etl.state.snapshots import SnapshotRecords
from etl.state.totals import TotalsRecords

BATCHES_KEPT = 50


class ZkBatches(Commits):
    """Plans and batch states on the run's session. The commit spans parts (etl.state.protocols):
    it adds the offsets part's pointer move and the totals to the header's transaction."""

    def __init__(self, session: ZkSession, offsets: SnapshotRecords, totals: TotalsRecords,
                 operator: OperatorRecords, compactions: CompactionRecords):
        super().__init__(session)
        self.offsets, self.totals, self.operator = offsets, totals, operator
        self.compactions = compactions  # a REPAIR's plan drops the merged files it rewrites from their records

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
        if batch.partitions is None and moved.partitions is not None:  # WRITTEN by event time
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
        changed = (moved.last_records, moved.event_high) != (before.last_records, before.event_high)
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
