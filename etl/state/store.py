"""The job's state in ZooKeeper: lock, committed offsets, batch plans and events.

ZkStateStore is the six parts of etl.state.protocols on one session, handed out as they are:
`session` (etl.state.session: the lock and the fence), `batches` (etl.state.batches, with
etl.state.offsets_after), `offsets` (etl.state.snapshots), `operator` (etl.state.records),
`totals` (etl.state.totals) and `compactions` (etl.state.compaction_records). A caller uses the
part it needs (`store.batches.commit(...)`); the store itself only connects and closes. A write
that spans parts is still one fenced ZooKeeper transaction (etl.state.protocols says how). Every
znode path is built in ZkPaths. Who else may read or change these znodes is decided by
etl.state.acl ([zookeeper] auth).
"""
from __future__ import annotations

from etl.config import RetryConfig, ZooKeeperConfig
from etl.state.batches import BATCHES_KEPT, ZkBatches
from etl.state.compaction_records import CompactionRecords
from etl.state.migration import migrate_offsets
from etl.state.paths import ZkPaths
from etl.state.protocols import StateStore
from etl.state.records import OperatorRecords
from etl.state.session import RETRYABLE_ZK_ERRORS, OffsetsMoved, ZkSession, ZooKeeperUnavailable
from etl.state.snapshots import SnapshotRecords
from etl.state.totals import TotalsRecords

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
        self.compactions = CompactionRecords(self.session)
        self.operator = OperatorRecords(self.session, self.offsets, self.compactions)
        self.batches = ZkBatches(self.session, self.offsets, self.totals, self.operator, self.compactions)
        # A job's first run under snapshots moves its offsets there: a no-op once the pointer exists.
        self.session.lock_taken = lambda: migrate_offsets(self.offsets)

    def __enter__(self) -> "ZkStateStore":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, create_nodes: bool = True) -> None:
        self.session.connect(create_nodes)

    def close(self) -> None:
        self.session.close()


def as_parts(store: ZkStateStore) -> StateStore:
    """ZkStateStore hands out every part of etl.state.protocols: mypy checks it here."""
    return store
