"""Produce test data to, and read offsets from, the local Kafka-protocol broker (Tansu).

Usable without pytest: every helper takes `bootstrap`, defaulting to the local stack's
broker (127.0.0.1:$ETL_KAFKA_PORT, as started by scripts/local-stack).
"""
from __future__ import annotations

import os
from typing import Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

PRODUCER_CONFIG = {
    "linger.ms": 5,
    "batch.size": 4_000_000,  # a few MB per request: ~1M small records in a few seconds
    "batch.num.messages": 100_000,
    "message.max.bytes": 16_000_000,  # large values (a few MB) are fine too
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
    "enable.idempotence": True,  # a retried request must never duplicate test data
}


def default_bootstrap() -> str:
    return f"127.0.0.1:{os.environ.get('ETL_KAFKA_PORT', '9092')}"


def produce(
    topic: str,
    values_by_partition: Mapping[int, Sequence[bytes | None]],
    keys_by_partition: Mapping[int, Sequence[bytes | None]] | None = None,
    *,
    bootstrap: str | None = None,
    timeout: float = 120.0,
) -> list[tuple[int, int]]:
    """Write each partition's values (and keys, if given) in order; return (partition, offset)
    of every record, in delivery order. Raises if any record was not delivered.

    Tansu reports a partition's end offset (high watermark) as the base offset of its last
    record batch + 1, so after a bulk produce it can be short by up to one batch. To make it
    exact, the last record of each partition is sent as a batch of its own, after a flush.
    """
    keys_by_partition = keys_by_partition or {}
    for p, keys in keys_by_partition.items():
        if len(keys) != len(values_by_partition.get(p, ())):
            raise ValueError(f"partition {p}: {len(keys)} keys for {len(values_by_partition.get(p, ()))} values")
    producer = Producer({"bootstrap.servers": bootstrap or default_bootstrap(), **PRODUCER_CONFIG})
    delivered: list[tuple[int, int]] = []
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"partition {msg.partition()}: {err}")
        else:
            delivered.append((msg.partition(), msg.offset()))

    def send(partition: int, index: int) -> None:
        keys = keys_by_partition.get(partition)
        kwargs = dict(value=values_by_partition[partition][index], partition=partition,
                      key=keys[index] if keys is not None else None, on_delivery=on_delivery)
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)

    def flush() -> None:
        remaining = producer.flush(timeout)
        if remaining:
            raise AssertionError(f"{remaining} records to {topic} not delivered within {timeout}s")

    partitions = [p for p, values in values_by_partition.items() if len(values) > 0]
    for p in partitions:
        for i in range(len(values_by_partition[p]) - 1):
            send(p, i)
    flush()
    for p in partitions:
        send(p, len(values_by_partition[p]) - 1)
    flush()
    if errors:
        raise AssertionError(f"{len(errors)} records to {topic} failed, e.g. {errors[:3]}")
    expected = sum(len(values_by_partition[p]) for p in partitions)
    assert len(delivered) == expected, f"{len(delivered)} delivery reports for {expected} records"
    return delivered


def watermarks(topic: str, *, bootstrap: str | None = None, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)} for every partition of `topic`, straight from the broker."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap or default_bootstrap(),
        "group.id": "etl-tests-watermarks",
        "enable.auto.commit": False,
    })
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        return {
            p: tuple(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout, cached=False))
            for p in sorted(metadata.partitions)
        }
    finally:
        consumer.close()
