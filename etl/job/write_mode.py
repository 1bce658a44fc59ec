"""The write mode: planning time or event time, one object each, chosen in one place.

  planning time: every row of a batch in the Hive partition of the moment it was planned; one
    file per range, in that partition. A range is done once its file is in that folder.
  event time: each row in the partition of its own event time (etl.rows.placement); a file per
    range in every partition it touches, then the range's manifest (etl.sink.manifest). A range
    is done once its manifest is published.

A batch's mode is its plan's: a stored Placement with an event column is event time
(mode_of). A new plan's is the config's, [hive] partition_by (configured_mode); a batch planned
before partition_by changed is finished in its own mode.

What the two modes do differently is here and nowhere else: what a plan records of event time
(Batch.event_time, read by EventTimeMode and the event-time tasks; other readers ask the record's
methods), what a task is given for it (RangeTask.event_time), the task an executor runs, the
range-done check (the driver's, and `etl recover`'s over its inventory), the folders a batch's
temp files are swept from, the partitions it registers, what WRITTEN records, the marker
bookkeeping (etl.sink.markers), the partition cap, and which partitions the run metrics and the
dry run name.
What the commands say of a batch's mode (`by_event_time`) is their renderers' words:
etl.ops.dry_run, etl.ops.recovery and the driver's errors.
"""
from __future__ import annotations

import datetime as dt
from typing import Callable, Mapping, Protocol

from etl.config import HiveConfig, PartitioningConfig, PartitionSource
from etl.job.batch_tables import BatchTables
from etl.job.event_record import event_time_record
from etl.job.event_task import run_event_range_task
from etl.job.partition_cap import apply_partition_cap
from etl.job.range_task import EventTimeTask, RangeResult
from etl.job.tasks import run_range_task
from etl.hive.registrar import HiveRegistrar
from etl.model.batch import Batch, EventTimeRecord, OffsetRange, TouchedPartition
from etl.model.naming import partition_values
from etl.model.partitioning import Placement
from etl.sink.fs import WarehouseFileSystem
from etl.sink.manifest import manifest_dir, manifest_path
from etl.sink.markers import SuccessMarkers

RangeTaskFunction = Callable[..., RangeResult]  # (task: RangeTask, lookups=...) on an executor


class FilesSeen(Protocol):
    """What the warehouse holds, as the driver (its filesystem) or `etl recover` (its inventory)
    sees it."""

    def has_file(self, values: Mapping[str, str], r: OffsetRange) -> bool:
        """Whether the main table's partition `values` holds the range's file (a range of a topic
        split by a field: whether its manifest is published, etl.job.route_task)."""

    def has_manifest(self, r: OffsetRange) -> bool:
        """Whether the range's manifest is published."""


class WarehouseFiles:
    """FilesSeen through the filesystem, each range in its table (etl.job.batch_tables); a folder
    is listed once."""

    def __init__(self, fs: WarehouseFileSystem, tables: BatchTables):
        self.fs, self.tables = fs, tables
        self._listed: dict[str, set[str]] = {}

    def has_file(self, values: Mapping[str, str], r: OffsetRange) -> bool:
        if self.tables.split_of(r) is not None:
            return self.has_manifest(r)  # a split range (etl.job.route_task) is done once its manifest is published
        folder = self.tables.of(r).warehouse.main_dir(dict(values))
        if folder not in self._listed:
            self._listed[folder] = set(self.fs.list_dir(folder))
        return r.name_as(self.tables.of(r).spec.layout.file_format) in self._listed[folder]

    def has_manifest(self, r: OffsetRange) -> bool:
        root = self.tables.manifest_root(r)
        return self.fs.exists(manifest_path(root, r.topic, r.partition, r.start, r.end, r.incarnation))


class WriteMode(Protocol):
    by_event_time: bool  # what `etl run --dry-run`, `etl recover` and the driver's errors say of a mode
    run_task: RangeTaskFunction  # what each Spark task runs for one of the batch's ranges

    def task_placing(self, batch: Batch, table_root: str, max_open_files: int,
                     relocated: Mapping[str, str]) -> EventTimeTask | None:
        """What each task places rows with, given its table's root and compacted partitions."""

    def plan_record(self, placement: Placement) -> EventTimeRecord:
        """What a new plan records of event time: its Placement, or nothing."""

    def late_before_ms(self, markers: SuccessMarkers) -> int | None:
        """For a new plan: partitions whose window ends at or before this are late."""

    def on_plan(self, markers: SuccessMarkers, batch: Batch) -> Batch:
        """The new batch with the markers' ledger carried forward."""

    def marker_cutoff(self, markers: SuccessMarkers) -> Callable[[], dt.datetime | None]:
        """What closes a partition's window, for the markers."""

    def missing(self, batch: Batch, seen: FilesSeen) -> list[OffsetRange]:
        """The batch's ranges that are not done."""

    def clashes(self, batch: Batch, seen: FilesSeen) -> list[str]:
        """The new plan's ranges (by their names' stems) that are already published (never planned: refused)."""

    def sweep_folders(self, tables: BatchTables, batch: Batch, results: list[RangeResult]) -> list[str]:
        """Beyond the batch's planning-time folders: where its tasks left temp files."""

    def table_partitions(self, batch: Batch) -> dict[str, list[dict[str, str]]]:
        """A routed batch's partitions by table: those it registers in each (once WRITTEN)."""

    def register(self, registrar: HiveRegistrar, batch: Batch) -> None:
        """Every Hive partition the batch touched."""

    def written(self, batch: Batch, results: list[RangeResult], markers: SuccessMarkers, hive: HiveConfig) -> dict:
        """What the WRITTEN header records beyond the counts."""

    def capped(self, batch: Batch, hive: HiveConfig, count: Callable[[], list[list[int]]]) -> Batch:
        """The batch under [hive] max_partitions_per_batch; `count`: each range's partition keys."""

    def main_partitions(self, batch: Batch) -> list[dict[str, str] | str]:
        """The main table's partitions the batch wrote into (once WRITTEN)."""

    def recorded_partitions(self, batch: Batch) -> tuple[TouchedPartition, ...] | None:
        """The Hive partitions WRITTEN recorded the batch touched; None: none recorded (by
        event time: not WRITTEN yet; by planning time: never, its plan's partition is the one)."""


class PlanningTimeMode:
    by_event_time = False
    run_task: RangeTaskFunction = staticmethod(run_range_task)

    def task_placing(self, batch: Batch, table_root: str, max_open_files: int,
                     relocated: Mapping[str, str]) -> EventTimeTask | None:
        return None  # the tasks write into their folder, and place nothing

    def plan_record(self, placement: Placement) -> EventTimeRecord:
        return EventTimeRecord()

    def late_before_ms(self, markers: SuccessMarkers) -> int | None:
        return None

    def on_plan(self, markers: SuccessMarkers, batch: Batch) -> Batch:
        return markers.on_plan(batch)

    def marker_cutoff(self, markers: SuccessMarkers) -> Callable[[], dt.datetime | None]:
        return markers.clock_cutoff

    def missing(self, batch: Batch, seen: FilesSeen) -> list[OffsetRange]:
        return [r for r in batch.file_ranges if not seen.has_file(batch.partition_values, r)]

    def clashes(self, batch: Batch, seen: FilesSeen) -> list[str]:
        return [r.file_range.stem for r in batch.file_ranges if seen.has_file(batch.partition_values, r)]

    def sweep_folders(self, tables: BatchTables, batch: Batch, results: list[RangeResult]) -> list[str]:
        return []

    def table_partitions(self, batch: Batch) -> dict[str, list[dict[str, str]]]:
        return {table: [batch.partition_values] for table in batch.routed_tables}

    def register(self, registrar: HiveRegistrar, batch: Batch) -> None:
        registrar.add_partition(batch.partition_values, with_rejected=bool(batch.rejected))

    def written(self, batch: Batch, results: list[RangeResult], markers: SuccessMarkers, hive: HiveConfig) -> dict:
        return {}

    def capped(self, batch: Batch, hive: HiveConfig, count: Callable[[], list[list[int]]]) -> Batch:
        return batch  # one partition per batch: nothing to cap

    def main_partitions(self, batch: Batch) -> list[dict[str, str] | str]:
        return [batch.partition_values]

    def recorded_partitions(self, batch: Batch) -> tuple[TouchedPartition, ...] | None:
        return None


class EventTimeMode:
    by_event_time = True
    run_task: RangeTaskFunction = staticmethod(run_event_range_task)

    def task_placing(self, batch: Batch, table_root: str, max_open_files: int,
                     relocated: Mapping[str, str]) -> EventTimeTask | None:
        return EventTimeTask(Placement.from_json(batch.event_time.placement), table_root, max_open_files, relocated)

    def plan_record(self, placement: Placement) -> EventTimeRecord:
        return EventTimeRecord(placement.to_json())

    def late_before_ms(self, markers: SuccessMarkers) -> int | None:
        return markers.late_before_ms()

    def on_plan(self, markers: SuccessMarkers, batch: Batch) -> Batch:
        return markers.carry(batch)

    def marker_cutoff(self, markers: SuccessMarkers) -> Callable[[], dt.datetime | None]:
        return markers.watermark_cutoff

    def missing(self, batch: Batch, seen: FilesSeen) -> list[OffsetRange]:
        return [r for r in batch.file_ranges if not seen.has_manifest(r)]  # done once its manifest is published

    def clashes(self, batch: Batch, seen: FilesSeen) -> list[str]:
        return PLANNING_TIME.clashes(batch, seen) + [r.file_range.stem for r in batch.file_ranges
                                                     if seen.has_manifest(r)]

    def sweep_folders(self, tables: BatchTables, batch: Batch, results: list[RangeResult]) -> list[str]:
        parts = sorted({tables.part_dir(r.range, part) for r in results for part in r.parts})
        manifests = sorted({manifest_dir(tables.manifest_root(r), r.topic, r.partition) for r in batch.file_ranges})
        return parts + manifests

    def table_partitions(self, batch: Batch) -> dict[str, list[dict[str, str]]]:
        by_table: dict[str, list[dict[str, str]]] = {}
        for part in batch.event_time.partitions or ():
            by_table.setdefault(part.table, []).append(partition_values(part.partition))
        return by_table

    def register(self, registrar: HiveRegistrar, batch: Batch) -> None:
        touched = [partition_values(part.partition) for part in batch.event_time.partitions or ()]
        registrar.add_partitions(touched, [batch.partition_values] if batch.rejected else [])

    def written(self, batch: Batch, results: list[RangeResult], markers: SuccessMarkers, hive: HiveConfig) -> dict:
        return event_time_record(batch, results, markers, hive)

    def capped(self, batch: Batch, hive: HiveConfig, count: Callable[[], list[list[int]]]) -> Batch:
        """The ranges are read and placed once, nothing written (etl.job.partition_cap)."""
        if hive.max_partitions_per_batch is None:
            return batch
        return apply_partition_cap(batch, count(), hive.max_partitions_per_batch, hive.on_too_many_partitions)

    def main_partitions(self, batch: Batch) -> list[dict[str, str] | str]:
        return [part.partition for part in batch.event_time.partitions or ()]

    def recorded_partitions(self, batch: Batch) -> tuple[TouchedPartition, ...] | None:
        return batch.event_time.partitions


PLANNING_TIME = PlanningTimeMode()
EVENT_TIME = EventTimeMode()


def mode_of(batch: Batch) -> WriteMode:
    """The mode a batch was planned in: its stored Placement names an event column, or not."""
    return EVENT_TIME if batch.event_time.by_event_time else PLANNING_TIME


def configured_mode(settings: PartitioningConfig) -> WriteMode:
    """The mode a new plan gets: [hive] partition_by."""
    return PLANNING_TIME if settings.source is PartitionSource.PLANNING_TIME else EVENT_TIME
