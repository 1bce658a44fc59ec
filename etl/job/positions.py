"""Where every partition of the job's topics stands before a plan: its committed offset, what
Kafka holds, and whether the committed offset belongs to an earlier incarnation of its topic.

Read, never written: the driver plans from it under the job's lock, and `etl run --dry-run`
shows the same plan without the lock (etl.ops.dry_run)."""
from __future__ import annotations

import logging

from etl.model import identity
from etl.model.incarnations import with_incarnations
from etl.model.planner import PartitionPosition, Plan
from etl.source.kafka import KafkaMetadata
from etl.state.protocols import OffsetPart

log = logging.getLogger(__name__)


def planning_positions(store: OffsetPart, kafka: KafkaMetadata,
                       topics: tuple[str, ...]) -> tuple[list[PartitionPosition], dict[str, str | None]]:
    """The positions of `topics`' partitions, and the topic ids the broker reports now."""
    partitions = kafka.partitions(topics)
    marks = kafka.watermarks(partitions)
    committed = store.committed_offsets()
    topic_ids = kafka.topic_ids(topics)
    recreated = recreated_partitions(store, kafka, committed, marks, topic_ids)
    # Past `latest`: an open transaction under read_committed, or a log cut short (etl.model.planner)
    beyond = [tp for tp in partitions if tp in committed and committed[tp].value > marks[tp][1]]
    ends, stored_ids = (kafka.log_ends(beyond), store.topic_ids()) if beyond else ({}, {})
    positions = [PartitionPosition(t, p, _value(committed.get((t, p))), *marks[(t, p)], recreated.get((t, p), ""),
                                   ends.get((t, p)), identity.same_topic(stored_ids.get(t), topic_ids.get(t)))
                 for t, p in partitions]
    return positions, topic_ids


def tagged(plan: Plan, store: OffsetPart, topic_ids: dict[str, str | None]) -> Plan:
    """`plan` with the incarnation of its topic each range reads (etl.model.incarnations), by the
    committed state (cached by the store since planning_positions read it)."""
    current = {key: c.incarnation for key, c in store.committed_offsets().items()}
    return with_incarnations(plan, current, store.topic_ids(), topic_ids)


def _value(committed) -> int | None:
    return None if committed is None else committed.value


def recreated_partitions(store: OffsetPart, kafka: KafkaMetadata, committed: dict, marks: dict,
                         topic_ids: dict[str, str | None],
                         with_new_data_only: bool = True) -> dict[tuple[str, int], str]:
    """Partitions whose committed offset belongs to an earlier incarnation of their topic, with why.

    It asks `store` for the topic ids stored at commit and `kafka` for the records now at the
    committed offsets; etl.model.identity judges each witness. `marks` is (low, high) per partition.
    The topic id decides where the broker reports one. The last loaded record is checked where Kafka
    still holds its offset; the planner asks only for the partitions with something to read (a
    recreated partition with nothing to read costs nothing yet), recovery for all that it would
    rewrite."""
    stored_ids = store.topic_ids()
    reasons = {}
    for (topic, partition) in marks:
        reason = identity.topic_id_changed(topic, stored_ids.get(topic), topic_ids.get(topic))
        if reason and (topic, partition) in committed:
            reasons[(topic, partition)] = reason
    wanted = {tp: c.last.offset for tp, c in committed.items()
              if tp in marks and tp not in reasons and c.last is not None
              and marks[tp][0] <= c.last.offset < marks[tp][1]
              and (marks[tp][1] > c.value or not with_new_data_only)}
    for (topic, partition), found in kafka.records_at(wanted).items():
        stored = committed[(topic, partition)].last
        reason = identity.record_changed(topic, partition, stored, found)
        if reason:
            reasons[(topic, partition)] = reason
        elif found is None or found.offset != stored.offset:
            log.warning("%s[%d]: the last loaded record (offset %d) is gone from the log (compacted?); the record "
                        "check cannot tell whether the topic was recreated", topic, partition, stored.offset)
    return reasons
