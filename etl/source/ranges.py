"""Reading one offset range of one partition: what a Spark task asks of Kafka (etl.job.range_task),
and `etl verify --deep`.

Offsets live in ZooKeeper: the consumer never commits and has no reset policy, so a range that is
no longer in the log is an error, not a silent jump. A range's end is where its position reaches
`end`: offsets may have gaps (compaction, transaction markers).
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Callable, Iterator, Mapping

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from etl.config import KafkaConfig
from etl.errors import KafkaReadError, KafkaStalled, OffsetOutOfRange
from etl.source.access import not_authorized
from etl.source.chunk import RawChunk, chunk_of
from etl.source.kafka import RETRYABLE_KAFKA_CODES, consumer_settings
from etl.source.reused import PackConsumer

log = logging.getLogger(__name__)

CONSUME_BATCH = 10_000


def read_range(config: KafkaConfig, group: str, topic: str, partition: int, start: int, end: int,
               with_keys: bool, with_headers: bool = False, shared: PackConsumer | None = None) -> Iterator[RawChunk]:
    """Yield the records of [start, end) in offset order, in chunks.

    Offsets may have gaps (compaction, transaction markers), so the read ends when the
    position reaches `end`, not after end - start records. It never waits forever: no
    progress for fetch_timeout_seconds is an error, and the task fails. `shared`: the pack's
    consumer (etl.source.reused), whose partition is released at the end, not closed."""
    if shared is not None:
        shared.open(topic, partition, start, end)
        try:
            yield from _consume_until(functools.partial(shared.take, topic, partition), config, topic, partition,
                                      start, end, with_keys, with_headers, only_this_partition=True)
        finally:
            shared.release(topic, partition)
        return
    consumer = Consumer(consumer_settings(config, group))
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        yield from _consume_until(lambda n, timeout: consumer.consume(num_messages=n, timeout=timeout), config,
                                  topic, partition, start, end, with_keys, with_headers)
    finally:
        consumer.close()


def _consume_until(fetch: Callable[[int, float], list], config, topic, partition, start, end, with_keys,
                   with_headers, only_this_partition: bool = False) -> Iterator[RawChunk]:
    position, deadline = start, time.monotonic() + config.fetch_timeout_seconds
    while position < end:
        # Never ask for more than the range still needs: consume() waits out its timeout
        # until it has num_messages, which would cost every range's last call a full second.
        messages = fetch(min(CONSUME_BATCH, end - position), 1.0)
        records, log_ends = _records_of(messages, topic, partition, position, end, only_this_partition, config.client)
        if records and records[-1].offset() >= end:
            records = [m for m in records if m.offset() < end]
            position = end
        if records:
            yield chunk_of(records, with_keys, with_headers)
            position = max(position, records[-1].offset() + 1)
        if log_ends:
            position = end  # the log ends at or past `end`: what was left of the range was a gap
        if records or position >= end:
            deadline = time.monotonic() + config.fetch_timeout_seconds
        elif time.monotonic() > deadline:
            raise KafkaStalled(f"{topic}[{partition}]: no progress for {config.fetch_timeout_seconds}s at "
                               f"offset {position} while reading [{start}, {end}); is the broker up? "
                               f"The batch stays open and the next run resumes it")


def _records_of(messages: list, topic: str, partition: int, position: int, end: int, only_this_partition=False,
                client: Mapping[str, str] | None = None) -> tuple[list, bool]:
    """The records among `messages`, and whether an end-of-log event at or past `end` came.

    Most calls return only records; events are looked at one by one only when there are some.
    `only_this_partition`: a shared consumer's (small ranges), whose records of an earlier
    assignment are never this range's, should librdkafka still hand one out."""
    if only_this_partition:
        messages = [m for m in messages if m.error() is not None or (m.partition() == partition and m.topic() == topic)]
    if all(error is None for error in map(Message.error, messages)):
        return messages, False
    records = [m for m in messages if _is_record(m, topic, partition, position, end, client or {})]
    return records, any(_is_eof_at_or_past(m, end) for m in messages)


def _is_eof_at_or_past(message, end: int) -> bool:
    error = message.error()
    return error is not None and error.code() == KafkaError._PARTITION_EOF and message.offset() >= end


def _is_record(message, topic: str, partition: int, position: int, end: int, client: Mapping[str, str]) -> bool:
    error = message.error()
    if error is None:
        return True
    if error.code() == KafkaError._PARTITION_EOF:
        return False
    if error.code() == KafkaError._AUTO_OFFSET_RESET or error.code() == KafkaError.OFFSET_OUT_OF_RANGE:
        raise OffsetOutOfRange(f"{topic}[{partition}]: offset {position} of the planned range [.., {end}) "
                               f"is no longer in Kafka ({error.str()}); the plan cannot be completed as "
                               f"recorded. Run `etl recover` for the options")
    if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:  # not fatal to librdkafka, which would try forever
        raise not_authorized(client, "READ", "topic", message.topic() or topic)
    if error.code() in RETRYABLE_KAFKA_CODES or not error.fatal():
        log.warning("%s[%d]: transient consumer error: %s", topic, partition, error)
        return False
    raise KafkaReadError(f"{topic}[{partition}]: {error.str()}")
