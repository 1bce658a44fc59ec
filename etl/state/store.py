"""The job's state in ZooKeeper: lock, committed offsets, batch plans and events.

Every znode path is built in ZkPaths. Every write that changes the job's state runs in a
transaction fenced by the lock: it checks that this run's ephemeral lock node still exists
and that nobody has taken the lock since (the `owner` node's version). A run whose session
expired therefore cannot commit, even after kazoo reconnects it with a new session.
Who else may read or change these znodes is decided by etl.state.acl ([zookeeper] auth).
"""
from __future__ import annotations

import json
import logging
import threading

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (ConnectionLoss, NoAuthError, NodeExistsError, NoNodeError, OperationTimeoutError,
                              RolledBackError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

from etl.config import RetryConfig, ZooKeeperConfig
from etl.errors import LockLost, Retryable, StateConflict
from etl.model.batch import Batch, BatchKind, BatchState, OffsetRange, utc_now_iso
from etl.model.events import Skipped
from etl.model.identity import RecordFingerprint
from etl.retry import retry_idempotent
from etl.state import acl as zk_acl
from etl.state.paths import ZkPaths
from etl.state.compaction_records import CompactionRecords
from etl.state.records import OperatorRecords
from etl.state.znodes import CommittedOffset, LockHolder, dump, this_run

log = logging.getLogger(__name__)

# Failures of a read that say nothing about the data; reads are retried on these.
RETRYABLE_ZK_ERRORS = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)
PARTITIONS_PER_CHUNK = 5000  # ~60 bytes a touched partition
RANGES_PER_CHUNK = 2000  # ~40 bytes a range: a chunk stays far below the 1 MB znode limit
BATCHES_KEPT = 50


class ZooKeeperUnavailable(Retryable):
    """ZooKeeper could not be reached."""


class ZkStateStore(OperatorRecords, CompactionRecords):
    def __init__(self, config: ZooKeeperConfig, job_name: str, retry: RetryConfig):
        self.config, self.retry = config, retry
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

    def connect(self) -> None:
        try:
            self.client.start(timeout=self.config.session_timeout_seconds)
        except KazooTimeoutError as exc:
            raise ZooKeeperUnavailable(
                f"cannot connect to ZooKeeper at {self.config.hosts} within "
                f"{self.config.session_timeout_seconds}s; check [zookeeper] hosts and that it is running") from exc
        self.client.add_listener(self._on_state)
        log.debug("connected to ZooKeeper at %s", self.config.hosts)
        try:
            self._ensure_job_nodes()
        except BaseException:
            self.close()  # a refused run must not leave a live session (and its threads) behind
            raise

    def _ensure_job_nodes(self) -> None:
        """Create the job's nodes if missing, and check that this client may use them as
        [zookeeper] auth says, before anything else is read or written."""
        try:
            for path in (self.paths.offsets, self.paths.batches, self.paths.events):
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
        return retry_idempotent(self.retry, RETRYABLE_ZK_ERRORS, f"ZooKeeper {what}", fn)

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
        return None

    def lock_holder(self) -> LockHolder | None:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.lock), "read lock")
        except NoNodeError:
            return None
        return LockHolder(**json.loads(data))

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

    # -- offsets --------------------------------------------------------------------------
    def committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]:
        return self._read(self._committed_offsets, "read committed offsets")

    def _committed_offsets(self) -> dict[tuple[str, int], CommittedOffset]:
        reads = {}
        for topic in self.client.get_children(self.paths.offsets):
            for part in self.client.get_children(f"{self.paths.offsets}/{topic}"):
                reads[(topic, int(part))] = self.client.get_async(self.paths.offset(topic, int(part)))
        offsets = {}
        for key, async_result in reads.items():
            data, stat = async_result.get()
            offsets[key] = CommittedOffset.parse(data, stat.version)
        return offsets

    def topic_ids(self) -> dict[str, str]:
        """The topic ids stored at commit, for topics whose broker reported one."""
        return self._read(self._topic_ids, "read topic ids")

    def _topic_ids(self) -> dict[str, str]:
        ids = {}
        for topic in self.client.get_children(self.paths.offsets):
            data, _ = self.client.get(self.paths.topic(topic))
            if data:
                ids[topic] = json.loads(data)["topic_id"]
        return ids

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
        data, stat = self.client.get(self.paths.batch(batch_id))
        header = json.loads(data)
        ranges = []
        for index in range(_chunk_count(header["range_count"])):
            chunk, _ = self.client.get(self.paths.chunk(batch_id, index))
            ranges.extend(json.loads(chunk))
        partitions = None
        if "partition_count" in header:
            partitions = []
            for index in range(-(-header["partition_count"] // PARTITIONS_PER_CHUNK)):
                chunk, _ = self.client.get(self.paths.touched(batch_id, index))
                partitions.extend(json.loads(chunk))
        return Batch.from_json(header, ranges, partitions), stat.version

    def write_plan(self, batch: Batch) -> int:
        """Store a PLANNED batch: header and range chunks in one fenced transaction."""
        txn = self.client.transaction()
        self._fence(txn)
        txn.create(self.paths.batch(batch.batch_id), dump(batch.header_json()))
        for index, chunk in enumerate(_chunks(batch.ranges)):
            txn.create(self.paths.chunk(batch.batch_id, index), dump([r.to_json() for r in chunk]))
        for skipped in batch.skipped:
            self._append_event(txn, Skipped.of(batch.batch_id, batch.planned_at, skipped))
        self._commit_fenced(txn, f"store the plan of batch {batch.batch_id}")
        return 0  # a new znode's version

    def advance(self, batch: Batch, version: int, to: BatchState, **changes) -> tuple[Batch, int]:
        moved = batch.advanced(to, **changes)
        txn = self.client.transaction()
        self._fence(txn)
        if batch.partitions is None and moved.partitions is not None:  # WRITTEN by event time: in chunks
            touched = moved.partitions
            for index, start in enumerate(range(0, len(touched), PARTITIONS_PER_CHUNK)):
                txn.create(self.paths.touched(batch.batch_id, index),
                           dump(list(touched[start:start + PARTITIONS_PER_CHUNK])))
        txn.set_data(self.paths.batch(batch.batch_id), dump(moved.header_json()), version=version)  # last: its stat
        results = self._commit_fenced(txn, f"move batch {batch.batch_id} to {to.value}")
        return moved, results[-1].version

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]:
        """Rewrite the header of a batch, state unchanged (fenced, and only over `version`)."""
        amended = batch.amended(**changes)
        txn = self.client.transaction()
        self._fence(txn)
        txn.set_data(self.paths.batch(batch.batch_id), dump(amended.header_json()), version=version)
        results = self._commit_fenced(txn, f"update batch {batch.batch_id}")
        return amended, results[-1].version

    def commit(self, batch: Batch, version: int) -> Batch:
        """Move every range's offset from its expected value to its end and mark the batch
        COMMITTED, all in one transaction that aborts if anything moved underneath. A REPAIR
        batch moves no offset: it only checks that none moved since it was planned."""
        committed = batch.advanced(BatchState.COMMITTED)
        self.assert_lock_held()  # a fenced-out run must hear that, not a misleading offset mismatch
        current = self.committed_offsets()
        _check_expected(batch, current)
        stored_ids = self.topic_ids()
        for topic in {r.topic for r in batch.ranges}:
            self._read(lambda t=topic: self.client.ensure_path(self.paths.topic(t)), "create topic node")
        txn = self.client.transaction()
        self._fence(txn)
        for r in batch.ranges:
            self._commit_range(txn, batch, r, current.get((r.topic, r.partition)))
        for topic, topic_id in sorted(batch.topic_ids.items()):
            if topic_id and stored_ids.get(topic) != topic_id and batch.kind is BatchKind.LOAD:
                txn.set_data(self.paths.topic(topic), dump({"topic_id": topic_id}))
        txn.set_data(self.paths.batch(batch.batch_id), dump(committed.header_json()), version=version)
        try:
            self._commit_fenced(txn, f"commit batch {batch.batch_id}")
        except (ConnectionLoss, OperationTimeoutError, LockLost) as exc:
            # After a lost connection or session the outcome is unknown: the transaction may
            # have been applied before the answer was lost. The batch node says which.
            unknown = not isinstance(exc, LockLost) or isinstance(exc.__cause__, SessionExpiredError)
            if not unknown or self.read_batch(batch.batch_id)[0].state is not BatchState.COMMITTED:
                raise
        return committed

    def _commit_range(self, txn, batch: Batch, r: OffsetRange, found: CommittedOffset | None) -> None:
        path = self.paths.offset(r.topic, r.partition)
        if batch.kind is BatchKind.REPAIR:
            txn.check(path, found.version)
            return
        last = RecordFingerprint.from_json(batch.last_records.get(f"{r.topic}:{r.partition}"))
        high, active = _event_time(batch, r, found)
        if found is None:
            txn.create(path, CommittedOffset(r.end, 0, r.start, last, high, active).to_bytes())
            return
        skipped = any(s.topic == r.topic and s.partition == r.partition for s in batch.skipped)
        # After a skip the old record is no witness of the new log; else keep it when the range read none.
        kept = last or (None if skipped else found.last)
        txn.set_data(path, CommittedOffset(r.end, 0, found.origin, kept, high, active).to_bytes(),
                     version=found.version)

    def prune_batches(self) -> None:
        """Keep the newest committed batches only; they serve status and recovery reports."""
        for batch_id in self.batch_ids()[:-BATCHES_KEPT]:
            self._read(lambda b=batch_id: self.client.delete(self.paths.batch(b), recursive=True),
                       f"delete old batch {batch_id}")



def _event_time(batch: Batch, r: OffsetRange, found: CommittedOffset | None) -> tuple[int | None, str | None]:
    """The partition's latest event time and last activity, carried forward and moved by this
    batch's range: what the event-time watermark is computed from."""
    high, active = (None, None) if found is None else (found.max_event_ms, found.active_at)
    new = batch.event_high.get(f"{r.topic}:{r.partition}")
    if new is not None:
        high = new if high is None else max(high, new)
    if r.size > 0 and batch.by_event_time:
        active = utc_now_iso()
    return high, active


def _chunks(ranges: tuple[OffsetRange, ...]):
    for start in range(0, len(ranges), RANGES_PER_CHUNK):
        yield ranges[start:start + RANGES_PER_CHUNK]


def _chunk_count(range_count: int) -> int:
    return -(-range_count // RANGES_PER_CHUNK)


def _check_expected(batch: Batch, current: dict[tuple[str, int], CommittedOffset]) -> None:
    """Name every partition whose committed offset is not what the plan started from."""
    mismatches = []
    for r in batch.ranges:
        found = current.get((r.topic, r.partition))
        found_value = None if found is None else found.value
        if found_value != r.expected:
            mismatches.append(f"{r.topic}[{r.partition}]: plan expects {r.expected}, ZooKeeper has {found_value}")
    if mismatches:
        raise StateConflict(
            f"batch {batch.batch_id} cannot commit: committed offsets moved since it was planned "
            f"({'; '.join(mismatches[:10])}). Another writer or a manual reset changed them; run "
            f"`etl status` and reconcile before running again.")


def _failed(result) -> bool:
    """A transaction result that is an error of its own, not a roll-back caused by another."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


def _raise_if_failed(results: list, what: str) -> None:
    failures = [(i, r) for i, r in enumerate(results) if _failed(r)]
    if failures:
        index, error = failures[0]
        raise StateConflict(f"cannot {what}: ZooKeeper refused operation {index} of the transaction "
                            f"({type(error).__name__}); nothing was changed")
