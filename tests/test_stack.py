"""Smoke tests: each local service really works, through the same clients the ETL uses."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition


def test_zookeeper_create_and_read(zk, zk_root):
    zk.create(f"{zk_root}/offsets/t-0", b"42", makepath=True)
    transaction = zk.transaction()
    transaction.set_data(f"{zk_root}/offsets/t-0", b"43")
    transaction.create(f"{zk_root}/offsets/t-1", b"7")
    results = transaction.commit()
    assert not any(isinstance(r, Exception) for r in results), results
    assert zk.get(f"{zk_root}/offsets/t-0")[0] == b"43"
    assert sorted(zk.get_children(f"{zk_root}/offsets")) == ["t-0", "t-1"]


def test_kafka_produce_watermarks_and_consume(stack, new_topic, produce, watermarks):
    topic = new_topic(partitions=3)
    values = {p: [f"p{p}-{i}".encode() for i in range(10)] for p in range(3)}
    keys = {p: [f"k{i}".encode() for i in range(10)] for p in range(3)}

    delivered = produce(topic, values, keys)

    assert sorted(delivered) == [(p, o) for p in range(3) for o in range(10)]
    assert watermarks(topic) == {p: (0, 10) for p in range(3)}
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "test-stack",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        consumer.seek(TopicPartition(topic, 1, 5))  # seek works on an assigned partition
        got: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 25 and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=1):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append((msg.key(), msg.value()))
    finally:
        consumer.close()
    assert got[0] == list(zip(keys[0], values[0]))
    assert got[1] == list(zip(keys[1][5:], values[1][5:]))
    assert got[2] == list(zip(keys[2], values[2]))


def test_spark_uses_the_hive_metastore(spark, stack):
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"
    assert spark.conf.get("spark.hadoop.hive.metastore.uris") == stack.metastore_uri  # not embedded Derby
    spark.sql("CREATE DATABASE IF NOT EXISTS etl_test")
    assert "etl_test" in [row[0] for row in spark.sql("SHOW DATABASES").collect()]
