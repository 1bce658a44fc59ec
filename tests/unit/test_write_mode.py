"""The write-mode seam (etl.job.write_mode): which mode a batch and a config have, and the one
range-done check that the driver and `etl recover` share."""
from __future__ import annotations

import datetime as dt
from typing import Mapping

from etl.config import PartitioningConfig, PartitionSource
from etl.job.range_task import EventTimeTask
from etl.job.write_mode import EVENT_TIME, PLANNING_TIME, configured_mode, mode_of
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.partitioning import Placement, TimePartitioner
from etl.ops.dry_run import new_plan_target, open_batch_target

PLANNED_AT = dt.datetime(2026, 11, 21, 10, 30, tzinfo=dt.timezone.utc)
DONE, OPEN, EMPTY = OffsetRange("t", 0, 0, 10, None), OffsetRange("t", 1, 0, 10, None), OffsetRange("t", 2, 5, 5, 5)


class SeenFiles:
    """An in-memory FilesSeen: the files in each main-table partition, and the manifests."""

    def __init__(self, files: dict[str, set[OffsetRange]], manifests: set[OffsetRange]):
        self.files, self.manifests = files, manifests

    def has_file(self, values: Mapping[str, str], r: OffsetRange) -> bool:
        return r in self.files.get("/".join(f"{k}={v}" for k, v in values.items()), set())

    def has_manifest(self, r: OffsetRange) -> bool:
        return r in self.manifests


def batch(settings: PartitioningConfig) -> Batch:
    placement = Placement.of(settings, TimePartitioner(), PLANNED_AT, None)
    return Batch(1, BatchState.PLANNED, PLANNED_AT.isoformat(), placement.planned, (DONE, OPEN, EMPTY),
                 event_time=configured_mode(settings).plan_record(placement))


PLANNING = PartitioningConfig()
BY_COLUMN = PartitioningConfig(source=PartitionSource.COLUMN, column="ts")
BY_KAFKA_TIME = PartitioningConfig(source=PartitionSource.KAFKA_TIMESTAMP)


def test_the_mode_is_the_configs_for_a_new_plan_and_the_plans_for_a_batch():
    assert configured_mode(PLANNING) is PLANNING_TIME
    assert configured_mode(BY_COLUMN) is EVENT_TIME and configured_mode(BY_KAFKA_TIME) is EVENT_TIME
    assert mode_of(batch(PLANNING)) is PLANNING_TIME and batch(PLANNING).event_time.placement == {}
    assert mode_of(batch(BY_COLUMN)) is EVENT_TIME and mode_of(batch(BY_KAFKA_TIME)) is EVENT_TIME
    assert EVENT_TIME.task_placing(batch(BY_COLUMN), "/t", 8, {"dt=x": "y"}) == EventTimeTask(
        Placement.from_json(batch(BY_COLUMN).event_time.placement), "/t", 8, {"dt=x": "y"})
    assert PLANNING_TIME.task_placing(batch(PLANNING), "/t", 8, {}) is None


def test_by_planning_time_a_range_is_done_once_its_file_is_in_the_planned_partition():
    seen = SeenFiles({"dt=2026-11-21/hour=10": {DONE}, "dt=2026-11-21/hour=11": {OPEN}}, manifests={OPEN})
    assert PLANNING_TIME.missing(batch(PLANNING), seen) == [OPEN]  # a zero-length range is no file
    assert PLANNING_TIME.clashes(batch(PLANNING), seen) == [DONE.file_range.stem]


def test_by_event_time_a_range_is_done_once_its_manifest_is_published():
    seen = SeenFiles({"dt=2026-11-21/hour=10": {OPEN}}, manifests={DONE})
    assert EVENT_TIME.missing(batch(BY_COLUMN), seen) == [OPEN]
    assert EVENT_TIME.clashes(batch(BY_COLUMN), seen) == [OPEN.file_range.stem, DONE.file_range.stem]


def test_the_dry_run_names_the_mode_by_the_key_its_json_always_had():
    planned = {"dt": "2026-11-21", "hour": "10"}
    assert new_plan_target(PLANNING_TIME, lambda: planned, None) == {
        "by_event_time": False, "detail": "the hour it is planned in: now",
        "partitions": [{"partition": "dt=2026-11-21/hour=10", "folder": "<each table's folder>/dt=2026-11-21/hour=10"}]}
    assert new_plan_target(EVENT_TIME, lambda: planned, None)["by_event_time"] is True
    assert open_batch_target(batch(BY_COLUMN), None)["partitions"] is None
    assert open_batch_target(batch(PLANNING), None)["detail"] == "recorded in the batch's plan"
