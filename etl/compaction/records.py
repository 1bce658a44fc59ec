"""What compaction needs of the state store: the lock it runs under, whether a batch is open,
the committed offsets its plans are checked against, and its own records (stored in ZooKeeper
by etl.state.compaction_records).

Composed of the state's own parts (etl.state.protocols), so that this room depends on the
parts it uses and nothing else of the store, and the memory store of the tests serves it too."""
from __future__ import annotations

from typing import Protocol

from etl.state.protocols import BatchPart, CompactionPart, LockPart, OffsetPart


class CompactionStore(Protocol):
    """The lock and the compaction records, and the batch and offset parts' reads."""

    @property
    def session(self) -> LockPart: ...

    @property
    def compactions(self) -> CompactionPart: ...

    @property
    def batches(self) -> BatchPart: ...  # whether a batch is open

    @property
    def offsets(self) -> OffsetPart: ...  # the committed offsets
