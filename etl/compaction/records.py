"""What compaction needs of the state store: the lock it runs under, whether a batch is open,
the committed offsets its plans are checked against, and its own records (stored in ZooKeeper
by etl.state.compaction_records).

Composed of the state's own parts (etl.state.protocols), so that this room depends on the
parts it uses and nothing else of the store, and the memory store of the tests serves it too."""
from __future__ import annotations

from typing import Protocol

from etl.model.batch import Batch
from etl.state.protocols import CompactionPart, LockPart
from etl.state.znodes import CommittedOffset


class CompactionStore(LockPart, CompactionPart, Protocol):
    """The lock and the compaction records, and two reads of the batch and offset parts."""

    def open_batch(self) -> tuple[Batch, int] | None: ...

    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]: ...
