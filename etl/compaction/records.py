"""What compaction needs of the state store: the lock it runs under, whether a batch is open,
the committed offsets its plans are checked against, and its own records (stored in ZooKeeper
by etl.state.compaction_records).

Composed of the state's own parts (etl.state.protocols), so that this room depends on the
parts it uses and nothing else of the store, and the memory store of the tests serves it too."""
from __future__ import annotations

from typing import Protocol

from etl.state.protocols import WithBatches, WithCompactions, WithOffsets, WithSession


class CompactionStore(WithSession, WithCompactions, WithBatches, WithOffsets, Protocol):
    """The lock and the compaction records, and the batch and offset parts' reads (whether a
    batch is open, the committed offsets)."""
