"""Kafka 3.9, the newest 3.x, next to the suite's Kafka 4.4: a private 3.9 broker (one KRaft
node, scripts/stack/kafka-node with Kafka 3.9's jars and the shared broker's settings), started
once for this module and only when it runs.

On 3.9: a first batch SIGKILLed while a task writes; `etl recover` and the run after it; the
exactly-once oracle with `etl verify --deep`; and the analysts' read, through the Spark Thrift
Server. Then committed and aborted transactions: read_committed and the last stable offset, which
the planner reads through the protocol versions 3.9 speaks.

The one behaviour of the two that a job sees differently is KIP-937's limit on timestamps in
the future. Kafka 4 refuses a record stamped more than an hour ahead
(`log.message.timestamp.after.max.ms`, 1 h by default), while Kafka 3.9 accepts it by default.
So a record stamped 9999-12-30 reaches the job from 3.9, and the job loads it with its
timestamp. Kafka 4.4 at its default refuses it to the producer, and the job loads the rest. The
suite's brokers lift the limit, so that other tests can produce far dates. Here, 4.4's default
is set on the topic.
"""
from __future__ import annotations

import datetime as dt
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer

from tests.harness import kafka
from tests.harness.data import event, events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.jdbc import JdbcReader, offsets_reader
from tests.harness.oracle import check_exactly_once, expected_offsets
from tests.harness.recovery import kill_mid_write, recover_or_run
from tests.harness.services import PrivateBroker
from tests.harness.state import job_state

pytestmark = [pytest.mark.slow, pytest.mark.cell("kafka-3.9")]

DB = "etl_test"
KAFKA_4_DEFAULT_AFTER_MAX_MS = 3_600_000
FAR_AHEAD = dt.datetime(9999, 12, 30, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def broker_3_9(tmp_path_factory):
    started = time.monotonic()
    with PrivateBroker(tmp_path_factory.mktemp("kafka-3.9"), jars="kafka-3.9") as broker:
        print(f"[kafka-3.9] private broker up in {time.monotonic() - started:.1f}s")
        yield broker


def transaction(bootstrap: str, topic: str, ids: range, commit: bool) -> None:
    """One transaction of events `ids` on partition 0, committed or aborted."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"k39-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in ids:
        producer.produce(topic, event(i), partition=0)
    producer.flush(60)
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)


def test_a_batch_a_kill_mid_write_and_recovery_on_kafka_3_9_land_every_offset_once(
        broker_3_9, spark, zk, thrift_url, write_config, warehouse_dir):
    topic = broker_3_9.create_topic(f"kafka-3-9-{uuid.uuid4().hex[:8]}", 2)
    kafka.produce(topic, events_by_partition(2, 40), bootstrap=broker_3_9.bootstrap)
    config = write_config(kafka={"topics": topic, "bootstrap.servers": broker_3_9.bootstrap},
                          zookeeper={"session_timeout_seconds": "4"})  # a dead run's lock goes quickly
    kill_mid_write(config, topic, zk)  # the first batch: recover and the run after it are the batches
    kafka.produce(topic, events_by_partition(2, 25, first_id=80), bootstrap=broker_3_9.bootstrap)
    recover_or_run(config)

    report = check_exactly_once(offsets_reader(spark._jvm, thrift_url), config, expected_offsets(topic, {0: 65, 1: 65}),
                                warehouse_dir)
    assert report.rows == 130 and "verify --deep" in report.verify and " not " not in report.verify, report.describe()
    print(f"[kafka-3.9] {report.describe()}")


def test_committed_transactions_land_and_aborted_ones_never_on_kafka_3_9(broker_3_9, spark, thrift_url,
                                                                         write_config):
    topic = broker_3_9.create_topic(f"kafka-3-9-tx-{uuid.uuid4().hex[:8]}", 1)
    transaction(broker_3_9.bootstrap, topic, range(0, 20), commit=True)  # offsets 0-19, its marker 20
    transaction(broker_3_9.bootstrap, topic, range(100, 105), commit=False)  # 21-25, marker 26: never loaded
    transaction(broker_3_9.bootstrap, topic, range(200, 210), commit=True)  # 27-36, marker 37
    config = write_config(kafka={"topics": topic, "bootstrap.servers": broker_3_9.bootstrap})
    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    assert job_state(config).committed == {(topic, 0): 38}  # past the last marker
    from etl.config import load_config
    table = load_config(config).hive.table
    assert offsets_reader(spark._jvm, thrift_url)(DB, table) == expected_offsets(topic, {0: 20}) + Counter(
        {(topic, 0, offset): 1 for offset in range(27, 37)})
    verified = run_etl(config, "--deep", command="verify")
    assert verified.returncode == 0, verified.describe()


@pytest.mark.parametrize("release", ["3.9", "4.4"])
def test_a_record_stamped_far_ahead_reaches_the_job_from_kafka_3_9_and_is_refused_by_kafka_4_at_its_default(
        release, broker_3_9, spark, thrift_url, new_topic, write_config):
    if release == "3.9":  # the broker's own default: no limit
        bootstrap = broker_3_9.bootstrap
        topic = broker_3_9.create_topic(f"kafka-3-9-far-{uuid.uuid4().hex[:8]}", 1)
    else:
        bootstrap = kafka.default_bootstrap()
        topic = new_topic(partitions=1, config={"message.timestamp.after.max.ms": str(KAFKA_4_DEFAULT_AFTER_MAX_MS)})
    now_ms = int(time.time() * 1000)
    kafka.produce(topic, {0: [event(i) for i in range(5)]}, bootstrap=bootstrap,
                  timestamps_by_partition={0: [now_ms] * 5})
    far_ms = int(FAR_AHEAD.timestamp() * 1000)
    if release == "3.9":
        kafka.produce(topic, {0: [event(5)]}, bootstrap=bootstrap, timestamps_by_partition={0: [far_ms]})
    else:
        with pytest.raises(AssertionError, match="(?i)invalid timestamp|INVALID_TIMESTAMP"):
            kafka.produce(topic, {0: [event(5)]}, bootstrap=bootstrap, timestamps_by_partition={0: [far_ms]})

    config = write_config(kafka={"topics": topic, "bootstrap.servers": bootstrap})
    result = run_etl(config)
    assert result.returncode == 0, result.describe()
    from etl.config import load_config
    table = load_config(config).hive.table
    reader = JdbcReader(spark._jvm, thrift_url)
    connection = reader.connect()
    try:
        rows = reader.query(connection, f"SELECT kafka_offset, unix_millis(kafka_timestamp) FROM `{DB}`.`{table}`")
    finally:
        connection.close()
    stamps = {int(offset): int(millis) for offset, millis in rows}
    expected = {offset: now_ms for offset in range(5)}
    if release == "3.9":
        expected[5] = far_ms
    assert stamps == expected
    assert job_state(config).committed == {(topic, 0): len(expected)}
