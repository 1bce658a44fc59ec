"""One Kafka consumer for the small ranges that one Spark task reads one after the other
(etl.job.packing), with every range's partition assigned at once.

Creating a librdkafka consumer costs about 5 ms, and assigning one to a partition, fetching its
few records and unassigning it another 10 ms: a task of five hundred such ranges spent about 6 s
reading 1,500 records. Within `reusing_consumers(reads)`, the ranges of a task share one
consumer per set of settings (one per consumer group), assigned from the start to every
announced range's partition at the range's start (a partition's first range: a later one of the
same partition is assigned at its turn), so that librdkafka fetches them all together
(1,500 records of 500 partitions in about 50 ms). Records that arrive for a range not yet read
are held for it, and at most one record at or past its end (which shows a gap at the end of the
range); so what is held never exceeds the pack's planned records, which packing keeps small.
A range's partition is unassigned when its read ends. Fetches wait at most
REUSED_FETCH_WAIT_MS at the end of a log (librdkafka's default is 500 ms), and a [kafka]
fetch.wait.max.ms wins.
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

REUSED_FETCH_WAIT_MS = "10"
_REUSED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("etl_reused_consumers", default=None)
Partition = tuple[str, int]


@dataclass(frozen=True)
class PackedRead:
    """A range a pack will read: its consumer's settings, its partition and [start, end)."""
    settings: Mapping[str, object]
    topic: str
    partition: int
    start: int
    end: int


def _key(settings: Mapping[str, object]) -> tuple:
    return tuple(sorted((name, str(value)) for name, value in settings.items()))


class PackConsumer:
    """A pack's consumer for one set of settings. `open` a range's partition, `take` its
    messages, `release` it; messages of the pack's other partitions are held for their turn."""

    def __init__(self, settings: Mapping[str, object], reads: Sequence[PackedRead] = ()):
        self._consumer = Consumer({"fetch.wait.max.ms": REUSED_FETCH_WAIT_MS, **settings})
        self._ranges: dict[Partition, tuple[int, int]] = {}
        self._held: dict[Partition, collections.deque] = {}
        self._past_end: set[Partition] = set()
        if reads:
            self._assign(reads)

    def open(self, topic: str, partition: int, start: int, end: int) -> None:
        """Ready to read [start, end) of the partition: as announced, or assigned now."""
        if self._ranges.get((topic, partition)) != (start, end):
            if (topic, partition) in self._ranges:
                self.release(topic, partition)
            self._assign([PackedRead({}, topic, partition, start, end)])

    def take(self, topic: str, partition: int, num_messages: int, timeout: float) -> list[Message]:
        """Up to num_messages of the partition's messages: the held ones, else one consume()
        whose messages are held by partition. An error of no range being read (a broker down, a
        topic the ACLs refuse) goes to the range being read, as a consumer of its own would
        return it; a partition's end of log never does."""
        held = self._held[(topic, partition)]
        strays = []
        if not held:
            for message in self._consumer.consume(num_messages=num_messages, timeout=timeout):
                if not self._hold(message) and _stray_error(message):
                    strays.append(message)
        return strays + [held.popleft() for _ in range(min(num_messages, len(held)))]

    def release(self, topic: str, partition: int) -> None:
        """The partition's range is read (or given up): no more fetches, nothing more held."""
        self._consumer.incremental_unassign([TopicPartition(topic, partition)])
        del self._ranges[(topic, partition)], self._held[(topic, partition)]
        self._past_end.discard((topic, partition))

    def close(self) -> None:
        self._consumer.close()

    def _assign(self, reads: Sequence[PackedRead]) -> None:
        self._consumer.incremental_assign([TopicPartition(r.topic, r.partition, r.start) for r in reads])
        for r in reads:
            self._ranges[(r.topic, r.partition)] = (r.start, r.end)
            self._held[(r.topic, r.partition)] = collections.deque()

    def _hold(self, message: Message) -> bool:
        """Keep the message for its range; False when it is of no range open here."""
        partition = (message.topic(), message.partition())
        if partition not in self._ranges:
            return False  # a released partition's, fetched before it was released, or of none
        offset = message.offset()
        if message.error() is None and offset is not None and offset >= self._ranges[partition][1]:
            if partition in self._past_end:
                return True  # past the range: one such record tells the read where the log goes on
            self._past_end.add(partition)
        self._held[partition].append(message)
        return True


def _stray_error(message: Message) -> bool:
    error = message.error()
    return error is not None and error.code() != KafkaError._PARTITION_EOF


@contextlib.contextmanager
def reusing_consumers(reads: Sequence[PackedRead] = ()) -> Iterator[None]:
    """Ranges read in this block (in this thread) share consumers, each assigned at once to the
    partitions of `reads` made with its settings; all closed at the block's end."""
    consumers: dict = {}
    for settings in {_key(r.settings): r.settings for r in reads}.values():
        consumers[_key(settings)] = PackConsumer(settings, _first_of_each_partition(
            r for r in reads if _key(r.settings) == _key(settings)))
    token = _REUSED.set(consumers)
    try:
        yield
    finally:
        _REUSED.reset(token)
        for consumer in consumers.values():
            consumer.close()


def _first_of_each_partition(reads: Iterable[PackedRead]) -> list[PackedRead]:
    """The reads to assign ahead: a partition's first range only. A repair batch rewrites each
    range of a merged file, so one partition's ranges may share a pack, and librdkafka refuses a
    partition twice in one assignment: a later range of it is assigned when its turn comes."""
    first: dict[Partition, PackedRead] = {}
    for read in reads:
        first.setdefault((read.topic, read.partition), read)
    return list(first.values())


def reused_consumer(settings: Mapping[str, object]) -> PackConsumer | None:
    """The block's consumer for `settings`, made on first use; None outside reusing_consumers()."""
    consumers = _REUSED.get()
    if consumers is None:
        return None
    key = _key(settings)
    if key not in consumers:
        consumers[key] = PackConsumer(settings)
    return consumers[key]
