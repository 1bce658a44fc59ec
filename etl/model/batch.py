"""The batch: its plan (the write-ahead log) and its state machine.

PLANNED -> WRITTEN -> REGISTERED -> COMMITTED. A batch is planned once, stored in ZooKeeper
before any file is written, and then only ever moved forward with exactly its recorded
ranges, by the run that planned it or by the next run after a crash.

The plan also pins the snapshot of every dimension (reference data) the batch enriches
with, so that a resumed batch can tell whether its reference data changed meanwhile.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from enum import Enum

from etl.errors import StateConflict
from etl.model.identity import RecordFingerprint
from etl.config.model import HiveFormat
from etl.model.naming import FileRange


class BatchState(str, Enum):
    PLANNED = "PLANNED"
    WRITTEN = "WRITTEN"
    REGISTERED = "REGISTERED"
    COMMITTED = "COMMITTED"

    @property
    def next(self) -> "BatchState":
        order = list(BatchState)
        if self is BatchState.COMMITTED:
            raise StateConflict("a COMMITTED batch has no next state")
        return order[order.index(self) + 1]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets [start, end) of one partition. `expected` is what the committed offset must
    still be when the batch commits; None means the partition has no committed offset yet."""

    topic: str
    partition: int
    start: int
    end: int
    expected: int | None
    incarnation: str = ""  # the topic's incarnation the range reads (etl.model.identity): "" the first

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def file_range(self) -> FileRange:
        return FileRange(self.topic, self.partition, self.start, self.end, self.incarnation)

    def name_as(self, file_format: HiveFormat) -> str:
        """The name of the range's file in a table whose files are `file_format`."""
        return self.file_range.name_as(file_format)

    def to_json(self) -> list:
        # The first incarnation's ranges are stored as before tags existed.
        return [self.topic, self.partition, self.start, self.end, self.expected,
                *([self.incarnation] if self.incarnation else [])]

    @classmethod
    def from_json(cls, raw: list) -> "OffsetRange":
        topic, partition, start, end, expected, *tag = raw
        return cls(topic, int(partition), int(start), int(end), None if expected is None else int(expected),
                   str(tag[0]) if tag else "")


class BatchKind(str, Enum):
    LOAD = "LOAD"  # new offsets: the commit moves each range's offset from `expected` to `end`
    REPAIR = "REPAIR"  # committed offsets whose files were lost: rewritten, the offsets stay where they are


@dataclass(frozen=True)
class SkippedRange:
    """Offsets that will never be loaded because Kafka no longer held them (or a topic was
    recreated), recorded under on_offset_out_of_range = earliest."""

    topic: str
    partition: int
    committed: int
    restart_at: int
    low: int
    high: int
    recreated: str = ""  # why the topic is taken for another incarnation (etl.model.identity), if it is
    incarnation: str = ""  # the tag of the incarnation loaded from restart_at on, when it is a new one

    def describe(self) -> str:
        if self.recreated:
            return f"{self.recreated}; restarting at {self.restart_at}{self._tagged()}"
        if self.committed < self.low:
            return (f"{self.topic}[{self.partition}]: offsets [{self.committed}, {self.low}) were deleted "
                    f"from Kafka before they were loaded; restarting at {self.restart_at}")
        return (f"{self.topic}[{self.partition}]: committed offset {self.committed} is beyond the log end "
                f"{self.high} (topic recreated?); restarting at {self.restart_at}{self._tagged()}")

    def _tagged(self) -> str:
        return (f" as incarnation {self.incarnation} (its files are named +{self.incarnation})" if self.incarnation
                else "")

    def to_json(self) -> dict:
        raw = self.__dict__.copy()
        if not self.incarnation:  # as versions before incarnations stored it
            del raw["incarnation"]
        return raw


@dataclass(frozen=True)
class TouchedPartition:
    """A Hive partition a batch by event time wrote into, recorded at WRITTEN: its rows, the late
    ones among them (already due their _SUCCESS when planned), the files written there (one per
    range that placed rows; None in batches written before it was counted, read as 1), and a
    routed batch's table ("" for a one-table job's)."""

    partition: str  # its path, dt=2026-11-22/hour=13
    rows: int
    late: int = 0
    files: int | None = None
    table: str = ""

    def to_json(self) -> dict:
        """As stored: the key order and the omitted keys of the versions that wrote it."""
        return {"partition": self.partition, **({"table": self.table} if self.table else {}), "rows": self.rows,
                "late": self.late, **({"files": self.files} if self.files is not None else {})}

    @classmethod
    def from_json(cls, raw: dict) -> "TouchedPartition":
        return cls(str(raw["partition"]), int(raw["rows"]), int(raw.get("late", 0)),
                   None if raw.get("files") is None else int(raw["files"]), str(raw.get("table", "")))


@dataclass(frozen=True)
class EventTimeRecord:
    """What a batch records of event time, read by the event-time write mode and its tasks
    (etl.job.write_mode.EventTimeMode) and stored by the state room (etl.state.batch_nodes);
    every other reader asks it through the methods below.
    Empty for a batch by planning time, whose header stores none of it: the empty record is what
    such a header decodes into, so decoding stays total (an older header may hold any part).

    Stored as the versions before the record stored its fields: `placement`, `partition_count`
    and `event_high` in the batch's header, the partitions themselves in chunks beside it
    (etl.state.batch_nodes), each left out when empty."""

    # The Placement json every attempt places rows with (etl.model.partitioning); {} under planning time.
    placement: dict = field(default_factory=dict)
    # Set at WRITTEN by event time: each Hive partition touched; None until then.
    partitions: tuple[TouchedPartition, ...] | None = None
    # Set at WRITTEN by event time: "topic:partition" -> latest event time (ms) among its rows.
    event_high: dict[str, int] = field(default_factory=dict)

    @property
    def by_event_time(self) -> bool:
        """Whether the plan places rows by event time: its Placement names an event column."""
        return bool(self.placement.get("column"))

    @property
    def future_after_ms(self) -> int | None:
        """The plan's bound of [hive] max_future_seconds: a later event time is in the future; None without."""
        return self.placement.get("future_after_ms")

    def event_times_after(self, r: OffsetRange, high: int | None, active: str | None) -> tuple[int | None, str | None]:
        """A Kafka partition's latest event time (ms) and last activity once the batch's range `r`
        of it commits over `high` and `active` (what the event-time watermark is computed from): its
        rows' latest event time, and by event time, activity now if the range held records.
        A batch by planning time leaves both as they were."""
        new = self.event_high.get(f"{r.topic}:{r.partition}")
        if new is not None:
            high = new if high is None else max(high, new)
        return high, utc_now_iso() if r.size > 0 and self.by_event_time else active

    @property
    def partitions_known(self) -> bool:
        """Whether WRITTEN recorded the Hive partitions touched (by event time only)."""
        return self.partitions is not None

    @property
    def late_rows(self) -> int:
        """Rows written into partitions already due their _SUCCESS when the batch was planned."""
        return sum(part.late for part in self.partitions or ())

    @property
    def files_written(self) -> int | None:
        """The data files written into the touched partitions (an entry from before they were
        counted: one); None when no partition is recorded."""
        if self.partitions is None:
            return None
        return sum(1 if part.files is None else part.files for part in self.partitions)

    def partitions_json(self) -> list[dict]:
        """The touched partitions as stored; [] when none are recorded."""
        return [part.to_json() for part in self.partitions or ()]

    def at_written(self, partitions: tuple[TouchedPartition, ...], event_high: dict[str, int]) -> "EventTimeRecord":
        """The record once the batch is WRITTEN, with what its tasks returned."""
        return replace(self, partitions=partitions, event_high=event_high)

    def header_json(self) -> dict:
        """Its keys in the batch's header, in their place there; the partitions are counted, not held."""
        return {**({"placement": self.placement} if self.placement else {}),
                **({"partition_count": len(self.partitions)} if self.partitions is not None else {}),
                **({"event_high": self.event_high} if self.event_high else {})}

    @classmethod
    def from_json(cls, header: dict, partitions: list[dict] | None) -> "EventTimeRecord":
        """From a batch's header and its stored partitions (None: none recorded)."""
        return cls(header.get("placement", {}),
                   None if partitions is None else tuple(TouchedPartition.from_json(p) for p in partitions),
                   _counts(header.get("event_high", {})))


@dataclass(frozen=True)
class DimensionChange:
    """A dimension's pin replaced when its batch was resumed under on_dimension_change =
    use_current: the snapshots before and after (etl.rows.dimensions.Snapshot json; None where the
    source was missing), when, and by which run."""

    dimension: str
    pinned: dict | None
    current: dict | None
    at: str
    by: str

    def to_json(self) -> dict:
        return {"dimension": self.dimension, "pinned": self.pinned, "current": self.current, "at": self.at,
                "by": self.by}

    @classmethod
    def from_json(cls, raw: dict) -> "DimensionChange":
        return cls(str(raw["dimension"]), raw.get("pinned"), raw.get("current"), str(raw["at"]), str(raw["by"]))


# In a routed batch's extra, from WRITTEN on: table -> the rows written to it (etl.job.batch_tables).
TABLE_ROWS_KEY = "table_rows"


@dataclass(frozen=True)
class Batch:
    batch_id: int
    state: BatchState
    planned_at: str
    partition_values: dict[str, str]
    ranges: tuple[OffsetRange, ...]
    skipped: tuple[SkippedRange, ...] = ()
    planned_by: str = ""
    rows: int | None = None
    rejected: int | None = None
    updated_at: str = ""
    extra: dict = field(default_factory=dict)
    dimensions: dict = field(default_factory=dict)  # name -> pinned snapshot (etl.rows.dimensions.Snapshot json)
    unmatched: dict[str, int] | None = None  # name -> rows whose key found no match; None until WRITTEN
    # Writer-schema fields the table lacks -> records that carried them (avro, protobuf); set at WRITTEN
    ignored_fields: dict[str, int] = field(default_factory=dict)
    dimension_changes: tuple[DimensionChange, ...] = ()  # pins replaced under on_dimension_change = use_current
    kind: BatchKind = BatchKind.LOAD
    # What the plan writes to, checked when a batch is resumed (etl.model.binding.Target json).
    target: dict = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)  # topic -> id the broker reported at plan time
    # "topic:partition" -> fingerprint of the last record written (etl.model.identity), set at WRITTEN
    last_records: dict[str, RecordFingerprint] = field(default_factory=dict)
    # Its Placement and, from WRITTEN on, the partitions and event times it wrote; empty under planning time.
    event_time: EventTimeRecord = field(default_factory=EventTimeRecord)
    # Set at REGISTERED: the snapshot of the offsets after this batch, written before the commit
    # that points to it (etl.state.snapshots); "" until then, or when it must be written at commit.
    snapshot: str = ""
    # With [route] sections: topic -> the tables its ranges are written to, as routed when planned
    # (etl.model.routes); {} for a one-table job, whose ranges all go to its table.
    tables: dict[str, list[str]] = field(default_factory=dict)

    @property
    def file_ranges(self) -> tuple[OffsetRange, ...]:
        """The ranges that become files: zero-length ranges only record a new partition's
        starting offset."""
        return tuple(r for r in self.ranges if r.size > 0)

    @property
    def routed_tables(self) -> tuple[str, ...]:
        """A routed batch's tables, each once, in the order of its file ranges: those its tasks
        write and it registers (etl.job.batch_tables); () for a one-table job's batch."""
        return tuple(dict.fromkeys(table for r in self.file_ranges for table in self.tables.get(r.topic, ())))

    @property
    def record_count(self) -> int:
        return sum(r.size for r in self.ranges)

    def advanced(self, to: BatchState, **changes) -> "Batch":
        if to is not self.state.next:
            raise StateConflict(f"batch {self.batch_id} is {self.state.value}; it cannot move to {to.value}")
        return replace(self, state=to, updated_at=utc_now_iso(), **changes)

    def amended(self, **changes) -> "Batch":
        """The same batch in the same state with changed bookkeeping (never its ranges)."""
        fixed = {"ranges", "state", "partition_values", "kind", "target", "tables"} & set(changes)
        if fixed or changes.get("event_time", self.event_time).placement != self.event_time.placement:
            raise StateConflict(f"batch {self.batch_id}: its ranges, state and partition are fixed when planned")
        return replace(self, updated_at=utc_now_iso(), **changes)

    def header_json(self) -> dict:
        return {
            "batch_id": self.batch_id, "state": self.state.value, "planned_at": self.planned_at,
            "partition_values": self.partition_values, "skipped": [s.to_json() for s in self.skipped],
            "planned_by": self.planned_by, "rows": self.rows, "rejected": self.rejected,
            "updated_at": self.updated_at, "range_count": len(self.ranges), "extra": self.extra,
            "dimensions": self.dimensions, "unmatched": self.unmatched,
            **({"ignored_fields": self.ignored_fields} if self.ignored_fields else {}),
            "dimension_changes": [c.to_json() for c in self.dimension_changes], "kind": self.kind.value,
            "target": self.target, "topic_ids": self.topic_ids,
            "last_records": {key: last.to_json() for key, last in self.last_records.items()},
            # The partitions themselves are stored in chunks beside the header (etl.state.batch_nodes).
            **self.event_time.header_json(),
            **({"snapshot": self.snapshot} if self.snapshot else {}),
            **({"tables": self.tables} if self.tables else {}),
        }

    @classmethod
    def from_json(cls, header: dict, ranges: list[list], partitions: list[dict] | None = None) -> "Batch":
        return cls(
            batch_id=int(header["batch_id"]), state=BatchState(header["state"]),
            planned_at=header["planned_at"], partition_values=dict(header["partition_values"]),
            ranges=tuple(OffsetRange.from_json(r) for r in ranges),
            skipped=tuple(SkippedRange(**s) for s in header.get("skipped", [])),
            planned_by=header.get("planned_by", ""), rows=header.get("rows"),
            rejected=header.get("rejected"), updated_at=header.get("updated_at", ""),
            extra=header.get("extra", {}), dimensions=header.get("dimensions", {}),
            unmatched=None if header.get("unmatched") is None else _counts(header["unmatched"]),
            ignored_fields=_counts(header.get("ignored_fields", {})),
            dimension_changes=tuple(DimensionChange.from_json(c) for c in header.get("dimension_changes", [])),
            kind=BatchKind(header.get("kind", BatchKind.LOAD.value)), target=header.get("target", {}),
            # An id the broker did not report was never stored (etl.job.driver); an older header's None is the same.
            topic_ids={str(topic): str(i) for topic, i in header.get("topic_ids", {}).items() if i},
            last_records={key: RecordFingerprint(int(last[0]), int(last[1]), str(last[2]))
                          for key, last in header.get("last_records", {}).items()},
            event_time=EventTimeRecord.from_json(header, partitions),
            snapshot=header.get("snapshot", ""),
            tables={topic: list(tables) for topic, tables in header.get("tables", {}).items()},
        )


def _counts(raw: dict) -> dict[str, int]:
    """A stored map of names to whole numbers (rows, records, epoch milliseconds)."""
    return {str(name): int(count) for name, count in raw.items()}


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def utc_now_iso() -> str:
    return utc_now().isoformat(timespec="seconds")
