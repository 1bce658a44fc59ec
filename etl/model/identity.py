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

Incarnations. Loaded on from a recreated topic (on_offset_out_of_range = earliest), a partition
enters the topic's next incarnation, whose offsets restart and overlap the old ones'. Its files
carry the incarnation's tag (etl.model.naming), so that both incarnations' files stay in the table
under distinct names and are checked apart. The first incarnation the job loaded has the tag ""
(plain names: every file written before tags existed is of it); a later one is tagged with the
first INCARNATION_LENGTH characters of its topic id, as Kafka prints it (base64url), so that an
operator finds the tag in `kafka-topics --describe`. Kafka draws topic ids at random: two
incarnations of one topic share a tag with a chance of about 2^-60, the only way two
incarnations could be mixed up. Where the broker reports no topic id the tag is drawn at random,
as long. A partition's tag, and the incarnations it left (each one's origin and end), are stored
with its committed offset (etl.state.znodes.CommittedOffset).
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from etl.model.naming import INCARNATION_LENGTH


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


@dataclass(frozen=True)
class Incarnation:
    """The offsets [origin, end) one incarnation of a partition committed; `tag` "" is the first."""

    tag: str
    origin: int | None  # None: committed by a version that did not record the origin
    end: int

    def to_json(self) -> list:
        return [self.tag, self.origin, self.end]

    @classmethod
    def from_json(cls, raw: list) -> "Incarnation":
        tag, origin, end = raw
        return cls(str(tag), None if origin is None else int(origin), int(end))


_BASE64URL = str.maketrans("+/", "-_")


def incarnation_tag(topic_id: str | None) -> str:
    """The tag of a new incarnation: its topic id's first characters in base64url (as Kafka's tools
    print it; confluent-kafka prints standard base64, whose '+' and '/' no file name may carry),
    or random without one."""
    if topic_id:
        return topic_id[:INCARNATION_LENGTH].translate(_BASE64URL)
    return secrets.token_urlsafe(INCARNATION_LENGTH)[:INCARNATION_LENGTH]
