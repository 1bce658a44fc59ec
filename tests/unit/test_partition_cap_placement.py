"""[hive] on_too_many_partitions = reject: the plan pins the last partition a batch keeps; rows of
later partitions are rejected once, with the reason, and never advance the watermark."""
from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from etl.config import FutureData, PartitioningConfig, PartitionSource
from etl.config.model import PartitionCapAction
from etl.job.partition_cap import TooManyPartitions, apply_partition_cap
from etl.model.batch import Batch, BatchState, EventTimeRecord
from etl.model.partitioning import Placement, TimePartitioner
from etl.rows.placement import place
from tests.unit.test_event_time_placement import rows, utc

HOUR = 3_600_000


def capped(last_key: int | None, **settings) -> Placement:
    built = Placement.of(PartitioningConfig(source=PartitionSource.COLUMN, column="ts", **settings), TimePartitioner(),
                         utc(2026, 11, 24, 9, 15), None)
    return Placement.from_json(dataclasses.replace(built, last_key=last_key).to_json())  # as a resumed task has it


def key(*args) -> int:
    return int(utc(*args).timestamp() * 1000)


def test_rows_past_the_last_kept_partition_are_rejected_once_and_do_not_move_the_watermark():
    data = rows(dt.datetime(2026, 11, 20, 7, 5), dt.datetime(2026, 11, 20, 8, 5), dt.datetime(2026, 11, 24, 9, 30),
                dt.datetime(9999, 12, 30))
    placed = place(data, capped(key(2026, 11, 20, 7), max_future_seconds=3600, future_data=FutureData.REJECT))
    assert [i for i, _ in placed.rejected] == [1, 2, 3]  # the sentinel is future and past the cap: once
    assert placed.rejected[0][1].startswith("too many partitions: partition dt=2026-11-20/hour=08 is past [hive] "
                                            "max_partitions_per_batch")
    assert placed.rejected[2][1].startswith("future:")
    assert placed.max_event_ms == key(2026, 11, 20, 7, 5)
    assert place(data, capped(None)).rejected == []


def batch(placement: Placement) -> Batch:
    return Batch(batch_id=7, state=BatchState.PLANNED, planned_at="2026-11-24T09:15:00+00:00",
                 partition_values={"dt": "2026-11-24", "hour": "09"}, ranges=(), planned_by="test",
                 updated_at="2026-11-24T09:15:00+00:00", event_time=EventTimeRecord(placement.to_json()))


def test_past_the_cap_a_batch_fails_or_pins_its_last_kept_partition():
    plan = batch(capped(None))
    counted = [[3 * HOUR, HOUR], [2 * HOUR, HOUR], [5 * HOUR]]  # 4 partitions
    assert apply_partition_cap(plan, counted, 4, PartitionCapAction.FAIL) is plan
    with pytest.raises(TooManyPartitions, match=r"would touch 4 Hive partitions, more than \[hive\] "
                                                r"max_partitions_per_batch = 3"):
        apply_partition_cap(plan, counted, 3, PartitionCapAction.FAIL)
    kept = apply_partition_cap(plan, counted, 2, PartitionCapAction.REJECT)
    assert Placement.from_json(kept.event_time.placement).last_key == 2 * HOUR
