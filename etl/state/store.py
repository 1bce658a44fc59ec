"""The job's state in ZooKeeper: lock, committed offsets, batch plans and events.

ZkStateStore implements the five parts of etl.state.protocols (lock, batches, offsets,
operator records, compactions); a write that spans parts is still one fenced transaction
(etl.state.protocols says which).

Every znode path is built in ZkPaths. Every write that changes the job's state runs in a
transaction fenced by the lock: it checks that this run's ephemeral lock node still exists
and that nobody has taken the lock since (the `owner` node's version). A run whose session
expired therefore cannot commit, even after kazoo reconnects it with a new session.
Who else may read or change these znodes is decided by etl.state.acl ([zookeeper] auth).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Callable, Mapping

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (ConnectionLoss, NoAuthError, NodeExistsError, NoNodeError, OperationTimeoutError,
                              RolledBackError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

from etl.config import RetryConfig, ZooKeeperConfig
from etl.errors import LockLost, Retryable, StateConflict
from etl.model.batch import Batch, BatchState
from etl.retry import retry_idempotent
from etl.state import acl as zk_acl
from etl.state.paths import ZkPaths
from etl.state.protocols import StateStore
from etl.state.batch_nodes import (drop_batch_remedy, has_record_chunks, merge_markers, merge_records,
                                   partition_chunk_count, partition_chunks, record_chunk_count, record_chunks)
from etl.state.chunks import damaged, decode, read_chunks
from etl.state.marker_chunks import header_with_markers, marker_paths
from etl.state.commits import Commits
from etl.state.compaction_records import CompactionRecords
from etl.state.migration import migrate_offsets
from etl.state.records import OperatorRecords
from etl.state.snapshots import SnapshotRecords
from etl.state.totals import TotalsRecords
from etl.state.znodes import LockHolder, dump, this_run

log = logging.getLogger(__name__)

# Failures of a read that say nothing about the data; reads are retried on these.
RETRYABLE_ZK_ERRORS = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)
BATCHES_KEPT = 50
LOCK_POLL_SECONDS = 0.5  # how often wait_lock_released looks again
# ZooKeeper expires a session on a tick after its timeout: past this, a dead holder's lock is gone.
DEAD_SESSION_GRACE_SECONDS = 5.0
# Told each partition's new committed offset after a transaction moved some (a commit, a reset).
OffsetsMoved = Callable[[Mapping[tuple[str, int], int]], object]


class ZooKeeperUnavailable(Retryable):
    """ZooKeeper could not be reached."""


class ZkStateStore(Commits, SnapshotRecords, OperatorRecords, CompactionRecords, TotalsRecords):
    def __init__(self, config: ZooKeeperConfig, job_name: str, retry: RetryConfig,
                 offsets_moved: OffsetsMoved | None = None):
        """`offsets_moved`: called after each transaction that moved committed offsets, with the
        partitions it moved (the commands that move them mirror them to Kafka: etl.source.group_mirror)."""
        self.config, self.retry = config, retry
        self.offsets_moved: OffsetsMoved = offsets_moved or (lambda offsets: None)
        self.paths = ZkPaths(config.root, job_name)
        # With [zookeeper] auth = digest this authenticates, and gives every znode it creates the job's ACL.
        self.client = KazooClient(hosts=config.hosts, timeout=config.session_timeout_seconds,
                                  **zk_acl.client_options(config))
        self.me = this_run()
        self._owner_version: int | None = None
        self._session_lost = threading.Event()

    # -- connection -----------------------------------------------------------------------
    def __enter__(self) -> "ZkStateStore":
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, create_nodes: bool = True) -> None:
        """`create_nodes` False: a reader that must write nothing (`etl run --dry-run`, `etl check`)
        creates none of the job's nodes; it finds them missing before the job's first command."""
        try:
            self.client.start(timeout=self.config.session_timeout_seconds)
        except KazooTimeoutError as exc:
            raise ZooKeeperUnavailable(
                f"cannot connect to ZooKeeper at {self.config.hosts} within "
                f"{self.config.session_timeout_seconds}s; check [zookeeper] hosts and that it is running") from exc
        self.client.add_listener(self._on_state)
        log.debug("connected to ZooKeeper at %s", self.config.hosts)
        try:
            if create_nodes:
                self._ensure_job_nodes()
        except BaseException:
            self.close()  # a refused run must not leave a live session (and its threads) behind
            raise

    def has_job_nodes(self) -> bool:
        """Whether the job's nodes exist: they do from its first command on (connect creates them)."""
        return self._read(lambda: self.client.exists(self.paths.batches), "look for the job's nodes") is not None

    def _ensure_job_nodes(self) -> None:
        """Create the job's nodes if missing, and check that this client may use them as
        [zookeeper] auth says, before anything else is read or written."""
        try:
            for path in (self.paths.snapshots, self.paths.plans, self.paths.batches, self.paths.events):
                self._read(lambda p=path: self.client.ensure_path(p), f"create {path}")
            acls, _ = self._read(lambda: self.client.get_acls(self.paths.job), "read the job's ACL")
        except NoAuthError as exc:
            raise zk_acl.access_denied(self.config, self.paths.job) from exc
        zk_acl.check_job_node(self.config, self.paths.job, acls)

    def close(self) -> None:
        self.client.remove_listener(self._on_state)  # stopping reports LOST, which is expected here
        self.client.stop()
        self.client.close()

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost.set()
            log.error("ZooKeeper session expired: this run has lost the job lock")

    def _read(self, fn, what: str):
        try:
            return retry_idempotent(self.retry, RETRYABLE_ZK_ERRORS, f"ZooKeeper {what}", fn)
        except SessionExpiredError as exc:
            if self._owner_version is None:
                raise
            # The lock was an ephemeral node of that session: a read that outlived it is
            # a lost lock, whichever of this run's steps noticed first.
            raise LockLost(f"cannot {what}: this run's ZooKeeper session expired, so it no longer holds the job "
                           f"lock; it stops without committing, and the next run resumes the open batch") from exc

    # -- lock -----------------------------------------------------------------------------
    def acquire_lock(self) -> LockHolder | None:
        """Take the job lock. Returns None on success, or the holder when another run has it."""
        self._read(lambda: self.client.ensure_path(self.paths.owner), "create owner node")
        txn = self.client.transaction()
        txn.create(self.paths.lock, dump(self.me.__dict__), ephemeral=True)
        txn.set_data(self.paths.owner, dump(self.me.__dict__))
        results = txn.commit()
        if isinstance(results[0], NodeExistsError):
            return self.lock_holder() or self.acquire_lock()
        _raise_if_failed(results, "take the job lock")
        self._owner_version = results[1].version
        migrate_offsets(self)  # a job's first run under snapshots: a no-op once the pointer exists
        return None

    def take_lock(self) -> LockHolder | None:
        """acquire_lock, but a holder that was an earlier attempt of this driver's YARN application
        is dead (YARN retries an ApplicationMaster only after it died, and in cluster mode the
        driver runs there): its lock goes when its ZooKeeper session expires, so wait that long
        for it, and the new attempt resumes the open batch instead of giving up."""
        holder = self.acquire_lock()
        if holder is None or not holder.is_earlier_attempt_of(self.me):
            return holder
        wait = self.config.session_timeout_seconds + DEAD_SESSION_GRACE_SECONDS
        log.warning("the job lock is held by %s, an earlier attempt of this YARN application, which YARN "
                    "replaced because it died: waiting up to %gs for its ZooKeeper session to expire",
                    holder.describe(), wait)
        self.wait_lock_released(wait)
        return self.acquire_lock()  # the holder again if its session outlived the wait

    def lock_holder(self) -> LockHolder | None:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.lock), "read lock")
        except NoNodeError:
            return None
        return LockHolder.parse(data)

    def wait_lock_released(self, timeout: float) -> None:
        """Wait until nobody holds the job lock, at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while self.lock_holder() is not None and time.monotonic() < deadline:
            time.sleep(LOCK_POLL_SECONDS)

    def release_lock(self) -> None:
        if self._owner_version is None:
            return
        txn = self.client.transaction()
        self._fence(txn)
        txn.delete(self.paths.lock)
        results = txn.commit()
        self._owner_version = None
        if any(isinstance(r, Exception) for r in results):
            log.warning("the job lock was already gone at release: %s", results)

    def assert_lock_held(self) -> None:
        if self._owner_version is None or self._session_lost.is_set():
            raise LockLost("this run lost the job lock (its ZooKeeper session expired); it stops without "
                           "committing. The next run resumes the open batch.")

    def _fence(self, txn) -> None:
        self.assert_lock_held()
        txn.check(self.paths.lock, 0)
        txn.check(self.paths.owner, self._owner_version)

    def _commit_fenced(self, txn, what: str) -> list:
        """Commit a transaction whose first two operations are the fence checks."""
        try:
            results = txn.commit()
        except SessionExpiredError as exc:
            raise LockLost(f"cannot {what}: this run's ZooKeeper session expired, so it no longer holds "
                           f"the job lock; the next run resumes the open batch") from exc
        if any(_failed(r) for r in results[:2]):
            raise LockLost(f"cannot {what}: this run no longer holds the job lock "
                           f"(session expired or another run took over); nothing was changed")
        _raise_if_failed(results, what)
        return results

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
            records = [f"{batch_node}/records-{i:05d}" for i in range(record_chunk_count(header))]
            header = merge_records(header, read_chunks(self.client, records, sums.get("records"), True, remedy))
            partitions = None
            if "partition_count" in header:
                touched = [self.paths.touched(batch_id, i) for i in range(partition_chunk_count(header))]
                partitions = [p for part in read_chunks(self.client, touched, sums.get("partitions"), False, remedy)
                              for p in part]
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
            self._write_beside(node, "partitions", partition_chunks(moved), batch.batch_id)
        txn = self.client.transaction()
        self._fence(txn)
        txn.set_data(node, header_with_markers(self, moved), version=version)
        results = self._commit_fenced(txn, f"move batch {batch.batch_id} to {to.value}")
        return moved, results[-1].version

    def store_records(self, before: Batch, moved: Batch) -> None:
        """Write the per-partition maps beside the header (etl.state.batch_nodes) when they
        changed, or when a header from before chunks held them inline and is about to drop them."""
        first = f"{self.paths.batch(moved.batch_id)}/records-00000"
        changed = (moved.last_records, moved.event_high) != (before.last_records, before.event_high)
        if changed or has_record_chunks(moved) and \
                self._read(lambda: self.client.exists(first), "look for a batch's records") is None:
            self._write_beside(self.paths.batch(moved.batch_id), "records", record_chunks(moved), moved.batch_id)

    def _write_beside(self, node: str, prefix: str, chunks: list[bytes], batch_id: int) -> None:
        """Chunks under a batch's znode, each its own fenced write, before the header that counts
        them; a crash's leftovers (the header not yet moved) are deleted first."""
        stale = [c for c in self._read(lambda: self.client.get_children(node), "list a batch's chunks")
                 if c.startswith(f"{prefix}-")]
        if stale:
            txn = self.client.transaction()
            self._fence(txn)
            for child in stale:
                txn.delete(f"{node}/{child}")
            self._commit_fenced(txn, f"delete what a crash left of batch {batch_id}'s {prefix}")
        self.create_fenced([(f"{node}/{prefix}-{i:05d}", c) for i, c in enumerate(chunks)],
                           f"store batch {batch_id}'s {prefix}")

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]:
        """Rewrite the header of a batch, state unchanged (fenced, and only over `version`)."""
        amended = batch.amended(**changes)
        self.store_records(batch, amended)
        txn = self.client.transaction()
        self._fence(txn)
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
        self.prune_snapshots({opened[0].snapshot} if opened and opened[0].snapshot else set())


def _failed(result) -> bool:
    """A transaction result that is an error of its own, not a roll-back caused by another."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


def _raise_if_failed(results: list, what: str) -> None:
    failures = [(i, r) for i, r in enumerate(results) if _failed(r)]
    if failures:
        index, error = failures[0]
        raise StateConflict(f"cannot {what}: ZooKeeper refused operation {index} of the transaction "
                            f"({type(error).__name__}); nothing was changed")


def as_parts(store: ZkStateStore) -> StateStore:
    """ZkStateStore is every part of etl.state.protocols: mypy checks it here."""
    return store
