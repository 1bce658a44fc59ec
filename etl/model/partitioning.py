"""The Partitioner seam: which Hive partition a row lands in, and when a partition is final.

One object decides a table's partition columns, the partition of a point in time, its path,
and each partition's time window (what `_SUCCESS` markers wait for). The DDL's partition
columns set the granularity (`dt` alone: days; `dt, hour`: hours); [hive] partition_timezone
sets the zone whose wall clock dt and hour are. What time places a row is the batch's
Placement, fixed in its plan:
  - planning time: every row of the batch in the partition of the moment it was planned,
    by the driver's clock, so that a replay lands in the same folder (one file per range);
  - event time (the Kafka timestamp, or a timestamp column): each row in the partition of its
    own time, so that a range may have a file in several partitions (etl.rows.placement).

Daylight saving. dt and hour are the wall clock in the zone. An hour that a change repeats
(02:00-03:00 on the last Sunday of October in Europe/Madrid) is one partition holding both,
and its window spans both: two hours. An hour that a change skips never exists, so no
partition has it. A day is midnight to midnight: 23, 24 or 25 hours.
"""
from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

from etl.config import FutureData, LateData, MissingEventTime, PartitioningConfig
from etl.errors import SchemaError
from etl.model.naming import partition_path, partition_values

if TYPE_CHECKING:  # pyarrow is the tasks' (100 ms of every command's start, which plans without it)
    import pyarrow as pa

UTC = dt.timezone.utc


@dataclass(frozen=True)
class Window:
    """The time a partition covers; it is final once the window has closed (and no batch is open)."""

    start: dt.datetime
    end: dt.datetime


class Partitioner(Protocol):
    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        """(name, Hive type) of each partition column, in PARTITIONED BY order."""

    def values_for_plan(self, planned_at: dt.datetime) -> dict[str, str]:
        """The partition values of a batch planned at `planned_at`."""

    def path(self, values: Mapping[str, str]) -> str:
        """The partition's folder below the table root: name=value/..."""

    def window(self, values: Mapping[str, str]) -> Window:
        """The time the partition covers; ValueError when its values name no time."""

    @property
    def granularity(self) -> "Granularity":
        """How long a partition's window is (a Placement stores it)."""

    @property
    def zone(self) -> str:
        """The IANA zone whose wall clock the partition values are."""

    def in_zone(self, zone: str) -> "Partitioner":
        """The same scheme in another zone ([hive] partition_timezone)."""

    def wall_starts(self, times: pa.Array) -> pa.Array:
        """Vectorised: each time's partition key (its partition's start, as wall-clock ms)."""

    def values_of_key(self, key_ms: int) -> dict[str, str]:
        """The partition values of a partition key."""

    def key_of(self, values: Mapping[str, str]) -> int:
        """The partition key of partition values (values_of_key's inverse)."""

    def window_end_ms(self, key_ms: int) -> int:
        """The end of a partition key's window, in ms since 1970 (UTC)."""


class Granularity(StrEnum):
    HOUR = "hour"
    DAY = "day"


_COLUMNS = {Granularity.HOUR: (("dt", "string"), ("hour", "string")), Granularity.DAY: (("dt", "string"),)}


@dataclass(frozen=True)
class TimePartitioner:
    """dt=YYYY-MM-DD[/hour=HH]: the wall clock of a time in `zone`."""

    granularity: Granularity = Granularity.HOUR
    zone: str = "UTC"

    @property
    def columns(self) -> tuple[tuple[str, str], ...]:
        return _COLUMNS[self.granularity]

    def in_zone(self, zone: str) -> "TimePartitioner":
        return TimePartitioner(self.granularity, zone)

    def values_for_plan(self, planned_at: dt.datetime) -> dict[str, str]:
        return self.values_of_wall(planned_at.astimezone(zoneinfo.ZoneInfo(self.zone)).replace(tzinfo=None))

    def values_of_wall(self, wall: dt.datetime) -> dict[str, str]:
        """The partition values of a wall-clock time in the zone: always YYYY-MM-DD, zero-padded
        (strftime's %Y is not padded below year 1000 on glibc), so that names sort as times do."""
        values = {"dt": f"{wall.year:04d}-{wall.month:02d}-{wall.day:02d}"}
        if self.granularity is Granularity.HOUR:
            values["hour"] = f"{wall.hour:02d}"
        return values

    def wall_starts(self, times: pa.Array) -> pa.Array:
        """Vectorised: the start of each time's partition, as the zone's wall clock in ms since
        1970 (a key per partition; NULL stays NULL). `times`: timestamp[ms], UTC."""
        import pyarrow as pa
        import pyarrow.compute as pc
        aware = times.cast(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("ms", tz=self.zone))
        wall = pc.floor_temporal(pc.local_timestamp(aware), unit=str(self.granularity))
        return wall.cast(pa.int64())

    def values_of_key(self, key_ms: int) -> dict[str, str]:
        return self.values_of_wall(dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=key_ms))

    def key_of(self, values: Mapping[str, str]) -> int:
        """values_of_key's inverse: the partition's start as wall clock in ms since 1970."""
        return (self._wall_start(values) - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)

    def path(self, values: Mapping[str, str]) -> str:
        return partition_path(dict(values))

    def _wall_start(self, values: Mapping[str, str]) -> dt.datetime:
        start = parse_day(values["dt"])
        return start.replace(hour=int(values["hour"])) if self.granularity is Granularity.HOUR else start

    def window(self, values: Mapping[str, str]) -> Window:
        start = self._wall_start(values)
        end = start + (dt.timedelta(hours=1) if self.granularity is Granularity.HOUR else dt.timedelta(days=1))
        zone = zoneinfo.ZoneInfo(self.zone)
        # A repeated wall-clock hour spans both of its occurrences (fold 0 and 1).
        first = min(start.replace(tzinfo=zone, fold=f).astimezone(UTC) for f in (0, 1))
        last = max(end.replace(tzinfo=zone, fold=f).astimezone(UTC) for f in (0, 1))
        return Window(first, last)

    def window_end_ms(self, key_ms: int) -> int:
        return int(self.window(self.values_of_key(key_ms)).end.timestamp() * 1000)


# dt as written: YYYY-MM-DD, or with the year unpadded (1 to 3 digits) as releases before the
# padding named years 1-999 (`dt=1-01-02`): such a name is still read, and maps to its padded form.
_DAY_RE = re.compile(r"^(?P<year>\d{1,4})-(?P<month>\d{2})-(?P<day>\d{2})$")


def parse_day(text: str) -> dt.datetime:
    """The midnight a dt value names; ValueError when it names no date."""
    match = _DAY_RE.match(text)
    if match is None:
        raise ValueError(f"dt={text!r} is not a date written YYYY-MM-DD")
    return dt.datetime(int(match["year"]), int(match["month"]), int(match["day"]))


def padded_values(values: Mapping[str, str]) -> dict[str, str]:
    """The partition values with dt's year zero-padded (a name from before the padding, mapped)."""
    if "dt" not in values or _DAY_RE.match(values["dt"]) is None:
        return dict(values)
    day = parse_day(values["dt"])
    return {**values, "dt": f"{day.year:04d}-{day.month:02d}-{day.day:02d}"}


def padded_path(path: str) -> str:
    """A partition path (dt=.../hour=...) with dt's year zero-padded; any other path as it is."""
    values = _values_or_none(path)
    return path if values is None else partition_path(padded_values(values))


def legacy_path(path: str) -> str:
    """The name a partition of years 1-999 had before the padding (`dt=1-01-02/hour=05`); other
    paths as they are."""
    values = _values_or_none(path) or {}
    match = _DAY_RE.match(values.get("dt", ""))
    if match is None or int(match["year"]) >= 1000:
        return path
    return partition_path({**values, "dt": f"{int(match['year'])}-{match['month']}-{match['day']}"})


def _values_or_none(path: str) -> dict[str, str] | None:
    parts = path.split("/")
    return partition_values(path) if all("=" in part for part in parts) else None


def is_legacy_path(path: str) -> bool:
    """Whether a partition path carries an unpadded year (written before the padding)."""
    return padded_path(path) != path


PLANNING_TIME_HOURLY = TimePartitioner(Granularity.HOUR, "UTC")
SCHEMES: tuple[TimePartitioner, ...] = (PLANNING_TIME_HOURLY, TimePartitioner(Granularity.DAY, "UTC"))


def partitioner_for(where: str, columns: Sequence[tuple[str, str]]) -> TimePartitioner:
    """The scheme whose columns the DDL declares (name, Hive type), or a SchemaError naming it."""
    declared = tuple((name, hive_type.lower()) for name, hive_type in columns)
    for scheme in SCHEMES:
        if declared == scheme.columns:
            return scheme
    found = ", ".join(f"{name} {hive_type}" for name, hive_type in declared)
    raise SchemaError(f"{where}: PARTITIONED BY ({found}) is not supported; the ETL writes daily or hourly "
                      "partitions: use 'PARTITIONED BY (dt string, hour string)' or 'PARTITIONED BY (dt string)'")


@dataclass(frozen=True)
class Placement:
    """Where one batch's rows go, fixed in its plan so that every attempt (a retry, a racing
    task, a resume after a crash) splits a range the same way and publishes the same files."""

    partitioner: Partitioner
    planned: dict[str, str]  # the planning-time partition: rejected rows, and the fallback
    column: str | None = None  # the event-time column; None: planning time
    on_missing: MissingEventTime = MissingEventTime.REJECT
    late_data: LateData = LateData.WRITE
    # A partition whose window ends at or before this (the watermark less the marker delay,
    # when the batch was planned) is due its `_SUCCESS`: its rows are late. None: none is.
    late_before_ms: int | None = None
    # A row whose event time is after this (the planning time plus [hive] max_future_seconds) is
    # "future": it does not advance the watermark, and future_data says whether it is written.
    # None: no bound (plans stored before the bound existed).
    future_after_ms: int | None = None
    future_data: FutureData = FutureData.WRITE
    # [hive] on_too_many_partitions = reject: rows of partitions whose key is after this one go to
    # the rejected table (set by etl.job.partition_cap before the plan is stored). None: no cap.
    last_key: int | None = None

    @classmethod
    def of(cls, settings: PartitioningConfig, partitioner: Partitioner, planned_at: dt.datetime,
           late_before_ms: int | None) -> "Placement":
        """The plan's Placement. The bounds on event times (late, future) exist only with an
        event column: which write mode a plan has is etl.job.write_mode's to say."""
        zoned = partitioner.in_zone(settings.timezone)
        timed = settings.event_column is not None
        future_after = future_bound_ms(planned_at, settings.max_future_seconds) if timed else None
        return cls(zoned, zoned.values_for_plan(planned_at), settings.event_column, settings.on_missing_event_time,
                   settings.late_data, late_before_ms if timed else None, future_after, settings.future_data)

    def to_json(self) -> dict:
        return {"granularity": str(self.partitioner.granularity), "zone": self.partitioner.zone,
                "planned": self.planned, "column": self.column, "on_missing": str(self.on_missing),
                "late_data": str(self.late_data), "late_before_ms": self.late_before_ms,
                "future_after_ms": self.future_after_ms, "future_data": str(self.future_data),
                **({"last_key": self.last_key} if self.last_key is not None else {})}

    @classmethod
    def from_json(cls, raw: dict) -> "Placement":
        return cls(TimePartitioner(Granularity(raw["granularity"]), raw["zone"]), dict(raw["planned"]),
                   raw.get("column"), MissingEventTime(raw["on_missing"]), LateData(raw["late_data"]),
                   raw.get("late_before_ms"), raw.get("future_after_ms"),
                   FutureData(raw.get("future_data", FutureData.WRITE)), raw.get("last_key"))


def future_bound_ms(at: dt.datetime, max_future_seconds: float) -> int:
    """The latest event time (ms since 1970) that may advance the watermark, seen at `at`. In
    integers: a bound of thousands of years must not overflow a datetime."""
    return int(at.timestamp() * 1000) + int(max_future_seconds * 1000)
