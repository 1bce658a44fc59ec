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


# A run under read_uncommitted committed past a transaction still open; the next plans under
# read_committed, where Kafka's `latest` is the last stable offset (17), short of the committed
# offset (34), while the log ends at 40. The topic is the same: wait for the transaction.
def waiting(committed=34, low=0, lso=17, log_end=40, same_topic=True):
    return PartitionPosition("t", 0, committed, low, lso, log_end=log_end, same_topic=same_topic)


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_committed_offset_past_the_last_stable_offset_waits_for_the_transaction_to_end(policy):
    job = JobConfig(name="t", on_offset_out_of_range=policy, max_records_per_partition=100)
    plan = plan_ranges([waiting(), pos(1, 5, 0, 9)], job)
    assert plan.ranges == (OffsetRange("t", 1, 5, 9, 5),)  # nothing for partition 0, no restart at 0
    assert plan.skipped == ()
    assert [p.partition for p in plan.waiting] == [0]
    assert "waiting for the transaction open at offset 17" in plan.waiting[0].describe()


def test_once_the_last_stable_offset_passes_the_committed_offset_the_partition_goes_on_from_it():
    plan = plan_ranges([waiting(lso=40)], JOB)
    assert plan.ranges == (OffsetRange("t", 0, 34, 40, 34),) and not plan.waiting


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_committed_offset_past_the_log_end_of_the_same_topic_is_never_restarted_at_earliest(policy):
    job = JobConfig(name="t", on_offset_out_of_range=policy)
    with pytest.raises(OffsetOutOfRange, match=r"t\[0\].* 34 .*log ends at 30.*same topic id.*truncated") as raised:
        plan_ranges([waiting(lso=30, log_end=30)], job)
    assert "recreated" not in str(raised.value) and "on_offset_out_of_range = earliest" not in str(raised.value)


def test_past_the_log_end_without_a_topic_id_to_tell_still_follows_the_policy():
    job = JobConfig(name="t", on_offset_out_of_range="earliest")
    plan = plan_ranges([waiting(lso=30, log_end=30, same_topic=False)], job)
    assert [(s.committed, s.restart_at) for s in plan.skipped] == [(34, 0)]


def test_a_run_logs_each_skip_as_an_error_and_each_waiting_partition_as_a_warning():
    job = JobConfig(name="t", on_offset_out_of_range="earliest")
    notes = plan_ranges([waiting(), PartitionPosition("t", 1, 2, 10, 20)], job).notes()
    assert [(level, note.split(":")[0]) for level, note in notes] == [(40, "SKIPPING LOST OFFSETS"), (30, "t[0]")]
