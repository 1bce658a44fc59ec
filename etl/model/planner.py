"""Offset planning: which offsets of which partitions the next batch loads.

Pure functions over what ZooKeeper and Kafka said, so that every rule is testable alone:
`from` is the committed offset (or `starting_offsets` for a partition never seen),
`until` is min(latest, from + max_records_per_partition) (`latest`: the last stable offset under
read_committed, etl.source.kafka.KafkaMetadata.watermarks), and a committed offset outside
[earliest, latest], or one committed for an earlier incarnation of a recreated topic
(etl.model.identity), follows `on_offset_out_of_range`.

`starting_offsets` is for topics the job has never committed an offset of. A new partition of a
topic the job already follows starts at its earliest offset whatever that key says: it was
created after the job started, so every record in it is new to the job, and `latest` would
skip those produced before the next run (Spark's Kafka source does the same).
"""
from __future__ import annotations

from dataclasses import dataclass

from etl.config import JobConfig, OutOfRangePolicy, StartingOffsets
from etl.errors import OffsetOutOfRange
from etl.model.batch import OffsetRange, SkippedRange


@dataclass(frozen=True)
class PartitionPosition:
    topic: str
    partition: int
    committed: int | None
    low: int  # earliest offset Kafka still holds
    high: int  # latest offset: the next one to be written
    recreated: str = ""  # why the committed offset belongs to an earlier incarnation of the topic

    @property
    def out_of_range(self) -> bool:
        return self.committed is not None and (bool(self.recreated) or not self.low <= self.committed <= self.high)

    def describe(self) -> str:
        if self.recreated:
            return f"{self.recreated} (committed offset {self.committed}, Kafka holds [{self.low}, {self.high}])"
        return (f"{self.topic}[{self.partition}] committed offset {self.committed} is outside "
                f"[{self.low}, {self.high}]")


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    skipped: tuple[SkippedRange, ...]

    @property
    def is_empty(self) -> bool:
        return not self.ranges


def plan_ranges(positions: list[PartitionPosition], job: JobConfig) -> Plan:
    """Ranges for every partition that has new data or needs its first offset recorded."""
    out_of_range = [p for p in positions if p.out_of_range]
    if out_of_range and job.on_offset_out_of_range == OutOfRangePolicy.FAIL:
        raise OffsetOutOfRange(_out_of_range_message(out_of_range))
    ranges, skipped = [], []
    known_topics = {p.topic for p in positions if p.committed is not None}
    for position in sorted(positions, key=lambda p: (p.topic, p.partition)):
        start = _start(position, job, position.topic in known_topics)
        if position.out_of_range:
            skipped.append(SkippedRange(position.topic, position.partition, position.committed, start,
                                        position.low, position.high, position.recreated))
        end = min(position.high, start + job.max_records_per_partition)
        if end > start or position.committed is None or position.out_of_range:
            ranges.append(OffsetRange(position.topic, position.partition, start, max(start, end),
                                      position.committed))
    return Plan(tuple(ranges), tuple(skipped))


def _start(position: PartitionPosition, job: JobConfig, known_topic: bool) -> int:
    if position.out_of_range:
        return position.low
    if position.committed is None:
        return position.low if known_topic or job.starting_offsets == StartingOffsets.EARLIEST else position.high
    return position.committed


def _out_of_range_message(positions: list[PartitionPosition]) -> str:
    listed = "; ".join(p.describe() for p in positions[:20])
    more = f" (and {len(positions) - 20} more)" if len(positions) > 20 else ""
    return (f"committed offsets are no longer valid in Kafka: {listed}{more}. Nothing was written. "
            f"Records were deleted by retention before they were loaded, or the topic was recreated. "
            f"To skip what was lost and go on from the earliest offset, set "
            f"[job] on_offset_out_of_range = earliest for one run (the skipped ranges are recorded in "
            f"ZooKeeper and shown by `etl status`), or reset offsets deliberately.")
