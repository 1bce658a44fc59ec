"""`etl reset-offsets --to-datetime`: offsets found by the records' timestamps (Kafka's
offsets_for_times), on the real broker, with the guards of every reset (the lock, the dry run
previewed without --execute, a backwards reset over loaded files only with --move-aside), and mirrored to the
job's consumer group once ZooKeeper holds them."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from etl.config import load_config
from etl.errors import Refused, RefusedUntilDone
from etl.ops.acting import Act
from etl.ops.run import run_job
from etl.ops.reset import ResetOptions, reset_offsets
from etl.ops.verify import run_verify
from etl.state.store import ZkStateStore
from tests.harness.data import events_by_partition
from tests.harness.kafka_tools import delete_groups, group_offsets
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
T0 = datetime(2026, 11, 20, 10, 0, tzinfo=timezone.utc)
T0_MS = int(T0.timestamp() * 1000)


@pytest.fixture
def group(stack):
    name = f"etl-reset-by-time-{uuid.uuid4().hex[:8]}"  # [kafka] consumer_group: a name of the test's own
    yield name
    delete_groups([name], bootstrap=stack.kafka_bootstrap)


def committed(cfg) -> dict:
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: offset.value for key, offset in store.offsets.committed_offsets().items()}


def test_a_reset_to_a_time_starts_each_partition_at_its_first_record_at_or_after_it(
        spark, stack, new_topic, produce, write_config, hive_table_name, group):
    topic = new_topic(partitions=3)
    values = events_by_partition(3, 30)
    produce(topic, {0: values[0], 1: values[1], 2: values[2][:5]}, timestamps_by_partition={
        0: [T0_MS + i * 1000 for i in range(30)],  # one a second: T0 + 10 s is offset 10
        1: [T0_MS + i * 500 for i in range(30)],  # two a second: T0 + 10 s is offset 20
        2: [T0_MS - 60_000 + i for i in range(5)]})  # all a minute before T0: none at or after
    config = write_config(kafka={"topics": topic, "consumer_group": group}, job={"max_records_per_partition": "10"})
    cfg, out = load_config(config), []
    at = T0 + timedelta(seconds=10)

    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as other:  # a run holds the lock
        assert other.session.acquire_lock() is None
        with pytest.raises(RefusedUntilDone, match="a run holds the job lock"):
            reset_offsets(cfg, ResetOptions(at, Act.EXECUTE), out=out.append)
    out.clear()
    assert reset_offsets(cfg, ResetOptions(at), out=out.append) == 0  # a preview: shown, nothing changed
    assert out == [f"--to-datetime {at.isoformat()}: each partition's first offset whose record's timestamp is at "
                   f"or after it, or its end where it holds none",
                   f"{topic}[0]: None -> 10", f"{topic}[1]: None -> 20", f"{topic}[2]: None -> 5",
                   "preview: nothing changed; pass --execute to apply"]
    assert committed(cfg) == {} and group_offsets(group, bootstrap=stack.kafka_bootstrap) == {}

    assert reset_offsets(cfg, ResetOptions(at, Act.EXECUTE), out=print) == 0
    assert committed(cfg) == {(topic, 0): 10, (topic, 1): 20, (topic, 2): 5}
    assert group_offsets(group, bootstrap=stack.kafka_bootstrap) == committed(cfg)  # mirrored once applied
    assert run_job(cfg) == 0
    assert table_offsets(spark, DB, hive_table_name) == (
        expected_offsets(topic, {0: 30}, start=10) + expected_offsets(topic, {1: 30}, start=20))

    # Backwards, to T0 + 5 s (offsets 5 and 10): over the loaded files, so only with --move-aside.
    earlier, out = T0 + timedelta(seconds=5), []
    with pytest.raises(Refused, match="Pass --move-aside") as refused:
        reset_offsets(cfg, ResetOptions(earlier, Act.EXECUTE), out=out.append)
    assert refused.value.exit_code == 2
    assert reset_offsets(cfg, ResetOptions(earlier, Act.EXECUTE, move_aside=True), out=print) == 0
    assert committed(cfg) == {(topic, 0): 5, (topic, 1): 10, (topic, 2): 5}
    assert group_offsets(group, bootstrap=stack.kafka_bootstrap) == committed(cfg)
    assert run_job(cfg) == 0
    assert table_offsets(spark, DB, hive_table_name) == (  # each record from the new offsets on, once
        expected_offsets(topic, {0: 30}, start=5) + expected_offsets(topic, {1: 30}, start=10))
    assert group_offsets(group, bootstrap=stack.kafka_bootstrap) == {(topic, 0): 30, (topic, 1): 30, (topic, 2): 5}
    report = run_verify(cfg, deep=True)
    assert report.ok, report.render()
