"""What compaction needs of the state store: the lock it runs under, whether a batch is open,
the committed offsets its plans are checked against, and its own records (stored in ZooKeeper
by etl.state.compaction_records, and the store of etl.state offers every call below).

A Protocol rather than the store's class, so that this room depends on the calls it makes and
nothing else of the store."""
from __future__ import annotations

from typing import Protocol

from etl.model.batch import Batch
from etl.model.compaction import CompactionPlan, CompactionState, Relocations
from etl.state.znodes import CommittedOffset, LockHolder


class CompactionStore(Protocol):
    @property
    def me(self) -> LockHolder:
        """This run, as it holds the lock (a plan records who planned it)."""

    def assert_lock_held(self) -> None: ...

    def open_batch(self) -> tuple[Batch, int] | None: ...

    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]: ...

    def relocations(self) -> Relocations: ...

    def open_compactions(self) -> list[tuple[CompactionPlan, int]]: ...

    def next_compaction_id(self) -> int: ...

    def write_compaction(self, plan: CompactionPlan) -> int: ...

    def advance_compaction(self, plan: CompactionPlan, version: int, to: CompactionState,
                           **changes) -> tuple[CompactionPlan, int]: ...

    def drop_compaction(self, plan: CompactionPlan, version: int) -> None: ...
