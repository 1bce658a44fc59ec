"""Reading one offset range from the real broker: exact bounds, chunking, keys, no progress."""
from __future__ import annotations

import pytest

from etl.config import KafkaConfig
from etl.errors import KafkaReadError
from etl.source import kafka as kafka_source
from etl.source.kafka import read_range


def _config(stack, fetch_timeout_seconds: float = 30.0) -> KafkaConfig:
    client = {"bootstrap.servers": stack.kafka_bootstrap}
    return KafkaConfig(topics=(), client=client, admin_client=client, fetch_timeout_seconds=fetch_timeout_seconds)


def _read(stack, topic, start, end, with_keys=False, **config):
    return list(read_range(_config(stack, **config), "etl-test-reader", topic, 0, start, end, with_keys))


def test_a_range_yields_exactly_its_records_in_order_across_many_consume_calls(stack, new_topic, produce,
                                                                               monkeypatch):
    topic = new_topic(partitions=1)
    produce(topic, {0: [f"v{i}".encode() for i in range(250)]}, {0: [f"k{i}".encode() for i in range(250)]})
    monkeypatch.setattr(kafka_source, "CONSUME_BATCH", 7)  # many calls, and a last one cut short

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
