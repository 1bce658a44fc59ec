"""Kafka's own tools see the job: after each commit the committed offsets are mirrored to the
consumer group etl-<job> (etl.source.group_mirror), so that `kafka-consumer-groups --describe`,
from the broker's own jars, shows the job's offsets and lag. ZooKeeper stays the truth: a mirror
that Kafka refuses is a WARNING, the run succeeds, and the next run mirrors again."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer

from etl.config import load_config
from etl.ops.run import run_job
from etl.state.store import ZkStateStore
from tests.harness.data import events_by_partition
from tests.harness.etl_process import run_etl
from tests.harness.kafka_tools import GroupRow, delete_groups, describe_group, group_offsets


@pytest.fixture
def job_group(stack):
    """group(config) -> the consumer group the job mirrors to; deleted after the test."""
    groups: list[str] = []

    def group(config) -> str:
        groups.append(load_config(config).kafka.consumer_group)
        return groups[-1]
    yield group
    delete_groups(groups, bootstrap=stack.kafka_bootstrap)


def committed(config) -> dict:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: offset.value for key, offset in store.offsets.committed_offsets().items()}


def test_kafka_consumer_groups_shows_the_jobs_offsets_and_its_lag(
        spark, stack, new_topic, produce, write_config, job_group):
    topic = new_topic(partitions=2)
    produce(topic, events_by_partition(2, 20))
    config = write_config(kafka={"topics": topic})
    group = job_group(config)
    assert group == f"etl-{load_config(config).job.name}"
    assert run_job(load_config(config)) == 0
    produce(topic, {0: events_by_partition(1, 7, first_id=100)[0], 1: events_by_partition(1, 3, first_id=200)[0]})
    output, rows = describe_group(group, bootstrap=stack.kafka_bootstrap)
    assert rows == {(topic, 0): GroupRow(current_offset=20, log_end_offset=27, lag=7),
                    (topic, 1): GroupRow(current_offset=20, log_end_offset=23, lag=3)}, output
    assert f"Consumer group '{group}' has no active members" in output  # committed without joining it


def test_a_mirror_kafka_refuses_is_a_warning_and_the_next_run_mirrors_again(
        spark, stack, new_topic, produce, write_config, job_group):
    topic = new_topic(partitions=1)
    produce(topic, events_by_partition(1, 10))
    config = write_config(kafka={"topics": topic})
    group = job_group(config)
    # Another consumer joined the group under the job's group name: Kafka refuses a commit from
    # outside its generation (UNKNOWN_MEMBER_ID) as long as that member stays.
    squatter = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        squatter.subscribe([topic])
        _wait_for_assignment(squatter)
        ran = run_etl(config)
        assert ran.returncode == 0, ran.describe()
        assert "WARNING" in ran.stderr and f"were not mirrored to the Kafka consumer group {group}" in ran.stderr, \
            ran.stderr[-3000:]
        assert "another consumer uses its name" in ran.stderr, ran.stderr[-3000:]
        assert committed(config) == {(topic, 0): 10}  # ZooKeeper, the truth, moved all the same
        assert group_offsets(group, bootstrap=stack.kafka_bootstrap) == {}
    finally:
        squatter.close()  # leaves the group: it is empty again
    assert run_job(load_config(config)) == 0  # nothing new to load: the run mirrors what ZooKeeper holds
    assert group_offsets(group, bootstrap=stack.kafka_bootstrap) == {(topic, 0): 10}


def _wait_for_assignment(consumer: Consumer, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not consumer.assignment():
        assert time.monotonic() < deadline, f"no partition assigned to the group's member within {limit:.0f}s"
        consumer.poll(0.5)
