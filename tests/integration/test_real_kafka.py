"""What only a real Kafka broker does, on Apache Kafka (the shared broker; a private one where a
test kills it): partitions added to a live topic, retention deleting records below a committed
offset, a compacted topic's offsets without records, transactions committed, aborted and still
open, and the broker SIGKILLed mid-batch. (A topic deleted and recreated: test_pipeline.py and
test_operator_mistakes.py, by its topic id.)"""
from __future__ import annotations

import json
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from etl.config import load_config
from etl.errors import EXIT_RETRYABLE
from etl.ops.run import run_job
from etl.ops.verify import run_verify
from etl.source.kafka import KafkaMetadata
from tests.harness import kafka
from tests.harness.data import DataSource, event, events_by_partition
from tests.harness.etl_process import EtlProcess, etl_command, run_etl
from tests.harness.kills import CLEANUP
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets
from tests.harness.services import PrivateBroker
from tests.harness.state import job_state

DB = "etl_test"


def run_in_process(config) -> int:
    return run_job(load_config(config))


def offsets_in_log(bootstrap: str, topic: str, partition: int, timeout: float = 60.0) -> list[int]:
    """Every offset a read_committed consumer is served in the partition, to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    offsets, deadline = [], time.monotonic() + timeout
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error() is None:
                offsets.append(message.offset())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return offsets
            else:
                raise AssertionError(f"{topic}[{partition}]: {message.error()}")
        raise AssertionError(f"{topic}[{partition}]: no end of log within {timeout}s")
    finally:
        consumer.close()


def rows(spark, table) -> Counter:
    return table_offsets(spark, DB, table)


# -------------------------------------------------------------------------------------------
# 1. Partitions added to a live topic
# -------------------------------------------------------------------------------------------
def test_partitions_added_to_a_live_topic_are_loaded_from_their_first_offset(
        spark, new_topic, produce, write_config, hive_table_name, kafka_admin):
    """The job knows the topic (offsets committed for 2 partitions) when it grows to 4: the two
    new partitions start at their earliest offset even under starting_offsets = latest, which
    only concerns topics the job has never committed."""
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 20))
    config = write_config(kafka={"topics": topic}, job={"starting_offsets": "latest"})
    assert run_in_process(config) == 0  # a new topic under `latest`: its ends recorded, nothing loaded
    produce(topic, events_by_partition(2, 10, first_id=100))
    assert run_in_process(config) == 0
    loop = KafkaMetadata(load_config(config).kafka, load_config(config).retry, "loop")  # a `--loop` run's, kept
    assert loop.watermarks(loop.partitions((topic,))) == {(topic, 0): (0, 30), (topic, 1): (0, 30)}
    kafka.add_partitions(kafka_admin, topic, 4)
    produce(topic, events_by_partition(4, 15, first_id=1000))
    try:  # its admin client's metadata still has 2 partitions where its consumer's has 4
        assert loop.watermarks(loop.partitions((topic,)))[(topic, 3)] == (0, 15)
    finally:
        loop.close()
    assert run_in_process(config) == 0

    assert job_state(config).committed == {(topic, 0): 45, (topic, 1): 45, (topic, 2): 15, (topic, 3): 15}
    expected = expected_offsets(topic, {0: 45, 1: 45}, start=20) + expected_offsets(topic, {2: 15, 3: 15})
    assert rows(spark, hive_table_name) == expected  # 110 rows, each once
    assert run_verify(load_config(config), deep=True).ok


# -------------------------------------------------------------------------------------------
# 2. Retention deletes records below the committed offset: on_offset_out_of_range for real
# -------------------------------------------------------------------------------------------
def delete_records_below(admin, topic: str, partition: int, offset: int) -> None:
    """Move the partition's log start to `offset`, as retention deleting its old segments does."""
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], operation_timeout=30)
    for future in futures.values():
        assert future.result(timeout=30).low_watermark == offset


def test_records_deleted_below_the_committed_offset_follow_the_out_of_range_policy(
        spark, new_topic, produce, write_config, hive_table_name, kafka_admin, watermarks):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 20))
    config = write_config(kafka={"topics": topic})
    assert run_in_process(config) == 0
    produce(topic, events_by_partition(2, 20, first_id=100))  # [20, 40) in both, never loaded
    delete_records_below(kafka_admin, topic, 0, 30)  # 10 of them gone from partition 0
    assert watermarks(topic) == {0: (30, 40), 1: (0, 40)}

    refused = run_etl(config)  # on_offset_out_of_range = fail, the default
    assert refused.returncode == 1, refused.describe()
    assert f"{topic}[0] committed offset 20 is outside [30, 40]" in refused.stderr, refused.describe()
    assert "on_offset_out_of_range = earliest" in refused.stderr and "Nothing was written" in refused.stderr
    assert job_state(config).committed == {(topic, 0): 20, (topic, 1): 20}
    assert rows(spark, hive_table_name) == expected_offsets(topic, {0: 20, 1: 20})

    skipping = write_config(kafka={"topics": topic}, job={"on_offset_out_of_range": "earliest"})
    assert run_in_process(skipping) == 0
    assert job_state(config).committed == {(topic, 0): 40, (topic, 1): 40}
    expected = expected_offsets(topic, {0: 20, 1: 40}) + expected_offsets(topic, {0: 40}, start=30)
    assert rows(spark, hive_table_name) == expected  # 70 rows: [20, 30) of partition 0 was lost to retention
    status = etl_command(config, "status")
    assert "from committed 20 to 30" in status.stdout, status.describe()
    assert run_verify(load_config(config), deep=True).ok  # the recorded skip explains the gap


def test_segments_deleted_by_retention_below_the_committed_offset_stop_the_job_naming_them(
        spark, new_topic, produce, write_config, hive_table_name, kafka_admin, watermarks):
    """Retention itself, not a request. Offsets [0, 30) carry timestamps of an hour ago, [30, 40)
    of now, each produce request in a segment of its own (segment.ms = 100); retention.ms then
    lowered to 10 minutes deletes the segments below 30 and keeps the active one (Kafka deletes
    an active segment too once its newest record is past retention)."""
    topic = new_topic(partitions=1, config={"segment.ms": "100"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    produce(topic, events_by_partition(1, 20), timestamps_by_partition={0: [hour_ago] * 20})
    config = write_config(kafka={"topics": topic})
    assert run_in_process(config) == 0
    produce(topic, events_by_partition(1, 10, first_id=100), timestamps_by_partition={0: [hour_ago] * 10})
    produce(topic, events_by_partition(1, 10, first_id=200))
    retention = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    kafka_admin.incremental_alter_configs([retention])[retention].result(30)
    deadline = time.monotonic() + 120
    while watermarks(topic)[0][0] < 30:
        assert time.monotonic() < deadline, f"retention left {watermarks(topic)} after 120 s"
        time.sleep(0.5)
    assert watermarks(topic) == {0: (30, 40)}

    refused = run_etl(config)
    assert refused.returncode == 1, refused.describe()
    assert f"{topic}[0] committed offset 20 is outside [30, 40]" in refused.stderr, refused.describe()
    assert job_state(config).committed == {(topic, 0): 20}
    assert rows(spark, hive_table_name) == expected_offsets(topic, {0: 20})


# -------------------------------------------------------------------------------------------
# 3. A log-compacted topic: offsets with no record
# -------------------------------------------------------------------------------------------
COMPACTING = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
              "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}


def compacted(topic: str, bootstrap: str, keys: int, rounds: int, bad: int) -> list[int]:
    """Write `rounds` values for each of `keys` keys (the value at offset `bad` undecodable), roll
    the segment with one more record, and wait for the log cleaner to compact the rolled segment:
    the offsets that still hold a record."""
    values = [b"{not json" if i == bad else event(i) for i in range(keys * rounds)]
    keyed = [f"k{i % keys}".encode() for i in range(keys * rounds)]
    kafka.produce(topic, {0: values}, {0: keyed}, bootstrap=bootstrap)
    time.sleep(0.3)  # past segment.ms: the next record starts a new segment, and the old one is cleanable
    kafka.produce(topic, {0: [event(9999)]}, {0: [b"roll"]}, bootstrap=bootstrap)
    deadline = time.monotonic() + 120
    while len(left := offsets_in_log(bootstrap, topic, 0)) > keys + 1:
        assert time.monotonic() < deadline, f"the log cleaner left {len(left)} records after 120 s"
        time.sleep(1)
    return left


def test_a_compacted_topics_gaps_agree_in_ranges_verify_and_the_rejected_accounting(
        spark, new_topic, stack, write_config, hive_table_name):
    topic = new_topic(partitions=1, config=COMPACTING)
    left = compacted(topic, stack.kafka_bootstrap, keys=8, rounds=4, bad=27)
    assert left == list(range(24, 33))  # 33 offsets, 9 records: the last value of each key, and the roll

    # Ranges of 7 offsets: the first three hold no record at all, the fourth starts in the gap.
    config = write_config(kafka={"topics": topic}, job={"max_records_per_partition": "7"})
    outcome = run_etl(config)
    assert outcome.returncode == 0, outcome.describe()
    assert job_state(config).committed == {(topic, 0): 33}
    main, rejected = rows(spark, hive_table_name), rows(spark, f"{hive_table_name}_rejected")
    assert rejected == Counter({(topic, 0, 27): 1})
    assert main == Counter({(topic, 0, o): 1 for o in left if o != 27})  # 8 rows + 1 rejected: every record once
    report = run_verify(load_config(config), deep=True)
    assert report.ok, report.render()  # no "missing rows" for the 24 compacted offsets


# -------------------------------------------------------------------------------------------
# 4. Transactional producers: committed, aborted, and one still open while batches run
# -------------------------------------------------------------------------------------------
def transactional(bootstrap: str, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(60)
    return producer


def in_transaction(producer: Producer, topic: str, ids: range, end: str | None) -> None:
    """One transaction of events `ids` on partition 0, ended by `end`: commit, abort, or None
    (left open, its records flushed to the log)."""
    producer.begin_transaction()
    for i in ids:
        producer.produce(topic, event(i), partition=0)
    producer.flush(60)
    if end == "commit":
        producer.commit_transaction(60)
    elif end == "abort":
        producer.abort_transaction(60)


def test_transactions_aborted_never_land_and_an_open_one_neither_stalls_nor_skips(
        spark, new_topic, stack, write_config, hive_table_name, watermarks):
    topic = new_topic(partitions=1)
    first, second = transactional(stack.kafka_bootstrap, "first"), transactional(stack.kafka_bootstrap, "second")
    in_transaction(first, topic, range(0, 10), "commit")  # offsets 0-9, its marker at 10
    in_transaction(first, topic, range(100, 105), "abort")  # 11-15, marker 16
    in_transaction(second, topic, range(200, 205), None)  # 17-21: open while the job runs
    in_transaction(first, topic, range(300, 310), "commit")  # 22-31, marker 32: committed, after the open one
    assert watermarks(topic) == {0: (0, 33)}

    config = write_config(kafka={"topics": topic, "fetch_timeout_seconds": "5"})
    during = run_etl(config)
    assert during.returncode == 0, during.describe()  # the open transaction stalls nothing
    # Planned up to the last stable offset (17, the open transaction's first): nothing past it
    # is read yet, so nothing after the open transaction is skipped when it commits.
    assert job_state(config).committed == {(topic, 0): 17}
    assert rows(spark, hive_table_name) == expected_offsets(topic, {0: 10})

    second.commit_transaction(60)  # 17-21 committed, marker 33
    after = run_etl(config)
    assert after.returncode == 0, after.describe()
    assert job_state(config).committed == {(topic, 0): 34}
    expected = Counter({(topic, 0, o): 1 for o in [*range(0, 10), *range(17, 22), *range(22, 32)]})
    assert rows(spark, hive_table_name) == expected  # 25 rows; the aborted 11-15 and the 4 markers never
    assert not rows(spark, f"{hive_table_name}_rejected")
    report = run_verify(load_config(config), deep=True)
    assert report.ok, report.render()


def test_a_switch_to_read_committed_past_an_open_transaction_waits_for_it_and_never_loads_twice(
        spark, new_topic, stack, write_config, hive_table_name, watermarks):
    """A run under read_uncommitted commits past a transaction still open; the next, under
    read_committed (and `earliest`, the production choice), finds the committed offset past the
    last stable offset: the same topic, so it waits for the transaction instead of restarting at 0."""
    topic = new_topic(partitions=1)
    first, second = transactional(stack.kafka_bootstrap, "first"), transactional(stack.kafka_bootstrap, "second")
    in_transaction(first, topic, range(0, 10), "commit")
    in_transaction(second, topic, range(200, 205), None)  # open (the markers' offsets vary: not asserted)
    in_transaction(first, topic, range(300, 310), "commit")
    [(_, end)] = watermarks(topic).values()  # 25 records, 2 markers
    assert end == 27
    uncommitted = write_config(kafka={"topics": topic, "fetch_timeout_seconds": "5",
                                      "isolation.level": "read_uncommitted"})
    assert run_etl(uncommitted).returncode == 0
    assert job_state(uncommitted).committed == {(topic, 0): 27}
    loaded = rows(spark, hive_table_name)
    assert len(loaded) == 25 and set(loaded.values()) == {1}  # the open transaction's 5 too

    committed = write_config(kafka={"topics": topic, "fetch_timeout_seconds": "5"},
                             job={"on_offset_out_of_range": "earliest"})
    waiting = run_etl(committed)
    assert waiting.returncode == 0, waiting.describe()
    assert "waiting for the transaction open at offset" in waiting.stderr, waiting.describe()
    assert job_state(committed).committed == {(topic, 0): 27} and rows(spark, hive_table_name) == loaded
    status = etl_command(committed, "status", "--json")
    [partition] = json.loads(status.stdout)["partitions"]
    assert (partition["lag"], partition["waiting"]) == (0, True), status.describe()

    second.commit_transaction(60)  # marker 27: the last stable offset passes the committed one
    after = run_etl(committed)
    assert after.returncode == 0, after.describe()
    assert job_state(committed).committed == {(topic, 0): 28} and rows(spark, hive_table_name) == loaded


# -------------------------------------------------------------------------------------------
# 5. The broker SIGKILLed mid-batch, restarted on its folder
# -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_broker_sigkilled_mid_batch_fails_the_run_and_after_its_restart_the_rerun_is_exactly_once(
        spark, tmp_path, write_config, warehouse_dir):
    with PrivateBroker(tmp_path / "broker") as broker:
        topic = broker.create_topic(f"killed-{uuid.uuid4().hex[:8]}", 2)
        source = DataSource(topic, 2, lambda t, v: kafka.produce(t, v, bootstrap=broker.bootstrap))
        source.produce(200)
        config = write_config(kafka={"topics": topic, "bootstrap.servers": broker.bootstrap,
                                     "fetch_timeout_seconds": "5"},
                              retry={"attempts": "2", "initial_wait_seconds": "0.2", "max_wait_seconds": "1"})
        # Long enough to be seen and the broker killed.
        run = EtlProcess(config, fault="state:PLANNED", action="sleep:4")
        try:
            run.wait_until(lambda: job_state(config).last_state == "PLANNED", 300, "batch 1 PLANNED", poll=0.2)
            broker.kill()
            code = run.wait(600)
        finally:
            run.kill(CLEANUP)
            run.reap()
        assert code == EXIT_RETRYABLE, run.describe()
        assert "is the broker up?" in run.stderr, run.describe()
        state = job_state(config)
        assert (state.last_state, state.committed, state.lock_held) == ("PLANNED", {}, False)

        broker.start()  # the same folder: the log written before the kill is recovered
        source.produce(50)  # and more after it, for the next batch
        rerun = run_etl(config)
        assert rerun.returncode == 0 and "batch 1 (resumed) COMMITTED" in rerun.stdout, rerun.describe()
        oracle = check_exactly_once(hive_reader(spark), config, source.expected, warehouse_dir)
        print(f"broker SIGKILLed at PLANNED: exit {code}; restarted, rerun {rerun.seconds:.1f}s; {oracle.describe()}")
