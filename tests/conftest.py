"""Fixtures against the REAL local services started by scripts/local-stack (no mocks).

ZooKeeper, the Tansu Kafka broker, the Hive metastore and the Spark Thrift Server (the
analysts' JDBC endpoint on that metastore) are shared by all tests; every test gets its own
ZooKeeper root, topics and Hive table name, so tests never see each other's state. Ports
follow the script: ETL_ZK_PORT, ETL_KAFKA_PORT, ETL_METASTORE_PORT, ETL_THRIFT_PORT.
"""
from __future__ import annotations

import configparser
import functools
import itertools
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

# tests/ is on sys.path (rootdir conftest, no __init__.py): helpers import as top-level modules.
from kafka_helpers import produce as _produce
from kafka_helpers import watermarks as _watermarks

ROOT = Path(__file__).resolve().parents[1]
EVENTS_SCHEMA = ROOT / "warehouse_schema" / "events.sql"
HIVE_WAREHOUSE = ROOT / ".stack" / "hive-warehouse"  # the metastore's default location

# Spark executors must run this interpreter (the venv's), or they miss the project's packages.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@dataclass(frozen=True)
class Stack:
    zk_hosts: str  # 127.0.0.1:2181
    kafka_bootstrap: str  # 127.0.0.1:9092
    metastore_uri: str  # thrift://127.0.0.1:9083
    thrift_url: str  # jdbc:hive2://127.0.0.1:10000/default, the Spark Thrift Server (HiveServer2)


def _ports() -> tuple[int, int, int, int]:
    env = os.environ
    return (int(env.get("ETL_ZK_PORT", 2181)), int(env.get("ETL_KAFKA_PORT", 9092)),
            int(env.get("ETL_METASTORE_PORT", 9083)), int(env.get("ETL_THRIFT_PORT", 10000)))


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _zk_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


def _sanitize(name: str, allowed: str, max_len: int) -> str:
    """`name` with runs of characters outside `allowed` (a regex class body) replaced by '_'."""
    return re.sub(f"[^{allowed}]+", "_", name).strip("_")[:max_len] or "test"


@pytest.fixture(scope="session")
def stack() -> Stack:
    zk_port, kafka_port, metastore_port, thrift_port = _ports()
    if not (_zk_ok(zk_port) and _port_open(kafka_port) and _port_open(metastore_port)
            and _port_open(thrift_port)):  # the Thrift Server listens only once it can answer
        result = subprocess.run([str(ROOT / "scripts" / "local-stack"), "up"],
                                capture_output=True, text=True)
        if result.returncode != 0:
            pytest.fail(f"scripts/local-stack up failed:\n{result.stdout}\n{result.stderr}", pytrace=False)
    return Stack(
        zk_hosts=f"127.0.0.1:{zk_port}",
        kafka_bootstrap=f"127.0.0.1:{kafka_port}",
        metastore_uri=f"thrift://127.0.0.1:{metastore_port}",
        thrift_url=f"jdbc:hive2://127.0.0.1:{thrift_port}/default",
    )


@pytest.fixture(scope="session")
def thrift_url(stack) -> str:
    """The JDBC URL of the analysts' endpoint, the Spark Thrift Server (HiveServer2 protocol):
    jdbc:hive2://127.0.0.1:$ETL_THRIFT_PORT/default. Query it with scripts/beeline, or with
    the Hive JDBC driver through the `spark` fixture's JVM (see test_analysts_endpoint.py)."""
    return stack.thrift_url


@pytest.fixture(scope="session")
def spark(stack):
    """The session's one SparkSession, with Hive support through the shared metastore.

    Spark allows one active session per process: tests use this one instead of building
    their own (getOrCreate would hand back this session without their settings anyway).
    """
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("etl-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.hadoop.hive.metastore.uris", stack.metastore_uri)
        .config("spark.sql.warehouse.dir", f"file://{HIVE_WAREHOUSE}")
        .enableHiveSupport()
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def zk(stack):
    """A connected kazoo client, shared by the session (for setup, checks and cleanup)."""
    client = KazooClient(hosts=stack.zk_hosts, timeout=10)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_root(request, zk) -> str:
    """A fresh, not yet existing znode path for the test's `[zookeeper] root`; removed after."""
    path = f"/etl-tests/{_sanitize(request.node.name, 'A-Za-z0-9_-', 100)}-{uuid.uuid4().hex[:8]}"
    yield path
    try:
        zk.delete(path, recursive=True)
    except NoNodeError:
        pass


@pytest.fixture(scope="session")
def kafka_admin(stack) -> AdminClient:
    return AdminClient({"bootstrap.servers": stack.kafka_bootstrap})


@pytest.fixture
def new_topic(request, kafka_admin):
    """Factory: new_topic(partitions=4, name=None) -> the name of a new, ready topic.

    Names are unique and include the test's name; all topics created are deleted after the
    test. Tansu cannot add partitions later: create the topic with the count you need.
    """
    created: list[str] = []
    base = _sanitize(request.node.name, "A-Za-z0-9._-", 150)

    def create(partitions: int = 4, name: str | None = None) -> str:
        name = name or f"{base}-{uuid.uuid4().hex[:8]}"
        futures = kafka_admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                            operation_timeout=30)
        futures[name].result(timeout=30)
        created.append(name)
        deadline = time.monotonic() + 30
        while True:
            topic = kafka_admin.list_topics(name, timeout=10).topics.get(name)
            if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                    and all(p.error is None and p.leader >= 0 for p in topic.partitions.values())):
                return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name}: metadata does not show {partitions} partitions after 30s")
            time.sleep(0.1)

    yield create
    if created:
        for future in kafka_admin.delete_topics(created, operation_timeout=30).values():
            try:
                future.result(timeout=30)
            except Exception:  # already deleted by the test, or broker gone: nothing to clean
                pass


@pytest.fixture
def produce(stack):
    """produce(topic, values_by_partition, keys_by_partition=None) -> [(partition, offset)].

    See tests.kafka_helpers.produce: the high watermark afterwards equals the real end.
    """
    return functools.partial(_produce, bootstrap=stack.kafka_bootstrap)


@pytest.fixture
def watermarks(stack):
    """watermarks(topic) -> {partition: (low, high)}."""
    return functools.partial(_watermarks, bootstrap=stack.kafka_bootstrap)


@pytest.fixture
def hive_table_name() -> str:
    return f"t_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def warehouse_dir(tmp_path) -> Path:
    """The test's warehouse root (not created: the ETL creates what it needs)."""
    return tmp_path / "warehouse"


@pytest.fixture
def write_config(request, tmp_path, stack, zk_root, warehouse_dir, hive_table_name):
    """Factory: write_config(**sections) -> Path of an INI file for the ETL.

    Each keyword is a section: a dict whose values override or add keys (None removes the
    key), or None to drop the whole section. `kafka={"topics": ...}` is required.
    Example: write_config(job={"max_records_per_partition": "10"}, kafka={"topics": "a,b"}).
    """
    counter = itertools.count(1)
    job_name = _sanitize(request.node.name, "A-Za-z0-9_.-", 100)

    def write(**sections) -> Path:
        if "topics" not in (sections.get("kafka") or {}):
            raise TypeError("write_config: pass kafka={'topics': ...} (None to leave the key out)")
        config = {
            "job": {
                "name": job_name,
                "max_records_per_partition": "1000000",
                "starting_offsets": "earliest",
                "on_offset_out_of_range": "fail",
                "max_rejected_ratio": "0.5",
                "decoder": "json",
            },
            "kafka": {"bootstrap.servers": stack.kafka_bootstrap, "fetch_timeout_seconds": "20"},
            "zookeeper": {"hosts": stack.zk_hosts, "root": zk_root, "session_timeout_seconds": "10"},
            "warehouse": {"url": f"file://{warehouse_dir}"},
            "hive": {
                "metastore": stack.metastore_uri,
                "database": "etl_test",
                "table": hive_table_name,
                "schema": str(EVENTS_SCHEMA),
            },
            "retry": {"attempts": "3", "initial_wait_seconds": "0.2", "max_wait_seconds": "1"},
            "spark": {
                "spark.master": "local[2]",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
            },
        }
        for section, values in sections.items():
            if values is None:
                config.pop(section, None)
                continue
            target = config.setdefault(section, {})
            for key, value in values.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = str(value)
        parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
        parser.optionxform = str  # keep the case of Kafka and Spark keys
        parser.read_dict(config)
        n = next(counter)
        path = tmp_path / ("etl.ini" if n == 1 else f"etl-{n}.ini")
        with open(path, "w", encoding="utf-8") as f:
            parser.write(f)
        return path

    return write
