"""Offset planning rules, as pure functions."""
import pytest

from etl.config import JobConfig
from etl.errors import OffsetOutOfRange
from etl.model.batch import OffsetRange
from etl.model.planner import PartitionPosition, plan_ranges

JOB = JobConfig(name="t", max_records_per_partition=100)


def pos(partition, committed, low, high, topic="t"):
    return PartitionPosition(topic, partition, committed, low, high)


def test_range_starts_at_committed_and_is_capped():
    plan = plan_ranges([pos(0, 10, 0, 500), pos(1, 20, 0, 50)], JOB)
    assert plan.ranges == (OffsetRange("t", 0, 10, 110, 10), OffsetRange("t", 1, 20, 50, 20))


def test_partition_without_new_data_is_left_out():
    assert plan_ranges([pos(0, 50, 0, 50)], JOB).is_empty


def test_new_partition_starts_at_earliest_or_latest_and_is_recorded_even_when_empty():
    earliest = plan_ranges([pos(0, None, 5, 8)], JOB)
    assert earliest.ranges == (OffsetRange("t", 0, 5, 8, None),)
    latest = plan_ranges([pos(0, None, 5, 8)], JobConfig(name="t", starting_offsets="latest"))
    assert latest.ranges == (OffsetRange("t", 0, 8, 8, None),)  # records the start; no file


def test_out_of_range_fails_by_default_naming_the_partition():
    with pytest.raises(OffsetOutOfRange, match=r"t\[3\] committed offset 2 is outside \[10, 20\]"):
        plan_ranges([pos(3, 2, 10, 20), pos(4, 12, 10, 20)], JOB)


def test_out_of_range_earliest_restarts_at_low_and_records_the_skip():
    job = JobConfig(name="t", on_offset_out_of_range="earliest", max_records_per_partition=100)
    plan = plan_ranges([pos(3, 2, 10, 20), pos(4, 900, 0, 20)], job)
    assert plan.ranges == (OffsetRange("t", 3, 10, 20, 2), OffsetRange("t", 4, 0, 20, 900))
    assert [(s.partition, s.committed, s.restart_at) for s in plan.skipped] == [(3, 2, 10), (4, 900, 0)]
    assert "deleted from Kafka" in plan.skipped[0].describe()
    assert "beyond the log end" in plan.skipped[1].describe()
