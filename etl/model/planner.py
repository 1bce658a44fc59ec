"""Offset planning: which offsets of which partitions the next batch loads.

Pure functions over what ZooKeeper and Kafka said, so that every rule is testable alone:
`from` is the committed offset (or `starting_offsets` for a partition never seen),
`until` is min(latest, from + max_records_per_partition) (`latest`: the last stable offset under
read_committed, etl.source.kafka.KafkaMetadata.watermarks), and a committed offset outside
[earliest, log end], or one committed for an earlier incarnation of a recreated topic
(etl.model.identity), follows `on_offset_out_of_range`.

A committed offset past the last stable offset but within the log (a run under read_uncommitted
committed past a transaction still open, and this one reads committed) is no loss: the partition
waits, planned nothing, until the transaction ends and the last stable offset passes it. Past the
log end of a topic whose id is the one the offsets were committed for, the log was truncated, not
recreated: restarting at its earliest offset would load again what was loaded, so that is refused
whatever the policy.

`starting_offsets` is for topics the job has never committed an offset of. A new partition of a
topic the job already follows starts at its earliest offset whatever that key says: it was
created after the job started, so every record in it is new to the job, and `latest` would
skip those produced before the next run (Spark's Kafka source does the same).
"""
from __future__ import annotations

import logging
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
    high: int  # latest offset the job can read to: the last stable offset under read_committed
    recreated: str = ""  # why the committed offset belongs to an earlier incarnation of the topic
    log_end: int | None = None  # the high watermark, where asked (committed > high); None: `high`
    same_topic: bool = False  # the topic id is the one the offsets were committed for

    @property
    def end_of_log(self) -> int:
        return self.high if self.log_end is None else max(self.high, self.log_end)

    @property
    def waiting(self) -> bool:
        """Committed past the last stable offset, within the log: a transaction is still open."""
        return (self.committed is not None and not self.recreated
                and self.high < self.committed <= self.end_of_log)

    @property
    def out_of_range(self) -> bool:
        return self.committed is not None and (
            bool(self.recreated) or not self.low <= self.committed <= self.end_of_log)

    @property
    def truncated(self) -> bool:
        """Past the log end of the same topic (by its id): the log was cut, the topic is the same."""
        return (self.committed is not None and not self.recreated and self.same_topic
                and self.committed > self.end_of_log)

    def describe(self) -> str:
        if self.recreated:
            return f"{self.recreated} (committed offset {self.committed}, Kafka holds [{self.low}, {self.high}])"
        if self.waiting:
            return (f"{self.topic}[{self.partition}]: committed offset {self.committed} is past the last stable "
                    f"offset {self.high}; waiting for the transaction open at offset {self.high} to end "
                    f"(isolation.level = read_committed; the log ends at {self.end_of_log}), nothing planned "
                    f"for this partition until then")
        if self.truncated:
            return (f"{self.topic}[{self.partition}] committed offset {self.committed} is past the end of the "
                    f"log: the log ends at {self.end_of_log}. The topic has the same topic id as when the offsets "
                    f"were committed, so it is the same topic, and its log was truncated (an unclean leader "
                    f"election, or a broker restored from an older copy)")
        return (f"{self.topic}[{self.partition}] committed offset {self.committed} is outside "
                f"[{self.low}, {self.end_of_log}]")


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    skipped: tuple[SkippedRange, ...]
    waiting: tuple[PartitionPosition, ...] = ()  # planned nothing until an open transaction ends

    @property
    def is_empty(self) -> bool:
        return not self.ranges

    def notes(self) -> list[tuple[int, str]]:
        """What a run logs of the plan, with the level: each skip an ERROR, each partition waiting a WARNING."""
        return ([(logging.ERROR, f"SKIPPING LOST OFFSETS: {s.describe()}") for s in self.skipped]
                + [(logging.WARNING, w.describe()) for w in self.waiting])


def plan_ranges(positions: list[PartitionPosition], job: JobConfig) -> Plan:
    """Ranges for every partition that has new data or needs its first offset recorded."""
    truncated = [p for p in positions if p.truncated]
    if truncated:  # whatever the policy: `earliest` would load again what was loaded
        raise OffsetOutOfRange(_truncated_message(truncated))
    out_of_range = [p for p in positions if p.out_of_range]
    if out_of_range and job.on_offset_out_of_range == OutOfRangePolicy.FAIL:
        raise OffsetOutOfRange(_out_of_range_message(out_of_range))
    ranges, skipped = [], []
    known_topics = {p.topic for p in positions if p.committed is not None}
    ordered = sorted(positions, key=lambda p: (p.topic, p.partition))
    for position in (p for p in ordered if not p.waiting):
        start = _start(position, job, position.topic in known_topics)
        if position.out_of_range:
            skipped.append(SkippedRange(position.topic, position.partition, position.committed, start,
                                        position.low, position.high, position.recreated))
        end = min(position.high, start + job.max_records_per_partition)
        if end > start or position.committed is None or position.out_of_range:
            ranges.append(OffsetRange(position.topic, position.partition, start, max(start, end),
                                      position.committed))
    return Plan(tuple(ranges), tuple(skipped), tuple(p for p in ordered if p.waiting))


def _start(position: PartitionPosition, job: JobConfig, known_topic: bool) -> int:
    if position.out_of_range:
        return position.low
    if position.committed is None:
        return position.low if known_topic or job.starting_offsets == StartingOffsets.EARLIEST else position.high
    return position.committed


def _listed(positions: list[PartitionPosition]) -> str:
    """The first 20 partitions described, and how many more."""
    more = f" (and {len(positions) - 20} more)" if len(positions) > 20 else ""
    return "; ".join(p.describe() for p in positions[:20]) + more


def _out_of_range_message(positions: list[PartitionPosition]) -> str:
    return (f"committed offsets are no longer valid in Kafka: {_listed(positions)}. Nothing was written. "
            f"Records were deleted by retention before they were loaded, or the topic was recreated. "
            f"To skip what was lost and go on from the earliest offset, set "
            f"[job] on_offset_out_of_range = earliest for one run (the skipped ranges are recorded in "
            f"ZooKeeper and shown by `etl status`), or reset offsets deliberately.")


def _truncated_message(positions: list[PartitionPosition]) -> str:
    return (f"{_listed(positions)}. Nothing was written. Restarting at the earliest offset would load again "
            f"what was loaded, so the job does not, whatever [job] on_offset_out_of_range says. Move the "
            f"offsets to where loading should go on with `etl reset-offsets --to TOPIC:PARTITION=OFFSET` "
            f"(the log end to load only what is written from now on)")
