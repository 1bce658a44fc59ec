"""The job's state seen as six small parts, each a Protocol with exactly what its callers use.

- LockPart: the job lock and the fence every write passes (etl.state.session).
- BatchPart: plans and batch states, and the commit (etl.state.batches; the offsets it leaves:
  etl.state.offsets_after).
- OffsetPart: the committed offsets and topic ids behind the pointer (etl.state.snapshots).
- OperatorPart: resets, the job's binding, the event log (etl.state.records).
- TotalsPart: the load totals the commits add up (etl.state.totals).
- CompactionPart: compactions under way and where compacted partitions live
  (etl.state.compaction_records).

A StateStore hands out its parts (`store.batches`, `store.offsets`, ...), which callers use
directly: a new operation is a method of its part and a line of its protocol. ZkStateStore
(etl.state.store) is composed of the ZooKeeper parts; tests/harness/memory_store.py is every part
at once, and one contract suite (tests/harness/store_contract.py,
run on memory by tests/unit/test_store_contract_memory.py and on ZooKeeper by
tests/integration/test_store_contract_zookeeper.py) keeps the two alike.

How one fenced transaction spans parts: the parts are views of one store, not stores of their
own, so a write that changes several of them is still ONE ZooKeeper multi, which either applies
whole or not at all. Every such multi starts with the lock part's fence: a check that this run's
ephemeral lock node exists and that the `owner` node still has the version this run's lock take
gave it. The commit (BatchPart.commit) is the widest: fence, the snapshot's existence, the
pointer's move over the version the offsets were read at (OffsetPart), the batch header ->
COMMITTED (BatchPart), and the load totals over their version (OperatorPart). A reset
(OperatorPart.finish_reset) moves the pointer and appends its event in one multi; a rebind sets
the binding, moves the pointer, appends its event and (to routes) re-files the relocations in one;
a compaction's move to SWITCHED sets its plan and its table's relocations in one. A run that lost
its lock fails the fence, and nothing of the multi is applied.
"""
from __future__ import annotations

from typing import Collection, Protocol

from etl.model.batch import Batch, BatchState
from etl.model.route_binding import JobBinding
from etl.model.compaction import CompactionPlan, CompactionState, Relocations
from etl.model.events import Bind, Event, PendingReset, Reset
from etl.state.totals import LoadTotals
from etl.state.znodes import CommittedOffset, LockHolder


class LockPart(Protocol):
    """The job lock: one holder at a time; every write of every part is fenced by it."""

    @property
    def me(self) -> LockHolder:
        """This run, as the lock records its holder."""

    def acquire_lock(self) -> LockHolder | None:
        """Take the lock: None on success, else the run that holds it."""

    def take_lock(self) -> LockHolder | None:
        """acquire_lock, waiting out a dead earlier YARN attempt of this application."""

    def lock_holder(self) -> LockHolder | None: ...

    def release_lock(self) -> None: ...

    def assert_lock_held(self) -> None:
        """Raise etl.errors.LockLost unless this run still holds the lock."""


class BatchPart(Protocol):
    """Plans and batch states. Every write is fenced and over the version the caller read."""

    def write_plan(self, batch: Batch) -> int:
        """Store a PLANNED batch; returns its header's version."""

    def batch_ids(self) -> list[int]: ...

    def read_batch(self, batch_id: int) -> tuple[Batch, int]: ...

    def last_batch(self) -> tuple[Batch, int] | None: ...

    def open_batch(self) -> tuple[Batch, int] | None: ...

    def advance(self, batch: Batch, version: int, to: BatchState, **changes) -> tuple[Batch, int]: ...

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]: ...

    def commit(self, batch: Batch, version: int, written_bytes: int | None = None) -> Batch:
        """Move the committed offsets past the batch and mark it COMMITTED, atomically; raise
        etl.errors.StateConflict if the offsets moved since its plan."""

    def prune_batches(self) -> None: ...


class OffsetPart(Protocol):
    """The committed offsets, moved only by a commit, a reset or a rebind."""

    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]: ...

    def topic_ids(self) -> dict[str, str]: ...


class OperatorPart(Protocol):
    """What operators did: resets, the binding to a table, the event log; and the load totals."""

    def pending_reset(self) -> PendingReset | None: ...

    def write_pending_reset(self, pending: PendingReset) -> None: ...

    def finish_reset(self, event: Reset, topic_ids: dict[str, str | None]) -> None: ...

    def binding(self) -> JobBinding | None: ...

    def bind_first(self, target: JobBinding) -> None: ...

    def rebind(self, target: JobBinding, reset_origins: bool, event: Bind, relocations_of: str | None = None) -> None:
        """With `relocations_of`, a one-table job's table's relocations are re-filed under that
        routed table's name in the same transaction (CompactionRecords.adopt)."""

    def record_event(self, event: Event) -> None: ...

    def events(self) -> list[Event]: ...


class TotalsPart(Protocol):
    """What the job has loaded in all, moved by each commit."""

    def load_totals(self) -> tuple[LoadTotals, int | None]: ...


class CompactionPart(Protocol):
    """Compactions under way, each with its version, and the relocations SWITCHED moves."""

    def relocations(self) -> Relocations: ...

    def open_compactions(self) -> list[tuple[CompactionPlan, int]]: ...

    def next_compaction_id(self) -> int: ...

    def write_compaction(self, plan: CompactionPlan) -> int: ...

    def advance_compaction(self, plan: CompactionPlan, version: int, to: CompactionState,
                           **changes) -> tuple[CompactionPlan, int]: ...

    def drop_compaction(self, plan: CompactionPlan, version: int) -> None: ...

    def checksummed_outputs(self, ids: Collection[int] | None = None) -> dict[int, frozenset[str]]: ...


# Each part as a property, stated once: a caller's protocol names the parts it uses
# (etl.sink.markers.MarkerStore, etl.job.pins.PinStore, etl.compaction.records.CompactionStore).
class WithSession(Protocol):
    @property
    def session(self) -> LockPart: ...


class WithBatches(Protocol):
    @property
    def batches(self) -> BatchPart: ...


class WithOffsets(Protocol):
    @property
    def offsets(self) -> OffsetPart: ...


class WithOperator(Protocol):
    @property
    def operator(self) -> OperatorPart: ...


class WithTotals(Protocol):
    @property
    def totals(self) -> TotalsPart: ...


class WithCompactions(Protocol):
    @property
    def compactions(self) -> CompactionPart: ...


class StateStore(WithSession, WithBatches, WithOffsets, WithOperator, WithTotals, WithCompactions, Protocol):
    """The six parts on one ZooKeeper session: what a command that runs batches holds."""
