"""[hive] partition_by and its companions: how rows are spread over Hive partitions, and what
a row's event time may do (etl.model.partitioning, etl.rows.placement, etl.sink.markers).
Parsed in etl.config.parse; re-exported by etl.config.model.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PartitionSource(StrEnum):
    """[hive] partition_by: which time puts a row in its Hive partition (etl.model.partitioning)."""

    PLANNING_TIME = "planning_time"  # the batch's planning time: one partition per batch
    KAFKA_TIMESTAMP = "kafka_timestamp"  # the record's Kafka timestamp
    COLUMN = "column"  # column:<name>, a timestamp column of the table


class MissingEventTime(StrEnum):
    """[hive] on_missing_event_time: a row whose event-time column is NULL."""

    REJECT = "reject"  # to <table>_rejected, with the reason
    PLANNING_TIME = "planning_time"  # into the batch's planning-time partition


class LateData(StrEnum):
    """[hive] late_data: a row for a partition whose `_SUCCESS` is written (or due)."""

    WRITE = "write"  # written all the same, logged as LATE DATA and counted
    REJECT = "reject"  # to <table>_rejected, reason "late"


class FutureData(StrEnum):
    """[hive] future_data: a row whose event time is more than max_future_seconds ahead of its
    batch's planning time (a sentinel such as 9999-12-31, a producer's clock running ahead)."""

    WRITE = "write"  # written to its partition; it does not advance the watermark
    REJECT = "reject"  # to <table>_rejected, reason "future"


@dataclass(frozen=True)
class PartitioningConfig:
    """[hive] partition_by and its companions: how rows are spread over Hive partitions."""

    source: PartitionSource = PartitionSource.PLANNING_TIME
    column: str | None = None  # the table's timestamp column, with source COLUMN
    timezone: str = "UTC"  # IANA name; dt/hour are the wall clock in it
    on_missing_event_time: MissingEventTime = MissingEventTime.REJECT
    late_data: LateData = LateData.WRITE
    # A Kafka partition without new records for this long does not hold back the watermark.
    idle_partition_seconds: float = 600.0
    # An event time further than this ahead of the planning time does not advance the watermark.
    max_future_seconds: float = 3600.0
    future_data: FutureData = FutureData.WRITE
    # Partition files one task keeps open at once; a range touching more is read again for the rest.
    max_open_files: int = 32

    @property
    def event_column(self) -> str | None:
        """The column a row's event time is read from; None under planning time."""
        if self.source is PartitionSource.KAFKA_TIMESTAMP:
            return "kafka_timestamp"
        return self.column

    def describe(self) -> str:
        return f"column:{self.column}" if self.source is PartitionSource.COLUMN else str(self.source)
