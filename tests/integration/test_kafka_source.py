"""Reading one offset range from the real broker: exact bounds, chunking, keys, no progress."""
from __future__ import annotations

import pytest

from etl.config import KafkaConfig
from etl.errors import KafkaReadError
from etl.source import ranges as kafka_ranges
from etl.source.ranges import read_range


def _config(stack, fetch_timeout_seconds: float = 30.0) -> KafkaConfig:
    client = {"bootstrap.servers": stack.kafka_bootstrap}
    return KafkaConfig(topics=(), client=client, admin_client=client, fetch_timeout_seconds=fetch_timeout_seconds)


def _read(stack, topic, start, end, with_keys=False, **config):
    return list(read_range(_config(stack, **config), "etl-test-reader", topic, 0, start, end, with_keys))


def test_a_range_yields_exactly_its_records_in_order_across_many_consume_calls(stack, new_topic, produce,
                                                                               monkeypatch):
    topic = new_topic(partitions=1)
    produce(topic, {0: [f"v{i}".encode() for i in range(250)]}, {0: [f"k{i}".encode() for i in range(250)]})
    monkeypatch.setattr(kafka_ranges, "CONSUME_BATCH", 7)  # many calls, and a last one cut short

    chunks = _read(stack, topic, 13, 201, with_keys=True)

    offsets = [o for c in chunks for o in c.offsets]
    assert offsets == list(range(13, 201))
    assert [v for c in chunks for v in c.values] == [f"v{i}".encode() for i in range(13, 201)]
    assert [k for c in chunks for k in c.keys] == [f"k{i}".encode() for i in range(13, 201)]
    assert all(t > 0 for c in chunks for t in c.timestamps_ms)
    assert max(len(c.offsets) for c in chunks) <= 7


def test_a_range_that_ends_at_the_log_end_is_read_whole(stack, new_topic, produce):
    topic = new_topic(partitions=1)
    produce(topic, {0: [b"%d" % i for i in range(40)]})

    chunks = _read(stack, topic, 0, 40)

    assert [o for c in chunks for o in c.offsets] == list(range(40))
    assert all(c.keys is None for c in chunks)


def test_a_range_beyond_the_log_fails_after_the_fetch_timeout_and_names_the_offset(stack, new_topic, produce):
    topic = new_topic(partitions=1)
    produce(topic, {0: [b"a", b"b", b"c"]})

    with pytest.raises(KafkaReadError, match=rf"{topic}\[0\]: no progress for 2.0s at offset 3 while reading "
                                             r"\[1, 10\).*next run resumes it"):
        _read(stack, topic, 1, 10, fetch_timeout_seconds=2.0)


def test_a_packs_ranges_read_together_each_yield_exactly_their_records(stack, new_topic, produce):
    """A pack's consumer (etl.source.reused) assigns every announced partition at once and holds
    what arrives for ranges not yet read: each range still yields exactly [start, end), whatever
    lies past it (later records, a transaction's commit marker), in any order of reading; a
    partition's second range (a repair batch's) is assigned at its turn, and a range nobody
    announced is read too."""
    from confluent_kafka import Producer
    from etl.source.kafka import consumer_settings
    from etl.source.reused import PackedRead, reused_consumer, reusing_consumers
    topic = new_topic(partitions=5)
    produce(topic, {p: [b"%d-%d" % (p, i) for i in range(6)] for p in range(4)})
    transactional = Producer({"bootstrap.servers": stack.kafka_bootstrap, "transactional.id": f"{topic}-tx"})
    transactional.init_transactions()
    transactional.begin_transaction()
    for i in range(3):
        transactional.produce(topic, b"tx-%d" % i, partition=4)
    transactional.commit_transaction()  # records 0-2, its marker at 3
    produce(topic, {4: [b"after-4", b"after-5"]})
    config = _config(stack)
    settings = consumer_settings(config, "etl-test-reader")
    # partition 4's range ends on the marker; partition 2 has two ranges
    planned = [(4, 0, 4), (2, 0, 3), (0, 0, 3), (2, 3, 6), (1, 2, 4)]
    read = []
    with reusing_consumers([PackedRead(settings, topic, p, s, e) for p, s, e in planned]):
        for p, s, e in [*planned[:2], (3, 1, 5), *planned[2:]]:
            chunks = read_range(config, "etl-test-reader", topic, p, s, e, False, shared=reused_consumer(settings))
            read.append((p, [(o, v) for c in chunks for o, v in zip(c.offsets, c.values)]))
    expected = [(p, [(o, b"%d-%d" % (p, o)) for o in range(s, e)]) for p, s, e in [*planned[1:2], (3, 1, 5),
                                                                                   *planned[2:]]]
    assert read == [(4, [(o, b"tx-%d" % o) for o in range(3)]), *expected]
