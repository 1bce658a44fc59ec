"""The job's state in memory: every part of etl.state.protocols, for unit tests of the logic
that uses a store (batch, plan, reset, compaction), without a ZooKeeper.

`MemoryState` is the ensemble: what ZooKeeper holds, shared by every `MemoryStore` opened on it.
A `MemoryStore` is one run's session. It models what the callers rely on:
- one lock holder at a time; `expire()` ends the session as a ZooKeeper session expiry does
  (its lock goes), and a run whose session expired, or whose lock another run took since,
  is fenced out: every write raises LockLost and changes nothing;
- versions: every batch header, compaction plan, the pointer, the totals and relocations have
  ZooKeeper's version numbers (0 at creation, +1 a write), and a write over a version that is
  no longer the current one raises StateConflict;
- a write that spans parts (the commit, a reset, a rebind, a switch) checks everything first,
  then applies it all, as one ZooKeeper multi does;
- batches, events and plans are stored as their JSON and parsed again on read, as ZooKeeper's are.
It does not model: the 1 MB request limit and the chunks that keep under it, znode damage and
checksums, ACLs, the layout before snapshots and its migration, connection loss and retries.
Tests of those stay on ZooKeeper (tests/integration/test_zk_*.py).

tests/harness/store_contract.py holds the behaviour both stores must show; it runs on this store
(tests/unit/test_store_contract_memory.py) and on ZooKeeper
(tests/integration/test_store_contract_zookeeper.py), so that this fake cannot drift.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Collection

from etl.errors import LockLost, StateConflict
from etl.model.batch import Batch, BatchKind, BatchState
from etl.model.route_binding import JobBinding, binding_from_json
from etl.model.compaction import CompactionPlan, CompactionState, Relocations, compaction_of_folder
from etl.model.events import Bind, Event, PendingReset, Reset, Skipped
from etl.model.events import from_json as parse_event, to_json as event_json
from etl.model.naming import final_name
from etl.state.offsets_after import commit_conflict, offsets_after
from etl.state.protocols import StateStore
from etl.state.records import offsets_after_reset, origins_at_offsets
from etl.state.snapshots import CommittedState
from etl.state.batches import BATCHES_KEPT
from etl.state.session import OffsetsMoved
from etl.state.totals import LoadTotals
from etl.state.znodes import CommittedOffset, LockHolder, this_run

Offsets = dict[tuple[str, int], CommittedOffset]


@dataclass
class Snapshot:
    offsets: Offsets
    topic_ids: dict[str, str]
    base: int | None


@dataclass
class MemoryState:
    """What ZooKeeper holds for one job; shared by the sessions (MemoryStore) opened on it."""

    lock: tuple["MemoryStore", LockHolder] | None = None
    owner_version: int = 0
    batches: dict[int, tuple[str, int]] = field(default_factory=dict)  # id -> (JSON, version)
    plans: dict[int, int | None] = field(default_factory=dict)  # id -> the pointer version it started from
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    snapshot_seq: int = 0
    pointer: tuple[str, int] | None = None  # (snapshot name, version)
    pending: str | None = None
    binding: str | None = None
    events: list[str] = field(default_factory=list)
    compactions: dict[int, tuple[str, int]] = field(default_factory=dict)
    last_compaction_id: int = 0
    relocations: tuple[Relocations, int] | None = None  # main and rejected; `tables` always empty here
    merged: dict[int, frozenset[str]] = field(default_factory=dict)  # a switched compaction's checksummed files
    table_relocations: dict[str, tuple[dict[str, str], int]] = field(default_factory=dict)  # a routed table's
    totals: tuple[LoadTotals, int] | None = None


class MemoryStore:
    """One run's session on a MemoryState; implements etl.state.protocols.StateStore by being
    each of its parts itself (`store.batches is store`): one object holds every part's data."""

    def __init__(self, state: MemoryState | None = None, offsets_moved: OffsetsMoved | None = None):
        self.state = state if state is not None else MemoryState()
        self.offsets_moved: OffsetsMoved = offsets_moved or (lambda offsets: None)
        self.me: LockHolder = this_run()
        self._owner_version: int | None = None
        self._lost = False

    def another_run(self) -> "MemoryStore":
        """Another run's session on the same state."""
        return MemoryStore(self.state, self.offsets_moved)

    # -- the parts: all this one object -----------------------------------------------------
    @property
    def session(self) -> "MemoryStore":
        return self

    batches = offsets = operator = totals = compactions = session

    # -- connection -----------------------------------------------------------------------
    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connect(self, create_nodes: bool = True) -> None:
        pass

    def close(self) -> None:
        self.expire()  # a closed session's ephemeral lock goes with it

    def expire(self) -> None:
        """End this session as ZooKeeper expires one: its lock is gone, its writes are fenced out."""
        self._lost = True
        if self.state.lock is not None and self.state.lock[0] is self:
            self.state.lock = None

    # -- lock -----------------------------------------------------------------------------
    def acquire_lock(self) -> LockHolder | None:
        if self.state.lock is not None:
            return self.state.lock[1]
        self.state.owner_version += 1
        self.state.lock, self._owner_version = (self, self.me), self.state.owner_version
        if self.state.pointer is None:  # as the migration of a new job's ZooKeeper store does
            self._move_pointer(self._write_snapshot({}, {}, None), None)
        return None

    def take_lock(self) -> LockHolder | None:
        return self.acquire_lock()  # nothing here outlives its session: no dead holder to wait for

    def lock_holder(self) -> LockHolder | None:
        return None if self.state.lock is None else self.state.lock[1]

    def wait_lock_released(self, timeout: float) -> None:
        pass

    def release_lock(self) -> None:
        if self._owner_version is None:
            return
        self.assert_lock_held()
        if self._holds_lock():
            self.state.lock = None
        self._owner_version = None

    def assert_lock_held(self) -> None:
        if self._owner_version is None or self._lost:
            raise LockLost("this run lost the job lock (its session expired); it stops without committing")

    def _holds_lock(self) -> bool:
        return self.state.lock is not None and self.state.lock[0] is self \
            and self.state.owner_version == self._owner_version

    def _fence(self, what: str) -> None:
        """What every write checks first: this run still holds the lock nobody took since."""
        self.assert_lock_held()
        if not self._holds_lock():
            raise LockLost(f"cannot {what}: this run no longer holds the job lock; nothing was changed")

    @staticmethod
    def _check_version(found: int | None, expected: int | None, what: str) -> None:
        if found != expected:
            raise StateConflict(f"cannot {what}: version {expected} is not the current one ({found}); "
                                f"nothing was changed")

    # -- batches --------------------------------------------------------------------------
    def write_plan(self, batch: Batch) -> int:
        self._fence(f"store the plan of batch {batch.batch_id}")
        if batch.batch_id in self.state.batches:
            raise StateConflict(f"cannot store the plan of batch {batch.batch_id}: it exists")
        self.state.plans[batch.batch_id] = self._pointer_version()
        self.state.batches[batch.batch_id] = (_batch_json(batch), 0)
        for skipped in batch.skipped:
            self.state.events.append(json.dumps(event_json(Skipped.of(batch.batch_id, batch.planned_at, skipped))))
        if batch.kind is BatchKind.REPAIR:  # its files take the names of merged files gone from the table
            gone = {final_name(r.topic, r.partition, r.start, r.end) for r in batch.ranges}
            self.state.merged = {key: names - gone for key, names in self.state.merged.items()}
        return 0

    def batch_ids(self) -> list[int]:
        return sorted(self.state.batches)

    def read_batch(self, batch_id: int) -> tuple[Batch, int]:
        data, version = self.state.batches[batch_id]
        raw = json.loads(data)
        return Batch.from_json(raw["header"], raw["ranges"], raw["partitions"]), version

    def last_batch(self) -> tuple[Batch, int] | None:
        ids = self.batch_ids()
        return self.read_batch(ids[-1]) if ids else None

    def open_batch(self) -> tuple[Batch, int] | None:
        last = self.last_batch()
        return last if last and last[0].state is not BatchState.COMMITTED else None

    def advance(self, batch: Batch, version: int, to: BatchState, **changes) -> tuple[Batch, int]:
        moved = batch.advanced(to, **changes)
        if to is BatchState.REGISTERED:
            moved = replace(moved, snapshot=self._prepare_commit(moved))
        return moved, self._set_batch(moved, version, f"move batch {batch.batch_id} to {to.value}")

    def amend(self, batch: Batch, version: int, **changes) -> tuple[Batch, int]:
        amended = batch.amended(**changes)
        return amended, self._set_batch(amended, version, f"update batch {batch.batch_id}")

    def _set_batch(self, batch: Batch, version: int, what: str) -> int:
        self._fence(what)
        self._check_batch_version(batch.batch_id, version, what)
        self.state.batches[batch.batch_id] = (_batch_json(batch), version + 1)
        return version + 1

    def _check_batch_version(self, batch_id: int, version: int, what: str) -> None:
        found = self.state.batches.get(batch_id)
        self._check_version(None if found is None else found[1], version, what)

    def _prepare_commit(self, batch: Batch) -> str:
        self.assert_lock_held()
        state = self._committed_state()
        if batch.kind is BatchKind.REPAIR or commit_conflict(batch, state, self.state.plans.get(batch.batch_id)):
            return ""
        return self._write_snapshot(*offsets_after(batch, state), state.version)

    def commit(self, batch: Batch, version: int, written_bytes: int | None = None) -> Batch:
        committed = batch.advanced(BatchState.COMMITTED)
        self.assert_lock_held()
        state = self._committed_state()
        conflict = commit_conflict(batch, state, self.state.plans.get(batch.batch_id))
        if conflict:
            raise StateConflict(conflict)
        what = f"commit batch {batch.batch_id}"
        self._fence(what)
        self._check_version(self._pointer_version(), state.version, what)
        self._check_batch_version(batch.batch_id, version, what)
        totals, totals_version = self.load_totals()
        if batch.kind is not BatchKind.REPAIR:  # everything is checked: now it all applies
            found = self.state.snapshots.get(batch.snapshot) if batch.snapshot else None
            name = batch.snapshot if found is not None and found.base == state.version \
                else self._write_snapshot(*offsets_after(batch, state), state.version)
            self._move_pointer(name, state.version)
        self.state.batches[batch.batch_id] = (_batch_json(committed), version + 1)
        self.state.totals = (totals.after(batch, written_bytes), 0 if totals_version is None else totals_version + 1)
        if batch.kind is not BatchKind.REPAIR:
            self.offsets_moved({(r.topic, r.partition): r.end for r in batch.ranges})
        return committed

    def prune_batches(self) -> None:
        ids = self.batch_ids()
        for batch_id in ids[:-BATCHES_KEPT]:
            del self.state.batches[batch_id]
        kept = set(ids[-BATCHES_KEPT:])
        for plan in sorted(self.state.plans):
            if plan not in kept and kept and plan < max(kept):
                self._fence(f"delete the plan of old batch {plan}")
                del self.state.plans[plan]
        opened = self.open_batch()
        keep = {opened[0].snapshot} if opened and opened[0].snapshot else set()
        current = None if self.state.pointer is None else self.state.pointer[0]
        for name in sorted(set(self.state.snapshots) - keep - {current}):
            self._fence(f"delete snapshot {name}")
            del self.state.snapshots[name]

    # -- offsets --------------------------------------------------------------------------
    def committed_offsets(self) -> Offsets:
        return dict(self._committed_state().offsets)

    def topic_ids(self) -> dict[str, str]:
        return dict(self._committed_state().topic_ids)

    def _committed_state(self) -> CommittedState:
        if self.state.pointer is None:
            return CommittedState()
        name, version = self.state.pointer
        snapshot = self.state.snapshots[name]
        offsets = {key: replace(found, version=version) for key, found in snapshot.offsets.items()}
        return CommittedState(offsets, dict(snapshot.topic_ids), version, name)

    def _pointer_version(self) -> int | None:
        return None if self.state.pointer is None else self.state.pointer[1]

    def _write_snapshot(self, offsets: Offsets, topic_ids: dict[str, str], base: int | None) -> str:
        self._fence("store a snapshot")
        name = f"s-{self.state.snapshot_seq:010d}"
        self.state.snapshot_seq += 1
        self.state.snapshots[name] = Snapshot(dict(offsets), dict(topic_ids), base)
        return name

    def _move_pointer(self, name: str, version: int | None) -> None:
        """The pointer's move; its version was checked by the caller, with the rest of its write."""
        self.state.pointer = (name, 0 if version is None else version + 1)

    # -- operator records -----------------------------------------------------------------
    def pending_reset(self) -> PendingReset | None:
        return None if self.state.pending is None else PendingReset.from_json(json.loads(self.state.pending))

    def write_pending_reset(self, pending: PendingReset) -> None:
        self._fence("record the reset's plan")
        if self.state.pending is not None:
            raise StateConflict("cannot record the reset's plan: one is recorded already")
        self.state.pending = json.dumps(pending.to_json())

    def finish_reset(self, event: Reset, topic_ids: dict[str, str | None]) -> None:
        state = self._committed_state()
        offsets, ids = offsets_after_reset(state, event, topic_ids)
        name = self._write_snapshot(offsets, ids, state.version)
        self._fence("reset offsets")
        self._check_version(self._pointer_version(), state.version, "reset offsets")
        self._move_pointer(name, state.version)
        self.state.events.append(json.dumps(event_json(event)))
        self.state.pending = None
        self.offsets_moved({(change.topic, change.partition): change.new for change in event.changes})

    def binding(self) -> JobBinding | None:
        return None if self.state.binding is None else binding_from_json(json.loads(self.state.binding))

    def bind_first(self, target: JobBinding) -> None:
        self._fence("record the job's table")
        if self.state.binding is not None:
            raise StateConflict("cannot record the job's table: it is recorded already")
        self.state.binding = json.dumps(target.to_json())

    def rebind(self, target: JobBinding, reset_origins: bool, event: Bind, relocations_of: str | None = None) -> None:
        state = self._committed_state()
        name = self._write_snapshot(origins_at_offsets(state), state.topic_ids, state.version) \
            if reset_origins else None
        self._fence("bind the job to another table")
        if name is not None:
            self._check_version(self._pointer_version(), state.version, "bind the job to another table")
            self._move_pointer(name, state.version)
        self.state.binding = json.dumps(target.to_json())
        self.state.events.append(json.dumps(event_json(event)))
        if relocations_of is not None:
            self._adopt(relocations_of)

    def _adopt(self, table: str) -> None:
        """A one-table job's relocations re-filed under `table` (ZooKeeper: CompactionRecords.adopt)."""
        if self.state.relocations is None or not self.state.relocations[0].main:
            return
        current, at = self.state.relocations
        folders, version = self.state.table_relocations.get(table, ({}, -1))
        self.state.table_relocations[table] = ({**folders, **current.main}, version + 1)
        self.state.relocations = (Relocations(rejected=current.rejected), at + 1)

    def record_event(self, event: Event) -> None:
        self._fence(f"record a {event.kind} event")
        self.state.events.append(json.dumps(event_json(event)))

    def events(self) -> list[Event]:
        return [parse_event(json.loads(data)) for data in self.state.events]

    def load_totals(self) -> tuple[LoadTotals, int | None]:
        return (LoadTotals(), None) if self.state.totals is None else self.state.totals

    # -- compactions ----------------------------------------------------------------------
    def relocations(self) -> Relocations:
        own = Relocations() if self.state.relocations is None else self.state.relocations[0]
        tables = {name: dict(folders) for name, (folders, _) in sorted(self.state.table_relocations.items())}
        return replace(own, tables=tables) if tables else own

    def open_compactions(self) -> list[tuple[CompactionPlan, int]]:
        return [(CompactionPlan.from_json(json.loads(data)), version)
                for _, (data, version) in sorted(self.state.compactions.items())]

    def next_compaction_id(self) -> int:
        return self.state.last_compaction_id + 1

    def write_compaction(self, plan: CompactionPlan) -> int:
        self._fence(f"store the plan of compaction {plan.compaction_id}")
        if self.state.last_compaction_id != plan.compaction_id - 1:
            raise StateConflict(f"compaction id {plan.compaction_id} was taken meanwhile")
        self.state.last_compaction_id = plan.compaction_id
        self.state.compactions[plan.compaction_id] = (json.dumps(plan.to_json()), 0)
        return 0

    def advance_compaction(self, plan: CompactionPlan, version: int, to: CompactionState,
                           **changes) -> tuple[CompactionPlan, int]:
        moved = plan.advanced(to, **changes)
        what = f"move compaction {plan.compaction_id} to {to.value}"
        self._fence(what)
        self._check_compaction_version(plan, version, what)
        for fold in moved.partials if to is CompactionState.SWITCHED else ():
            folders, at = self.state.table_relocations.get(fold.table, ({}, -1))
            self.state.table_relocations[fold.table] = ({**folders, moved.partition: moved.target}, at + 1)
        if to is CompactionState.SWITCHED and moved.table_name is not None:
            folders, at = self.state.table_relocations.get(moved.table_name, ({}, -1))
            self.state.table_relocations[moved.table_name] = ({**folders, moved.partition: moved.target}, at + 1)
        elif to is CompactionState.SWITCHED:
            current, at = (Relocations(), -1) if self.state.relocations is None else self.state.relocations
            self.state.relocations = (current.moved(moved.table, moved.partition, moved.target), at + 1)
        if to is CompactionState.SWITCHED:
            self.state.merged.pop(compaction_of_folder(moved.source) or 0, None)  # the folder it replaces
            if moved.checksums:
                self.state.merged[moved.compaction_id] = frozenset(o.name for o in moved.outputs)
        self.state.compactions[plan.compaction_id] = (json.dumps(moved.to_json()), version + 1)
        return moved, version + 1

    def drop_compaction(self, plan: CompactionPlan, version: int) -> None:
        what = f"finish compaction {plan.compaction_id}"
        self._fence(what)
        self._check_compaction_version(plan, version, what)
        del self.state.compactions[plan.compaction_id]

    def checksummed_outputs(self, ids: Collection[int] | None = None) -> dict[int, frozenset[str]]:
        return {key: names for key, names in sorted(self.state.merged.items()) if ids is None or key in ids}

    def _check_compaction_version(self, plan: CompactionPlan, version: int, what: str) -> None:
        found = self.state.compactions.get(plan.compaction_id)
        self._check_version(None if found is None else found[1], version, what)


def _batch_json(batch: Batch) -> str:
    return json.dumps({"header": batch.header_json(), "ranges": [r.to_json() for r in batch.ranges],
                       "partitions": batch.event_time.partitions_json() if batch.event_time.partitions_known else None})


def as_parts(store: MemoryStore) -> StateStore:
    """MemoryStore is every part of etl.state.protocols: mypy checks it here."""
    return store
