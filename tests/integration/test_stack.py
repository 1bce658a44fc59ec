"""Smoke tests: each local service really works, through the same clients the ETL uses."""
from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.harness import kafka

ROOT = Path(__file__).resolve().parents[2]


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


def listening_addresses(pid: int | None = None, port: int | None = None) -> set[str]:
    """The 'address:port' TCP sockets listening, of one process or on one port, from /proc
    (no ss or netstat needed)."""
    inodes = None
    if pid is not None:
        links = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
        inodes = {link[len("socket:["):-1] for link in links if link.startswith("socket:[")}
    found = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].split(":")
            if fields[3] != "0A" or (inodes is not None and fields[9] not in inodes):
                continue  # 0A: LISTEN
            if port is not None and int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address)  # 32-bit words in host (little-endian) order
            packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.add(f"{ipaddress.ip_address(socket.inet_ntop(family, packed))}:{int(port_hex, 16)}")
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.rpartition(":")[0])
    return (getattr(ip, "ipv4_mapped", None) or ip).is_loopback


def test_every_service_of_the_local_stack_listens_on_loopback_only(stack):
    # The metastore has no authentication: on the host's address anyone on the network
    # could drop the warehouse's tables. The Thrift Server's own Spark driver counts too.
    ports = [int(address.rpartition(":")[2]) for address in
             (stack.zk_hosts, stack.kafka_bootstrap, stack.metastore_uri, stack.thrift_url.rsplit("/", 1)[0])]
    thrift_pid = int((ROOT / ".stack" / "thriftserver.pid").read_text())
    listening = set().union(*(listening_addresses(port=p) for p in ports), listening_addresses(pid=thrift_pid))
    assert len(listening) >= len(ports) + 1, listening  # the driver's RPC port as well
    assert all(is_loopback(a) for a in listening), listening


LIST_DRIVER_SOCKETS = """
import os, sys
from etl.config import load_config
from etl.hive.spark import build_spark
spark = build_spark(load_config(sys.argv[1]))
print(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(), flush=True)
sys.stdin.readline()
"""


def test_a_local_run_drivers_listen_on_loopback_only(stack, new_topic, write_config):
    config = write_config(kafka={"topics": new_topic()}, spark={"spark.ui.enabled": "true"})
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    driver = subprocess.Popen([sys.executable, "-c", LIST_DRIVER_SOCKETS, str(config)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        jvm_pid = int(driver.stdout.readline())
        listening = listening_addresses(pid=jvm_pid)
    finally:
        driver.communicate("\n", timeout=60)
    assert len(listening) >= 2, listening  # the driver's RPC port and the web UI at least
    assert all(is_loopback(a) for a in listening), listening


def test_the_tests_producer_never_creates_a_topic(stack):
    """A broker with auto.create.topics.enable creates a topic that a metadata request names, when
    the client allows it. A producer the tests' process kept alive once re-created topics that
    tests had deleted on its periodic metadata refresh (`topics_regex` then saw a deleted topic
    listed again). The tests' producer never allows it, whatever the broker's setting."""
    topic = f"never-created-{uuid.uuid4().hex[:8]}"
    with pytest.raises(AssertionError, match="not delivered"):
        kafka.send(topic, {0: [b"{}"]}, bootstrap=stack.kafka_bootstrap, timeout=3)
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "etl-tests-topics"})
    try:
        assert topic not in consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()
