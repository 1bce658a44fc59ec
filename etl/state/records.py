"""What operators and skips did, kept in ZooKeeper beside the offsets: resets (and the plan of
one under way), the job's binding to its table, and the event log (etl.model.events).

A part of ZkStateStore (etl.state.store), kept apart because it is the operators' side of the
state: every write here is fenced by the lock like the store's own, through the store's
`_fence` and `_commit_fenced`.
"""
from __future__ import annotations

import json

from kazoo.exceptions import NoNodeError

from etl.errors import StateConflict
from etl.model.binding import Target
from etl.model.events import Bind, Event, PendingReset, Reset
from etl.model.events import from_json as parse_event, to_json as event_json
from etl.state.znodes import CommittedOffset, dump


class OperatorRecords:
    """Mixed into ZkStateStore, whose client, paths, reads and fenced transactions it uses."""

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
        """Set committed offsets by hand, recording the event and the topics' ids as they are now,
        in one fenced transaction. Each change's `old` is checked against ZooKeeper, and by version."""
        current = self.committed_offsets()
        for change in event.changes:
            found = current.get((change.topic, change.partition))
            if (None if found is None else found.value) != change.old:
                raise StateConflict(f"cannot reset {change.topic}[{change.partition}]: its committed offset "
                                    f"is {None if found is None else found.value}, not {change.old} as planned")
        for topic in {c.topic for c in event.changes}:
            self._read(lambda t=topic: self.client.ensure_path(self.paths.topic(t)), "create topic node")
        txn = self.client.transaction()
        self._fence(txn)
        for change in event.changes:
            path = self.paths.offset(change.topic, change.partition)
            found = current.get((change.topic, change.partition))
            if found is None:  # the job starts reading this partition at the new offset
                txn.create(path, CommittedOffset(change.new, 0, origin=change.new).to_bytes())
            else:  # the last record loaded is no witness once the position moved by hand
                txn.set_data(path, CommittedOffset(change.new, 0, found.origin).to_bytes(), version=found.version)
        for topic, topic_id in sorted(topic_ids.items()):
            txn.set_data(self.paths.topic(topic), dump({"topic_id": topic_id}) if topic_id else b"")
        self._append_event(txn, event)
        if self.pending_reset() is not None:
            txn.delete(self.paths.pending_reset)
        self._commit_fenced(txn, "reset offsets")

    # -- binding --------------------------------------------------------------------------
    def binding(self) -> Target | None:
        try:
            data, _ = self._read(lambda: self.client.get(self.paths.binding), "read the job's binding")
        except NoNodeError:
            return None
        return Target.from_json(json.loads(data))

    def bind_first(self, target: Target) -> None:
        """Record the table of a job's first run (fenced: only the lock holder binds)."""
        txn = self.client.transaction()
        self._fence(txn)
        txn.create(self.paths.binding, dump(target.to_json()))
        self._commit_fenced(txn, "record the job's table")

    def rebind(self, target: Target, reset_origins: bool, event: Bind) -> None:
        """Bind the job to another table, in one fenced transaction with its event. With
        reset_origins, every partition's origin moves to its committed offset: the new table
        holds what is loaded from now on."""
        txn = self.client.transaction()
        self._fence(txn)
        if self.binding() is None:
            txn.create(self.paths.binding, dump(target.to_json()))
        else:
            txn.set_data(self.paths.binding, dump(target.to_json()))
        for (topic, partition), found in (self.committed_offsets() if reset_origins else {}).items():
            moved = CommittedOffset(found.value, 0, found.value, found.last)
            txn.set_data(self.paths.offset(topic, partition), moved.to_bytes(), version=found.version)
        self._append_event(txn, event)
        self._commit_fenced(txn, "bind the job to another table")

    def record_event(self, event: Event) -> None:
        """Append an operator's action to the job's events, fenced by the lock."""
        txn = self.client.transaction()
        self._fence(txn)
        self._append_event(txn, event)
        self._commit_fenced(txn, f"record a {event.kind} event")

    def _append_event(self, txn, event: Event) -> None:
        txn.create(f"{self.paths.events}/event-", dump(event_json(event)), sequence=True)


    def events(self) -> list[Event]:
        names = sorted(self._read(lambda: self.client.get_children(self.paths.events), "list events"))
        return [parse_event(json.loads(self._read(lambda n=n: self.client.get(f"{self.paths.events}/{n}"),
                                                       "read event")[0])) for n in names]
