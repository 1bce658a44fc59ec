"""Is the topic the job reads still the topic it committed offsets of?

A topic deleted and recreated restarts its offsets at 0. If the new incarnation already holds
more records than the committed offset, the offsets look valid and the job would go on from the
old position, skipping the new topic's first records without a word. Two witnesses tell the
incarnations apart:

- the topic id (a UUID) that brokers since Kafka 2.8 report, stored per topic at commit;
- where the broker reports none, a fingerprint of each partition's last committed record
  (its offset, timestamp and a hash of its value), stored at commit and compared at plan with
  the record Kafka now holds at that offset.

Log compaction may remove the fingerprinted record. Kafka then serves the next record with a
higher offset: the fingerprint cannot decide, so the check is skipped for that partition (logged)
and the topic id, when there is one, still decides. The next commit fingerprints a newer record.

Here are the witnesses and how each judges; etl.job.positions.recreated_partitions asks the store
and Kafka for them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RecordFingerprint:
    offset: int
    timestamp_ms: int
    digest: str  # of the value

    def to_json(self) -> list:
        return [self.offset, self.timestamp_ms, self.digest]

    @classmethod
    def from_json(cls, raw: list | None) -> "RecordFingerprint | None":
        return None if raw is None else cls(int(raw[0]), int(raw[1]), str(raw[2]))


def fingerprint(offset: int, timestamp_ms: int, value: bytes | None) -> RecordFingerprint:
    return RecordFingerprint(offset, timestamp_ms, hashlib.blake2b(value or b"", digest_size=8).hexdigest())


def topic_id_changed(topic: str, stored: str | None, current: str | None) -> str | None:
    """Why the topic is another incarnation, judged by its id; None if the ids do not say so."""
    if stored and current and stored != current:
        return f"topic {topic!r} was deleted and recreated: its topic id is {current}, the offsets were committed " \
               f"for topic id {stored}"
    return None


def same_topic(stored: str | None, current: str | None) -> bool:
    """Whether the topic id says the topic is the one the offsets were committed for (False when
    either id is unknown: then it cannot say)."""
    return bool(stored) and stored == current


def record_changed(topic: str, partition: int, stored: RecordFingerprint | None,
                   found: RecordFingerprint | None) -> str | None:
    """Why the partition is another incarnation, judged by its last committed record; None when
    the record is the same, or when the fingerprint cannot decide (no fingerprint stored, or the
    record was compacted away: Kafka served a later offset or nothing)."""
    if stored is None or found is None or found.offset != stored.offset:
        return None
    if found != stored:
        return (f"{topic}[{partition}]: the record at offset {stored.offset} is not the one the job loaded "
                f"(timestamp {found.timestamp_ms} vs {stored.timestamp_ms}, value hash {found.digest} vs "
                f"{stored.digest}): the topic was deleted and recreated")
    return None
