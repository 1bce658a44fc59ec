"""The job's state in ZooKeeper, read without taking the lock, and its lock."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class JobState:
    last_batch_id: int | None
    last_state: str | None  # PLANNED | WRITTEN | REGISTERED | COMMITTED, None before the first batch
    last_batch: object | None  # etl.model.batch.Batch
    committed: dict  # (topic, partition) -> offset
    lock_held: bool
    binding: object | None = None  # etl.model.route_binding.JobBinding, None before the first run

    @property
    def open_state(self) -> str | None:
        return None if self.last_state in (None, "COMMITTED") else self.last_state

    def label(self) -> str:
        return "no batch yet" if self.last_state is None else self.last_state


def job_state(config: Path | str) -> JobState:
    """The job's state in ZooKeeper, read through etl.state.store with the config's values, on a
    session of its own that never takes the lock and never creates a node."""
    from kazoo.exceptions import NoNodeError

    from etl.config import load_config
    from etl.state.store import ZkStateStore
    cfg = load_config(config)
    store = ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry)
    store.session.client.start(timeout=30)
    try:
        try:
            last = store.batches.last_batch()
        except NoNodeError:
            last = None
        try:
            committed = {k: v.value for k, v in store.offsets.committed_offsets().items()}
        except NoNodeError:
            committed = {}
        lock_held = store.session.client.exists(store.session.paths.lock) is not None
        binding = store.operator.binding()
    finally:
        store.session.client.stop()
        store.session.client.close()
    batch = last[0] if last else None
    return JobState(batch.batch_id if batch else None, batch.state.value if batch else None, batch, committed,
                    lock_held, binding)


def lock_znode(config: Path | str) -> str:
    from etl.config import load_config
    from etl.state.store import ZkPaths
    loaded = load_config(config)
    return ZkPaths(loaded.zookeeper.root, loaded.job.name).lock


def wait_for_lock_release(zk, config: Path | str, timeout: float = 60) -> float:
    """Wait until a killed run's ephemeral lock is gone (its session expired); return seconds."""
    lock = lock_znode(config)
    started = time.monotonic()
    while zk.exists(lock):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"lock {lock} still held after {timeout}s")
        time.sleep(0.1)
    return time.monotonic() - started


def rewrite_committed(config: Path | str, change) -> None:
    """Change the committed offsets by hand, as a test that plays a broker or an operator does:
    `change(offsets, topic_ids)` edits copies of them, which become a new snapshot that the
    pointer moves to, holding the job lock (etl.state.snapshots)."""
    from etl.config import load_config
    from etl.state.store import ZkStateStore
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        if store.session.acquire_lock() is not None:
            raise RuntimeError("the job lock is held: cannot change its offsets")
        try:
            state = store.offsets.committed_state()
            offsets, topic_ids = dict(state.offsets), dict(state.topic_ids)
            change(offsets, topic_ids)
            name = store.offsets.write_snapshot(offsets, topic_ids, state.version, "changed by a test")
            txn = store.session.client.transaction()
            store.session._fence(txn)
            store.offsets.move_pointer(txn, name, state.version)
            store.session._commit_fenced(txn, "change the committed offsets by hand")
        finally:
            store.session.release_lock()


def expire_session(store, hosts: str) -> None:
    """Expire the store's ZooKeeper session from the server side, as a long GC pause or a network
    partition would, and wait (at most 10 s) until the store has heard of it."""
    from kazoo.client import KazooClient

    session_id, password = store.session.client.client_id
    other = KazooClient(hosts=hosts, client_id=(session_id, password))
    other.start()
    other.stop()
    other.close()
    deadline = time.time() + 10
    while not store.session._session_lost.is_set() and time.time() < deadline:
        time.sleep(0.05)
