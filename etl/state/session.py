"""The job's ZooKeeper session, and the lock and fence every write of every state part passes.

ZkSession is the lock part of etl.state.protocols. Every write that changes the job's state runs in
a transaction fenced by the lock: it checks that this run's ephemeral lock node still exists and
that nobody has taken the lock since (the `owner` node's version). A run whose session expired
therefore cannot commit, even after kazoo reconnects it with a new session. The other parts
(etl.state.store) hold this session and add their operations to transactions that start with
its fence (SessionBound). Who else may read or change these znodes is decided by etl.state.acl
([zookeeper] auth).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Mapping

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (ConnectionLoss, NoAuthError, NodeExistsError, NoNodeError, OperationTimeoutError,
                              RolledBackError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

from etl.config import RetryConfig, ZooKeeperConfig
from etl.errors import LockLost, Retryable, StateConflict
from etl.retry import retry_idempotent
from etl.state import acl as zk_acl
from etl.state.paths import ZkPaths
from etl.state.znodes import LockHolder, dump, this_run

log = logging.getLogger(__name__)

# Failures of a read that say nothing about the data; reads are retried on these.
RETRYABLE_ZK_ERRORS = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)
LOCK_POLL_SECONDS = 0.5  # how often wait_lock_released looks again
# ZooKeeper expires a session on a tick after its timeout: past this, a dead holder's lock is gone.
DEAD_SESSION_GRACE_SECONDS = 5.0
# Told each partition's new committed offset after a transaction moved some (a commit, a reset).
OffsetsMoved = Callable[[Mapping[tuple[str, int], int]], object]


class ZooKeeperUnavailable(Retryable):
    """ZooKeeper could not be reached."""


class ZkSession:
    """One run's connection to ZooKeeper, and the job lock it holds."""

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
        self._checksummed_since: int | None = None  # the mark's zxid, once seen (it is never removed)
        self._session_lost = threading.Event()
        # Run each time this session takes the lock, before anything else is read under it: the
        # store moves a job's offsets from the layout before snapshots there (etl.state.migration).
        self.lock_taken: Callable[[], None] = lambda: None

    # -- connection -----------------------------------------------------------------------
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
        self.lock_taken()
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

    def create_fenced(self, nodes: list[tuple[str, bytes]], what: str) -> None:
        """Create znodes, each in its own fenced transaction, all sent before the first answer
        is awaited: each request stays small, and ZooKeeper pipelines them."""
        pending = []
        for path, data in nodes:
            txn = self.client.transaction()
            self._fence(txn)
            txn.create(path, data)
            pending.append(txn.commit_async())
        for sent in pending:
            self._commit_fenced(_Sent(sent), what)

    def delete_fenced(self, path: str, what: str) -> None:
        """Delete a znode and its children (one level) in one fenced transaction."""
        try:
            children = self._read(lambda: self.client.get_children(path), f"list {path}")
        except NoNodeError:
            return
        txn = self.client.transaction()
        self._fence(txn)
        for child in children:
            txn.delete(self.paths.child(path, child))
        txn.delete(path)
        self._commit_fenced(txn, what)

    # -- the mark that the job's state is checksummed (etl.state.chunks) -------------------
    def mark_checksummed(self, txn) -> None:
        """Add the job root's mark to a fenced transaction that writes a parent recording its
        chunks' checksums, unless the job has it: the mark goes with that write or not at all."""
        if self.checksummed_since() is None:
            txn.create(self.paths.checksummed, dump({"why": "every parent of chunks written from here on records "
                                                            "their checksums (etl.state.chunks)"}))

    def checksummed_since(self) -> int | None:
        """The zxid of the transaction that marked the job; None for a job no version with
        checksums has written to yet."""
        if self._checksummed_since is None:
            stat = self._read(lambda: self.client.exists(self.paths.checksummed), "look for the checksums mark")
            self._checksummed_since = None if stat is None else stat.czxid
        return self._checksummed_since

    def must_record_checksums(self, parent_stat) -> bool:
        """Whether a parent of chunks must record their checksums: it was written (created or
        last set) at or after the mark. One written before it may be an older version's."""
        since = self.checksummed_since()
        return since is not None and parent_stat.mzxid >= since


class SessionBound:
    """A part of the job's state: its reads and fenced writes go through the run's session."""

    def __init__(self, session: ZkSession):
        self.session = session

    @property
    def client(self) -> KazooClient:
        return self.session.client

    @property
    def paths(self) -> ZkPaths:
        return self.session.paths

    def _read(self, fn, what: str):
        return self.session._read(fn, what)

    def _fence(self, txn) -> None:
        self.session._fence(txn)

    def _commit_fenced(self, txn, what: str) -> list:
        return self.session._commit_fenced(txn, what)

    def _mark_checksummed(self, txn) -> None:
        self.session.mark_checksummed(txn)

    def _must_record_checksums(self, parent_stat) -> bool:
        return self.session.must_record_checksums(parent_stat)

    def create_fenced(self, nodes: list[tuple[str, bytes]], what: str) -> None:
        self.session.create_fenced(nodes, what)

    def delete_fenced(self, path: str, what: str) -> None:
        self.session.delete_fenced(path, what)

    def assert_lock_held(self) -> None:
        self.session.assert_lock_held()


class _Sent:
    """A transaction already sent, as _commit_fenced expects it (commit() waits for its answer)."""

    def __init__(self, sent):
        self._sent = sent

    def commit(self) -> list:
        return self._sent.get()


def _failed(result) -> bool:
    """A transaction result that is an error of its own, not a roll-back caused by another."""
    return isinstance(result, Exception) and not isinstance(result, RolledBackError)


def _raise_if_failed(results: list, what: str) -> None:
    failures = [(i, r) for i, r in enumerate(results) if _failed(r)]
    if failures:
        index, error = failures[0]
        raise StateConflict(f"cannot {what}: ZooKeeper refused operation {index} of the transaction "
                            f"({type(error).__name__}); nothing was changed")
