"""Produce test data to, and read offsets from, the local Apache Kafka broker; create, grow and
delete topics.

Usable without pytest: every helper takes `bootstrap`, defaulting to the local stack's
broker (127.0.0.1:$ETL_KAFKA_PORT, as started by scripts/local-stack).
"""
from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

PRODUCER_CONFIG = {
    "linger.ms": 5,
    "batch.size": 4_000_000,  # a few MB per request: ~1M small records in a few seconds
    "batch.num.messages": 100_000,
    "message.max.bytes": 16_000_000,  # large values (a few MB) are fine too
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_000_000,
    "enable.idempotence": True,  # a retried request must never duplicate test data
    # A broker with auto.create.topics.enable creates any topic a producer's metadata request
    # names (librdkafka's producer allows it by default): a producer the tests' process kept
    # re-created deleted topics. The local brokers disable it too (scripts/stack/kafka-node).
    "allow.auto.create.topics": False,
}


def default_bootstrap() -> str:
    return f"127.0.0.1:{os.environ.get('ETL_KAFKA_PORT', '9092')}"


@dataclass
class Produced:
    """What one send() delivered: (partition, offset) of each record in delivery order (when
    kept), how many records and value bytes, and how long it took."""

    delivered: list[tuple[int, int]] = field(default_factory=list)
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0


def send(topic: str, values_by_partition: Mapping[int, Iterable[bytes | None]],
         keys_by_partition: Mapping[int, Sequence[bytes | None]] | None = None, *, bootstrap: str | None = None,
         timeout: float = 120.0, keep_offsets: bool = True,
         timestamps_by_partition: Mapping[int, Sequence[int]] | None = None,
         headers_by_partition: Mapping[int, Sequence[list[tuple[str, bytes | None]] | None]] | None = None,
         client: Mapping[str, str] | None = None) -> Produced:
    """Write each partition's values (and keys, timestamps and headers, if given) in order; raise
    if any record was not delivered. Values may be generators: nothing is held in memory but the
    producer's queue (and, with keep_offsets, the delivered offsets). Once it returns, each
    partition's high watermark is its end (every record acknowledged). `client`: more librdkafka
    settings of the producer (a secured listener's: security.protocol, sasl.*, ssl.*).
    """
    keys_by_partition = keys_by_partition or {}
    for p, keys in keys_by_partition.items():
        values = values_by_partition.get(p, ())
        if isinstance(values, Sequence) and len(keys) != len(values):
            raise ValueError(f"partition {p}: {len(keys)} keys for {len(values)} values")
    producer = Producer({"bootstrap.servers": bootstrap or default_bootstrap(), **PRODUCER_CONFIG, **(client or {})})
    result, errors, started = Produced(), [], time.monotonic()

    def on_delivery(err, msg):
        if err is not None:
            errors.append(f"partition {msg.partition()}: {err}")
        else:
            result.records += 1
            if keep_offsets:
                result.delivered.append((msg.partition(), msg.offset()))

    sent: dict[int, int] = {}  # per partition: records handed to the producer, for their timestamps

    def put(partition: int, key: bytes | None, value: bytes | None) -> None:
        result.bytes += len(value) if value is not None else 0
        index, sent[partition] = sent.get(partition, 0), sent.get(partition, 0) + 1
        stamp = {"timestamp": timestamps_by_partition[partition][index]} if timestamps_by_partition else {}
        if headers_by_partition:
            stamp["headers"] = headers_by_partition[partition][index]
        while True:
            try:
                producer.produce(topic, value=value, partition=partition, key=key, on_delivery=on_delivery, **stamp)
                return
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)

    def flush() -> None:
        remaining = producer.flush(timeout)
        if remaining:
            raise AssertionError(f"{remaining} records to {topic} not delivered within {timeout}s")

    for p, values in values_by_partition.items():
        keys = keys_by_partition.get(p)
        for key, value in zip(keys, values) if keys is not None else zip(itertools.repeat(None), values):
            put(p, key, value)
        producer.poll(0)
    flush()
    if errors:
        raise AssertionError(f"{len(errors)} records to {topic} failed, e.g. {errors[:3]}")
    result.seconds = time.monotonic() - started
    return result


def produce(topic: str, values_by_partition: Mapping[int, Sequence[bytes | None]],
            keys_by_partition: Mapping[int, Sequence[bytes | None]] | None = None, *, bootstrap: str | None = None,
            timeout: float = 120.0, timestamps_by_partition: Mapping[int, Sequence[int]] | None = None,
            headers_by_partition: Mapping[int, Sequence[list[tuple[str, bytes | None]] | None]] | None = None,
            client: Mapping[str, str] | None = None) -> list[tuple[int, int]]:
    """send(), returning (partition, offset) of every record, in delivery order; with
    timestamps_by_partition, each record's CreateTime (ms); with headers_by_partition, each
    record's headers ([(name, value)], names may repeat; None for none); `client`: see send()."""
    result = send(topic, values_by_partition, keys_by_partition, bootstrap=bootstrap, timeout=timeout,
                  timestamps_by_partition=timestamps_by_partition, headers_by_partition=headers_by_partition,
                  client=client)
    expected = sum(len(values) for values in values_by_partition.values())
    assert len(result.delivered) == expected, f"{len(result.delivered)} delivery reports for {expected} records"
    return result.delivered


def watermarks(topic: str, *, bootstrap: str | None = None, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """{partition: (low, high)} for every partition of `topic`, straight from the broker, in two
    batched ListOffsets requests (a topic of 1,000 partitions is one round trip each)."""
    admin = AdminClient({"bootstrap.servers": bootstrap or default_bootstrap()})
    metadata = admin.list_topics(topic, timeout=timeout).topics[topic]
    if metadata.error is not None:
        raise RuntimeError(f"{topic}: {metadata.error}")
    partitions = sorted(metadata.partitions)
    marks: dict[int, list[int]] = {p: [0, 0] for p in partitions}
    for spec, index in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in partitions},
                                     request_timeout=max(timeout, 30))
        for tp, future in futures.items():
            marks[tp.partition][index] = future.result().offset
    return {p: (low, high) for p, (low, high) in marks.items()}


def create_topic(admin: AdminClient, name: str, partitions: int, timeout: float = 30.0,
                 config: Mapping[str, str] | None = None) -> str:
    """Create the topic (with topic-level `config`, e.g. cleanup.policy) and wait until its
    metadata shows every partition with a leader."""
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=dict(config or {}))], operation_timeout=timeout)
    futures[name].result(timeout=timeout)
    wait_for_partitions(admin, name, partitions, timeout)
    return name


def add_partitions(admin: AdminClient, name: str, total: int, timeout: float = 30.0) -> None:
    """Grow the live topic to `total` partitions and wait until its metadata shows them all."""
    from confluent_kafka.admin import NewPartitions
    admin.create_partitions([NewPartitions(name, total)], operation_timeout=timeout)[name].result(timeout=timeout)
    wait_for_partitions(admin, name, total, timeout)


def wait_for_partitions(admin: AdminClient, name: str, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.error is None and p.leader >= 0 for p in topic.partitions.values())):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name}: metadata does not show {partitions} partitions after {timeout:.0f}s")
        time.sleep(0.1)


def delete_topics(admin: AdminClient, names: list[str]) -> list[str]:
    """Delete the topics; returns why some could not be deleted (already gone, broker away):
    names are unique, so a leftover costs only its disk and cleanup goes on."""
    if not names:
        return []
    problems = []
    for name, future in admin.delete_topics(names, operation_timeout=30).items():
        try:
            future.result(timeout=30)
        except Exception as exc:  # reported to the caller, who says it or lets it be
            problems.append(f"{name}: {exc}")
    return problems
