"""Where every partition of the job's topics stands before a plan: its committed offset, what
Kafka holds, and whether the committed offset belongs to an earlier incarnation of its topic.

Read, never written: the driver plans from it under the job's lock, and `etl run --dry-run`
shows the same plan without the lock (etl.ops.dry_run)."""
from __future__ import annotations

from etl.model import identity
from etl.model.planner import PartitionPosition
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import OffsetPart


def planning_positions(store: OffsetPart, kafka: KafkaMetadata,
                       topics: tuple[str, ...]) -> tuple[list[PartitionPosition], dict[str, str | None]]:
    """The positions of `topics`' partitions, and the topic ids the broker reports now."""
    partitions = kafka.partitions(topics)
    marks = kafka.watermarks(partitions)
    committed = store.committed_offsets()
    topic_ids = kafka.topic_ids(topics)
    recreated = identity.recreated_partitions(store, kafka, committed, marks, topic_ids)
    positions = [PartitionPosition(t, p, _value(committed.get((t, p))), *marks[(t, p)], recreated.get((t, p), ""))
                 for t, p in partitions]
    return positions, topic_ids


def _value(committed) -> int | None:
    return None if committed is None else committed.value
