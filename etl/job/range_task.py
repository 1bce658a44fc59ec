"""What one Spark task is given and what it returns, under either write mode
(etl.job.write_mode): the planning-time task (etl.job.tasks), the event-time task
(etl.job.event_task) and a split topic's task (etl.job.route_task) all take a RangeTask and
return a RangeResult.

Also what both read the same way: the dimension tables, the range's chunks from Kafka, and the
fingerprint of the range's last record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa

from etl.config import KafkaConfig, WarehouseConfig
from etl.job.partition_writer import WriterSpec
from etl.model.batch import OffsetRange
from etl.model.identity import RecordFingerprint, fingerprint
from etl.model.partitioning import Placement
from etl.model.routes import TopicSplit
from etl.rows.decoders import Decoder
from etl.rows.dimensions import from_ipc
from etl.sink.manifest import Part
from etl.source.chunk import RawChunk
from etl.source.kafka import consumer_settings
from etl.source.ranges import read_range
from etl.source.reused import PackedRead, reused_consumer
from etl.source.prefetch import prefetched

# Kafka is read this many chunks ahead of decoding and writing (a chunk: <= 10,000 records).
READ_AHEAD_CHUNKS = 2


@dataclass(frozen=True)
class SplitTable:
    name: str
    route: str  # the route's name
    main_dir: str  # the table's folder of the batch's planning-time partition
    writer: WriterSpec
    table_root: str = ""  # by event time: the table's root, its parts under each partition's folder
    relocated: Mapping[str, str] = field(default_factory=dict)  # the table's compacted partitions


@dataclass(frozen=True)
class SplitTarget:
    split: TopicSplit
    probe: Decoder  # the topic's decoder over the one field (etl.rows.routing)
    tables: tuple[SplitTable, ...]
    partition: str  # the planning-time partition's path, as the manifest lists it
    manifest_root: str  # the job's rejected table's folder: the one every route shares


@dataclass(frozen=True)
class EventTimeTask:
    """What a task by event time is given beyond any task's (etl.job.event_task, etl.job.partition_cap)."""

    placement: Placement  # the batch's: each row's Hive partition
    table_root: str  # the range's table's root, a file under each partition's folder
    max_open_files: int = 32
    # Partition path -> folder (relative to table_root) of the compacted partitions
    relocated: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RangeTask:
    range: OffsetRange
    main_dir: str
    rejected_dir: str
    warehouse: WarehouseConfig
    kafka: KafkaConfig
    consumer_group: str
    writer: WriterSpec
    event_time: EventTimeTask | None = None  # by event time: a file per Hive partition (etl.job.event_task)
    split: SplitTarget | None = None  # a topic routes share: its tables (etl.job.route_task); main_dir unused
    rollup_dirs: tuple[str, ...] = ()  # each of writer.rollups' partials folder of the batch's partition

    @property
    def placing(self) -> EventTimeTask:
        """What the event-time task places rows with; only a task by event time has it."""
        assert self.event_time is not None, "the event-time task is given the batch's Placement"
        return self.event_time


@dataclass(frozen=True)
class RangeResult:
    range: OffsetRange
    published: bool  # False: the file was already there (replay or a racing attempt)
    rows: int
    rejected: int
    unmatched: Mapping[str, int] = field(default_factory=dict)  # per joined dimension: rows with no match
    ignored_fields: Mapping[str, int] = field(default_factory=dict)  # writer-schema field the table lacks
    # The range's last record, the witness of the topic's identity (etl.model.identity); None on a
    # replay (the file was there: nothing was read) or when the range held no record.
    last_record: RecordFingerprint | None = None
    parts: tuple[Part, ...] = ()  # by event time: the range's file in each Hive partition
    max_event_ms: int | None = None


def range_chunks(task: RangeTask) -> Iterator[RawChunk]:
    """The task's range from Kafka, in chunks, read ahead of the caller."""
    r = task.range
    shared = reused_consumer(consumer_settings(task.kafka, task.consumer_group))  # a pack's (etl.job.packing)
    chunks = read_range(task.kafka, task.consumer_group, r.topic, r.partition, r.start, r.end,
                        with_keys=task.writer.key_column is not None,
                        with_headers=bool(task.writer.header_columns), shared=shared)
    return prefetched(chunks, READ_AHEAD_CHUNKS, name=f"read {r.topic}[{r.partition}]")


def packed_read(task: RangeTask) -> PackedRead:
    """What a pack's consumer assigns ahead for the task's range (etl.job.packing.run_each)."""
    r = task.range
    return PackedRead(consumer_settings(task.kafka, task.consumer_group), r.topic, r.partition, r.start, r.end)


def opened_tables(lookups: Mapping[str, Any] | None) -> dict[str, pa.Table]:
    """The batch's dimension tables from their Spark broadcasts (`lookups`: dimension name ->
    broadcast of the table's Arrow IPC bytes, fetched once per executor)."""
    return {name: from_ipc(handle.value) for name, handle in (lookups or {}).items()}


def last_record(chunk: RawChunk | None) -> RecordFingerprint | None:
    """The fingerprint of the last record of a range's last chunk; None when it read none."""
    if chunk is None:
        return None
    return fingerprint(chunk.offsets[-1], chunk.timestamps_ms[-1], chunk.values[-1])
