"""What operators and skips did, kept in ZooKeeper beside the offsets: resets (and the plan of
one under way), the job's binding to its table, and the event log (etl.model.events).

A part of ZkStateStore (etl.state.store), kept apart because it is the operators' side of the
state: every write here is fenced by the lock like every other part's, through the session's
`_fence` and `_commit_fenced` (etl.state.session).
"""
from __future__ import annotations

import json

from kazoo.exceptions import NoNodeError

from etl.errors import StateConflict
from etl.model.route_binding import JobBinding, binding_from_json
from etl.model.events import Bind, Event, PendingReset, Reset
from etl.model.events import from_json as parse_event, to_json as event_json
from etl.state.compaction_records import CompactionRecords
from etl.state.session import SessionBound, ZkSession
from etl.state.snapshots import CommittedState, SnapshotRecords
from etl.state.znodes import CommittedOffset, dump


class OperatorRecords(SessionBound):
    """The operator part of the job's state (etl.state.protocols.OperatorPart). A reset or a
    rebind moves the offsets part's pointer in its own transaction."""

    def __init__(self, session: ZkSession, offsets: SnapshotRecords, compactions: CompactionRecords):
        super().__init__(session)
        self.offsets = offsets
        self.compactions = compactions  # a bind to routes re-files a one-table job's relocations

    # -- resets ---------------------------------------------------------------------------
    def pending_reset(self) -> PendingReset | None:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.pending_reset), "read a pending reset")
        except NoNodeError:
            return None
        return PendingReset.from_json(json.loads(data))

    def write_pending_reset(self, pending: PendingReset) -> None:
        """Record a reset before any file moves (fenced), so that a crash leaves it findable."""
        txn = self.client.transaction()
        self._fence(txn)
        txn.create(self.paths.pending_reset, dump(pending.to_json()))
        self._commit_fenced(txn, "record the reset's plan")

    def finish_reset(self, event: Reset, topic_ids: dict[str, str | None]) -> None:
        """Set committed offsets by hand, recording the event and the topics' ids as they are now:
        a new snapshot, then one fenced transaction that moves the pointer over the version it
        was built on, with the event. Each change's `old` is checked against the snapshot."""
        state = self.offsets.committed_state()
        offsets, ids = offsets_after_reset(state, event, topic_ids)
        name = self.offsets.write_snapshot(offsets, ids, state.version, "reset")
        txn = self.client.transaction()
        self._fence(txn)
        self.offsets.move_pointer(txn, name, state.version, reset=event.at)
        self.add_event(txn, event)
        if self.pending_reset() is not None:
            txn.delete(self.paths.pending_reset)
        self._commit_fenced(txn, "reset offsets")
        self.session.offsets_moved({(change.topic, change.partition): change.new for change in event.changes})

    # -- binding --------------------------------------------------------------------------
    def binding(self) -> JobBinding | None:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.binding), "read the job's binding")
        except NoNodeError:
            return None
        return binding_from_json(json.loads(data))

    def bind_first(self, target: JobBinding) -> None:
        """Record the table of a job's first run (fenced: only the lock holder binds)."""
        txn = self.client.transaction()
        self._fence(txn)
        txn.create(self.paths.binding, dump(target.to_json()))
        self._commit_fenced(txn, "record the job's table")

    def rebind(self, target: JobBinding, reset_origins: bool, event: Bind, relocations_of: str | None = None) -> None:
        """Bind the job to another table, in one fenced transaction with its event. With
        reset_origins, every partition's origin moves to its committed offset: the new table
        holds what is loaded from now on. With `relocations_of`, a one-table job's table's
        relocations are re-filed under that routed table's name in the same transaction
        (the compactions part's adopt)."""
        state = self.offsets.committed_state()
        if reset_origins:
            name = self.offsets.write_snapshot(origins_at_offsets(state), state.topic_ids, state.version, "rebind")
        txn = self.client.transaction()
        self._fence(txn)
        if self.binding() is None:
            txn.create(self.paths.binding, dump(target.to_json()))
        else:
            txn.set_data(self.paths.binding, dump(target.to_json()))
        if reset_origins:
            self.offsets.move_pointer(txn, name, state.version, rebind=event.at)
        self.add_event(txn, event)
        if relocations_of is not None:
            self.compactions.adopt(txn, relocations_of)
        self._commit_fenced(txn, "bind the job to another table")

    def record_event(self, event: Event) -> None:
        """Append an operator's action to the job's events, fenced by the lock."""
        txn = self.client.transaction()
        self._fence(txn)
        self.add_event(txn, event)
        self._commit_fenced(txn, f"record a {event.kind} event")

    def add_event(self, txn, event: Event) -> None:
        """Add the event's append to a fenced transaction (a plan's skips go with its header)."""
        txn.create(self.paths.event_prefix, dump(event_json(event)), sequence=True)

    def events(self) -> list[Event]:
        names = sorted(self._read(lambda: self.client.get_children(self.paths.events), "list events"))
        return [parse_event(json.loads(self._read(lambda n=n: self.client.get(self.paths.child(self.paths.events, n)),
                                                       "read event")[0])) for n in names]


def offsets_after_reset(state: CommittedState, event: Reset, topic_ids: dict[str, str | None]) \
        -> tuple[dict[tuple[str, int], CommittedOffset], dict[str, str]]:
    """The committed offsets and topic ids once `event` is applied over `state`; each change's
    `old` is checked against `state` (StateConflict if it is not there)."""
    offsets, ids = dict(state.offsets), dict(state.topic_ids)
    for change in event.changes:
        found = offsets.get((change.topic, change.partition))
        if (None if found is None else found.value) != change.old:
            raise StateConflict(f"cannot reset {change.topic}[{change.partition}]: its committed offset "
                                f"is {None if found is None else found.value}, not {change.old} as planned")
        # A new partition starts at the new offset, and so does one moved back before where the
        # job started reading it (the files must cover what it loads from there on); the last
        # record loaded is no witness once the position moved by hand.
        origin = change.new if found is None or found.origin is not None and change.new < found.origin \
            else found.origin
        # A reset moves within the partition's current incarnation (etl.model.identity).
        kept = ("", ()) if found is None else (found.incarnation, found.past)
        offsets[(change.topic, change.partition)] = CommittedOffset(change.new, 0, origin, None, None, None, *kept)
    for topic, topic_id in topic_ids.items():
        if topic_id:
            ids[topic] = topic_id
        else:
            ids.pop(topic, None)
    return offsets, ids


def origins_at_offsets(state: CommittedState) -> dict[tuple[str, int], CommittedOffset]:
    """A rebind's offsets: every partition's origin moved to its committed offset, in its current
    incarnation; the new table holds none of the incarnations it left."""
    return {key: CommittedOffset(found.value, 0, found.value, found.last, incarnation=found.incarnation)
            for key, found in state.offsets.items()}
