"""The line `etl run` prints of a committed batch (etl.job.summary): its file count is the files
written, not the ranges. By event time a range writes one file into each Hive partition its rows
fall in (5,000 records over 4,992 hours: 4,996 files, said as "1 files")."""
from __future__ import annotations

from etl.job.event_record import touched_partitions
from etl.job.summary import BatchSummary
from etl.job.tasks import RangeResult
from etl.model.batch import Batch, BatchState, EventTimeRecord, OffsetRange, TouchedPartition
from etl.sink.manifest import Part


def _batch(ranges, partitions=None) -> Batch:
    return Batch(batch_id=3, state=BatchState.COMMITTED, planned_at="2026-11-25T00:00:00Z", partition_values={},
                 ranges=tuple(ranges), rows=7, rejected=0, event_time=EventTimeRecord(partitions=partitions))


def test_an_event_time_batch_counts_one_file_per_range_and_hive_partition():
    one, two = OffsetRange("t", 0, 0, 5, None), OffsetRange("t", 1, 0, 2, None)
    results = [RangeResult(one, True, 5, 0, parts=tuple(Part(f"dt=2026-11-2{d}/hour=10", 1) for d in range(5))),
               RangeResult(two, True, 2, 0, parts=(Part("dt=2026-11-20/hour=10", 1), Part("dt=2026-11-21/hour=10", 1)))]
    partitions = touched_partitions(results)
    assert [p.files for p in partitions] == [2, 2, 1, 1, 1]
    summary = BatchSummary.of(_batch([one, two], tuple(partitions)), resumed=False, seconds=1.0, cap=1000)
    assert summary.files == 7 and "COMMITTED: 7 files, 7 rows" in summary.describe()


def test_a_batch_by_planning_time_counts_one_file_per_range():
    ranges = [OffsetRange("t", p, 0, 5, None) for p in range(4)] + [OffsetRange("t", 4, 9, 9, None)]  # empty: no file
    assert BatchSummary.of(_batch(ranges), resumed=False, seconds=1.0, cap=1000).files == 4


def test_a_record_written_before_files_were_counted_takes_each_partition_for_one():
    partitions = (TouchedPartition("dt=2026-11-20/hour=10", 3, 0, files=None),
                  TouchedPartition("dt=2026-11-20/hour=11", 4, 0, files=None))
    summary = BatchSummary.of(_batch([OffsetRange("t", 0, 0, 7, None)], partitions), False, 1.0, 1000)
    assert summary.files == 2


def test_a_split_range_counts_a_file_in_each_of_its_tables():
    # A split range writes a Parquet file into each table of its split (empty or not), then a
    # manifest; a range of a topic one route takes whole writes one. Manifests and rejected
    # files are not counted (the rejected records are, as "rejected").
    split, whole = OffsetRange("events", 0, 0, 5, None), OffsetRange("orders", 0, 0, 2, None)
    batch = Batch(batch_id=3, state=BatchState.COMMITTED, planned_at="2026-11-25T00:00:00Z", partition_values={},
                  ranges=(split, whole, OffsetRange("events", 1, 4, 4, None)), rows=7, rejected=0,
                  tables={"events": ["clicks", "views", "events_other"], "orders": ["orders"]})
    summary = BatchSummary.of(batch, resumed=False, seconds=1.0, cap=1000)
    assert summary.files == 4 and "COMMITTED: 4 files" in summary.describe()
