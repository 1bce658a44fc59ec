"""The job's state in ZooKeeper: lock, committed offsets, batch plans and events.

ZkStateStore is composed of the five parts of etl.state.protocols, all on one session
(etl.state.session, the lock part): ZkBatches (etl.state.batches, etl.state.offsets_after),
SnapshotRecords (etl.state.snapshots), OperatorRecords (etl.state.records) with TotalsRecords
(etl.state.totals), and CompactionRecords (etl.state.compaction_records). The store delegates
every method to its part, so that its callers keep one object for now; each part can be handed
down to the code that needs only it. A write that spans parts is still one fenced ZooKeeper
transaction (etl.state.protocols says how). Every znode path is built in ZkPaths. Who else may
read or change these znodes is decided by etl.state.acl ([zookeeper] auth).
"""
from __future__ import annotations

from typing import Collection

from kazoo.client import KazooClient

from etl.config import RetryConfig, ZooKeeperConfig
from etl.model.batch import Batch, BatchState
from etl.model.route_binding import JobBinding
from etl.model.compaction import CompactionPlan, CompactionState, Relocations
from etl.model.events import Bind, Event, PendingReset, Reset
from etl.state.batches import BATCHES_KEPT, ZkBatches
from etl.state.compaction_records import CompactionRecords
from etl.state.migration import migrate_offsets
from etl.state.paths import ZkPaths
from etl.state.protocols import StateStore
from etl.state.records import OperatorRecords
from etl.state.session import RETRYABLE_ZK_ERRORS, OffsetsMoved, ZkSession, ZooKeeperUnavailable
from etl.state.snapshots import CommittedState, SnapshotRecords
from etl.state.totals import LoadTotals, TotalsRecords
from etl.state.znodes import CommittedOffset, LockHolder

# Imported from here by the commands and the tests.
__all__ = ["BATCHES_KEPT", "RETRYABLE_ZK_ERRORS", "OffsetsMoved", "ZkPaths", "ZkStateStore", "ZooKeeperUnavailable"]


class ZkStateStore:
    def __init__(self, config: ZooKeeperConfig, job_name: str, retry: RetryConfig,
                 offsets_moved: OffsetsMoved | None = None):
        """`offsets_moved`: called after each transaction that moved committed offsets, with the
        partitions it moved (the commands that move them mirror them to Kafka: etl.source.group_mirror)."""
        self.session = ZkSession(config, job_name, retry, offsets_moved)
        self.offsets = SnapshotRecords(self.session)
        self.totals = TotalsRecords(self.session)
        self.operator = OperatorRecords(self.session, self.offsets)
        self.compactions = CompactionRecords(self.session)
        self.batches = ZkBatches(self.session, self.offsets, self.totals, self.operator, self.compactions)
        # A job's first run under snapshots moves its offsets there: a no-op once the pointer exists.
        self.session.lock_taken = lambda: migrate_offsets(self.offsets)

    # -- the session's own, read by the commands and the tests ----------------------------
    @property
    def config(self) -> ZooKeeperConfig:
        return self.session.config

    @property
    def retry(self) -> RetryConfig:
        return self.session.retry

    @property
    def paths(self) -> ZkPaths:
        return self.session.paths

    @property
    def client(self) -> KazooClient:
        return self.session.client

    @property
    def me(self) -> LockHolder:
        return self.session.me

    def __enter__(self) -> "ZkStateStore":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, create_nodes: bool = True) -> None:
        self.session.connect(create_nodes)

    def close(self) -> None:
        self.session.close()

    def has_job_nodes(self) -> bool:
        return self.session.has_job_nodes()

    # -- lock -----------------------------------------------------------------------------
    def acquire_lock(self) -> LockHolder | None:
        return self.session.acquire_lock()

    def take_lock(self) -> LockHolder | None:
        return self.session.take_lock()

    def lock_holder(self) -> LockHolder | None:
        return self.session.lock_holder()

    def release_lock(self) -> None:
        self.session.release_lock()

    def assert_lock_held(self) -> None:
        self.session.assert_lock_held()

    # -- batches --------------------------------------------------------------------------
    def write_plan(self, batch: Batch) -> int:
        return self.batches.write_plan(batch)

    def plan_base(self, batch_id: int) -> int | None:
        return self.batches.plan_base(batch_id)

    def read_ranges(self, batch_id: int, range_count: int, remedy: str) -> list:
        return self.batches.read_ranges(batch_id, range_count, remedy)

    def batch_ids(self) -> list[int]:
        return self.batches.batch_ids()

    def read_batch(self, batch_id: int) -> tuple[Batch, int]:
        return self.batches.read_batch(batch_id)

    def last_batch(self) -> tuple[Batch, int] | None:
        return self.batches.last_batch()

    def open_batch(self) -> tuple[Batch, int] | None:
        return self.batches.open_batch()

    def advance(self, batch: Batch, version: int, to: BatchState, **changes) -> tuple[Batch, int]:
        return self.batches.advance(batch, version, to, **changes)

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]:
        return self.batches.amend(batch, version, **changes)

    def store_records(self, before: Batch, moved: Batch) -> None:
        self.batches.store_records(before, moved)

    def prepare_commit(self, batch: Batch) -> str:
        return self.batches.prepare_commit(batch)

    def commit(self, batch: Batch, version: int, written_bytes: int | None = None) -> Batch:
        return self.batches.commit(batch, version, written_bytes)

    def prune_batches(self) -> None:
        self.batches.prune_batches()

    # -- committed offsets ----------------------------------------------------------------
    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]:
        return self.offsets.committed_offsets()

    def topic_ids(self) -> dict[str, str]:
        return self.offsets.topic_ids()

    def committed_state(self) -> CommittedState:
        return self.offsets.committed_state()

    def pointer_version(self) -> int | None:
        return self.offsets.pointer_version()

    def snapshot_base(self, name: str) -> int | None:
        return self.offsets.snapshot_base(name)

    def write_snapshot(self, offsets: dict[tuple[str, int], CommittedOffset], topic_ids: dict[str, str],
                       base: int | None, why: str) -> str:
        return self.offsets.write_snapshot(offsets, topic_ids, base, why)

    def move_pointer(self, txn, name: str, version: int | None, **why) -> None:
        self.offsets.move_pointer(txn, name, version, **why)

    def prune_snapshots(self, keep: set[str]) -> None:
        self.offsets.prune_snapshots(keep)

    # -- operator records and totals ------------------------------------------------------
    def pending_reset(self) -> PendingReset | None:
        return self.operator.pending_reset()

    def write_pending_reset(self, pending: PendingReset) -> None:
        self.operator.write_pending_reset(pending)

    def finish_reset(self, event: Reset, topic_ids: dict[str, str | None]) -> None:
        self.operator.finish_reset(event, topic_ids)

    def binding(self) -> JobBinding | None:
        return self.operator.binding()

    def bind_first(self, target: JobBinding) -> None:
        self.operator.bind_first(target)

    def rebind(self, target: JobBinding, reset_origins: bool, event: Bind, relocations_of: str | None = None) -> None:
        self.operator.rebind(target, reset_origins, event,
                             also=None if relocations_of is None else lambda txn: self.compactions.adopt(txn, relocations_of))

    def record_event(self, event: Event) -> None:
        self.operator.record_event(event)

    def events(self) -> list[Event]:
        return self.operator.events()

    def load_totals(self) -> tuple[LoadTotals, int | None]:
        return self.totals.load_totals()

    def move_totals(self, txn, batch: Batch, written_bytes: int | None) -> None:
        self.totals.move_totals(txn, batch, written_bytes)

    # -- compactions ----------------------------------------------------------------------
    def relocations(self) -> Relocations:
        return self.compactions.relocations()

    def open_compactions(self) -> list[tuple[CompactionPlan, int]]:
        return self.compactions.open_compactions()

    def next_compaction_id(self) -> int:
        return self.compactions.next_compaction_id()

    def write_compaction(self, plan: CompactionPlan) -> int:
        return self.compactions.write_compaction(plan)

    def advance_compaction(self, plan: CompactionPlan, version: int, to: CompactionState,
                           **changes) -> tuple[CompactionPlan, int]:
        return self.compactions.advance_compaction(plan, version, to, **changes)

    def drop_compaction(self, plan: CompactionPlan, version: int) -> None:
        self.compactions.drop_compaction(plan, version)

    def checksummed_outputs(self, ids: Collection[int] | None = None) -> dict[int, frozenset[str]]:
        return self.compactions.checksummed_outputs(ids)


def as_parts(store: ZkStateStore) -> StateStore:
    """ZkStateStore is every part of etl.state.protocols: mypy checks it here."""
    return store
