"""[kafka] topics_regex on the real stack: the matching topics are loaded, a new matching topic is
picked up by the next run, a deleted one is reported by `etl status` and `etl verify` (a notice,
not a failure), and a matching topic whose name Hive would hide is never loaded, and reported."""
from __future__ import annotations

import json
import re
import time
import uuid

from confluent_kafka import Consumer

from etl.config import load_config
from etl.ops.run import run_job
from tests.harness import kafka
from tests.harness.data import events_by_partition
from tests.harness.etl_process import etl_command, run_etl
from tests.harness.oracle import check_exactly_once, expected_offsets, hive_reader, table_offsets

DB = "etl_test"


def prefix() -> str:
    return f"rx{uuid.uuid4().hex[:8]}"


def wait_until_gone(stack, topic: str, timeout: float = 30.0) -> None:
    """Until the broker's topic list no longer has it."""
    deadline = time.monotonic() + timeout
    while topic_listed(stack, topic):
        assert time.monotonic() < deadline, f"topic {topic} still listed {timeout:.0f}s after it was deleted"
        time.sleep(0.2)


def topic_listed(stack, topic: str) -> bool:
    """Asked as a consumer, whose metadata requests never ask the broker to create a topic."""
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": "etl-tests-topics"})
    try:
        return topic in consumer.list_topics(timeout=10).topics
    finally:
        consumer.close()


def test_a_regex_loads_its_topics_picks_up_a_new_one_and_reports_a_deleted_one(
        spark, stack, new_topic, produce, write_config, hive_table_name, kafka_admin, warehouse_dir):
    name = prefix()
    first, second = new_topic(2, f"{name}.first"), new_topic(1, f"{name}.second")
    ignored = new_topic(1, f"{name}-ignored")  # the regex must match the whole name
    for topic in (first, second, ignored):
        produce(topic, events_by_partition(2 if topic == first else 1, 30))
    config = write_config(kafka={"topics": None, "topics_regex": re.escape(name) + r"\..*"})

    assert run_job(load_config(config)) == 0
    expected = expected_offsets(first, {0: 30, 1: 30}) + expected_offsets(second, {0: 30})
    assert table_offsets(spark, DB, hive_table_name) == expected

    third = new_topic(1, f"{name}.third")  # created after the first run: picked up like a new topic
    produce(third, events_by_partition(1, 20))
    produce(first, events_by_partition(2, 5, first_id=900))
    assert run_job(load_config(config)) == 0
    expected = expected_offsets(first, {0: 35, 1: 35}) + expected_offsets(second, {0: 30}) \
        + expected_offsets(third, {0: 20})
    assert table_offsets(spark, DB, hive_table_name) == expected

    assert not kafka.delete_topics(kafka_admin, [second])
    wait_until_gone(stack, second)
    assert run_job(load_config(config)) == 0  # nothing new, and the deleted topic stops nothing

    status = etl_command(config, "status")
    assert status.returncode == 0, status.stderr
    assert f"topic not loaded: {second}: deleted from Kafka; its committed offsets of 1 partitions stay" \
           in status.stdout
    assert ignored not in status.stdout
    status_json = json.loads(etl_command(config, "status", "--json").stdout)
    assert [(t["topic"], t["reason"], t["committed"]) for t in status_json["topics_not_loaded"]] == \
           [(second, "deleted", {"0": 30})]
    assert {p["topic"] for p in status_json["partitions"]} == {first, third}

    verify = etl_command(config, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "OK, ranges are contiguous" in verify.stdout
    assert f"notice: topic not loaded: {second}: deleted from Kafka" in verify.stdout
    verify_json = json.loads(etl_command(config, "verify", "--json").stdout)
    assert verify_json["ok"] and verify_json["partitions"] == 4
    assert [(t["topic"], t["reason"]) for t in verify_json["topics_not_loaded"]] == [(second, "deleted")]

    # Every record of the three topics once, the deleted topic's files still tiling its committed
    # offsets, ZooKeeper consistent, and `etl verify --deep` exit 0.
    check_exactly_once(hive_reader(spark), config, expected, warehouse_dir)


def test_a_matching_topic_whose_name_hive_would_hide_is_never_loaded_and_is_reported(
        spark, new_topic, produce, write_config, hive_table_name):
    name = prefix()
    visible, hidden = new_topic(1, f"{name}.events"), new_topic(1, f"_{name}.schemas")
    produce(visible, events_by_partition(1, 10))
    produce(hidden, events_by_partition(1, 10))
    config = write_config(kafka={"topics": None, "topics_regex": f"_?{re.escape(name)}" + r"\..*"})

    run = run_etl(config)
    assert run.returncode == 0, run.stderr
    assert f"matches {hidden}, which the job never loads" in run.stderr
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(visible, {0: 10})

    status = etl_command(config, "status")
    assert f"topic not loaded: {hidden}: matches [kafka] topics_regex, but its name starts with '_'" in status.stdout
    status_json = json.loads(etl_command(config, "status", "--json").stdout)
    assert [(t["topic"], t["reason"]) for t in status_json["topics_not_loaded"]] == [(hidden, "hidden")]
