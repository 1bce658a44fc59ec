"""What happened to a job's offsets besides loading: the events recorded in ZooKeeper.

Each kind is a frozen dataclass that knows how to describe itself (`etl status`) and which
moves of a committed offset it explains (`etl verify`, `etl recover`). `to_json`/`from_json`
are the one codec: the JSON keys are those every version of the ETL has written, and a kind
this version does not know is kept as it was read (a newer version may have written it).
Adding a kind means adding a class here and to KINDS, nothing else.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Union

from etl.model.batch import SkippedRange
from etl.model.route_binding import binding_from_json

Jump = tuple[str, int, int, int]  # (topic, partition, from, to): a move of the committed offset


class EventKind(StrEnum):
    SKIPPED = "skipped"  # planned past offsets Kafka no longer held ([job] on_offset_out_of_range = earliest)
    RESET = "reset"  # etl reset-offsets
    ACCEPTED_LOSS = "accepted_loss"  # etl recover --accept-loss
    MOVED_ASIDE = "moved_aside"  # etl recover moved broken files out of the table
    BIND = "bind"  # etl bind: the job writes to another table from now on


@dataclass(frozen=True)
class Skipped:
    batch_id: int
    at: str
    topic: str
    partition: int
    committed: int
    restart_at: int
    low: int
    high: int
    recreated: str = ""
    incarnation: str = ""  # the new incarnation's tag, when the skip entered one (etl.model.identity)
    kind = EventKind.SKIPPED

    @classmethod
    def of(cls, batch_id: int, at: str, skipped: SkippedRange) -> Skipped:
        return cls(batch_id, at, **skipped.to_json())

    def describe(self) -> str:
        into = f" of the topic's new incarnation {self.incarnation}" if self.incarnation else ""
        return (f"batch {self.batch_id} at {self.at}: skipped {self.topic}[{self.partition}] from committed "
                f"{self.committed} to {self.restart_at}{into} (Kafka held [{self.low}, {self.high}])")

    def jumps(self) -> list[Jump]:
        return [(self.topic, self.partition, self.committed, self.restart_at)]


@dataclass(frozen=True)
class OffsetChange:
    topic: str
    partition: int
    old: int | None  # None: the partition had no committed offset
    new: int


@dataclass(frozen=True)
class Reset:
    at: str
    user: str
    changes: tuple[OffsetChange, ...]
    moved_aside: tuple[tuple[str, str], ...] = ()  # (from, to) of each file moved out of the table
    kind = EventKind.RESET

    @classmethod
    def from_fields(cls, at, user, changes, moved_aside=()) -> Reset:
        return cls(at, user, tuple(c if isinstance(c, OffsetChange) else OffsetChange(**c) for c in changes),
                   tuple(tuple(m) for m in moved_aside))

    def describe(self) -> str:
        moves = ", ".join(f"{c.topic}[{c.partition}] {c.old} -> {c.new}" for c in self.changes)
        aside = f"; {len(self.moved_aside)} files moved out of the table" if self.moved_aside else ""
        return f"offsets reset at {self.at} by {self.user}: {moves}{aside}"

    def jumps(self) -> list[Jump]:
        return [(c.topic, c.partition, c.old, c.new) for c in self.changes if c.old is not None]


@dataclass(frozen=True)
class AcceptedLoss:
    at: str
    user: str
    topic: str
    partition: int
    committed: int
    restart_at: int
    kind = EventKind.ACCEPTED_LOSS

    def describe(self) -> str:
        return (f"{self.topic}[{self.partition}] offsets [{self.committed}, {self.restart_at}) recorded as lost at "
                f"{self.at} by {self.user} (etl recover --accept-loss)")

    def jumps(self) -> list[Jump]:
        return [(self.topic, self.partition, self.committed, self.restart_at)]


@dataclass(frozen=True)
class MovedAside:
    at: str
    user: str
    by: str
    moves: tuple[tuple[str, str], ...]
    kind = EventKind.MOVED_ASIDE

    @classmethod
    def from_fields(cls, at, user, by, moves) -> MovedAside:
        return cls(at, user, by, tuple(tuple(m) for m in moves))

    def describe(self) -> str:
        return f"{len(self.moves)} files moved out of the table at {self.at} by {self.user} ({self.by})"

    def jumps(self) -> list[Jump]:
        return []


@dataclass(frozen=True)
class Bind:
    at: str
    user: str
    to: dict  # what the job writes to from now on (a Target, or a RouteBinding), as stored
    data_moved: bool
    previous: dict | None = None  # stored under "from"
    kind = EventKind.BIND

    def describe(self) -> str:
        moved = " (the operator moved the data)" if self.data_moved else ""
        return f"bound to {binding_from_json(self.to).describe()} at {self.at} by {self.user}{moved}"

    def jumps(self) -> list[Jump]:
        return []


@dataclass(frozen=True)
class UnknownEvent:
    """A kind this version does not know, or a node that lacks a field: kept, shown as stored,
    and explains nothing."""

    raw: dict

    @property
    def kind(self) -> str:
        return str(self.raw.get("kind"))

    def describe(self) -> str:
        return str(self.raw)

    def jumps(self) -> list[Jump]:
        return []


Event = Union[Skipped, Reset, AcceptedLoss, MovedAside, Bind, UnknownEvent]
KINDS = {cls.kind: cls for cls in (Skipped, Reset, AcceptedLoss, MovedAside, Bind)}
_STORED_AS = {"previous": "from"}  # field -> JSON key, where Python's names differ
_ADDED = {"incarnation"}  # fields added later, stored only when set: events as earlier versions stored them


def to_json(event: Event) -> dict:
    if isinstance(event, UnknownEvent):
        return dict(event.raw)
    data = {_STORED_AS.get(name, name): value for name, value in asdict(event).items()
            if not (name in _ADDED and not value)}
    return {"kind": event.kind.value, **_lists(data)}


def from_json(data: dict) -> Event:
    cls = KINDS.get(data.get("kind"))
    if cls is None:
        return UnknownEvent(dict(data))
    stored = {name: data[_STORED_AS.get(name, name)] for name in (f.name for f in fields(cls))
              if _STORED_AS.get(name, name) in data}
    build = getattr(cls, "from_fields", cls)
    try:
        return build(**stored)
    except (TypeError, ValueError):
        # A damaged node: kept and shown as stored, and it explains no gap, so verify reports
        # the offsets it was about rather than trusting it.
        return UnknownEvent(dict(data))


@dataclass(frozen=True)
class PendingReset:
    """A reset written down before its files move: whoever takes the lock next finishes it."""

    event: Reset
    topic_ids: dict  # topic -> its id as the reset found it (None: the broker reports none)

    def to_json(self) -> dict:
        stored = to_json(self.event)
        return {"changes": stored["changes"], "event": stored, "topic_ids": dict(self.topic_ids)}

    @classmethod
    def from_json(cls, data: dict) -> PendingReset:
        return cls(from_json(data["event"]), dict(data["topic_ids"]))


def explained_jumps(events: list[Event]) -> set[Jump]:
    """Every move of a committed offset that an event explains."""
    return {jump for event in events for jump in event.jumps()}


def _lists(value):
    """JSON has no tuples: store lists, as earlier versions did."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value
