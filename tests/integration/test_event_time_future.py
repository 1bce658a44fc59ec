"""Far-future event times and the watermark, on the real services (issue 26, defect 3).

A sentinel such as 9999-12-30 or a producer whose clock runs ahead must not move the event-time
watermark: it would mark hours that are still being loaded, and make every later row late. An
event time more than [hive] max_future_seconds ahead of the batch's planning time does not
advance the watermark; the row is written to its partition (future_data = write) or rejected
with the reason "future" (reject). A watermark pinned by state an older release committed (its
stored maximum far ahead) stops pinning: such a maximum is ignored on read and replaced by the
partition's next batch.

Event times here are the real current time, so the current hour is open whenever the test runs:
the watermark (the latest sane event time, delay 0) never passes its end.
"""
from __future__ import annotations

import datetime as dt
import json

import pytest

from etl.config import load_config
from etl.ops.run import run_job
from etl.ops.verify import run_verify
from etl.sink.markers import MARKER_NAME
from etl.state.store import ZkStateStore
from tests.harness.spark import rejected_errors
from tests.harness.state import job_state
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
SENTINEL = "9999-12-30T00:00:00Z"
SENTINEL_MS = int(dt.datetime(9999, 12, 30, tzinfo=dt.timezone.utc).timestamp() * 1000)


def now_event(i: int) -> tuple[bytes, dt.datetime]:
    at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    return json.dumps({"event_id": i, "ts": at.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode(), at


def sentinel_event(i: int) -> bytes:
    return json.dumps({"event_id": i, "ts": SENTINEL}).encode()


def hour_folder(warehouse_dir, table: str, at: dt.datetime):
    return warehouse_dir / f"{DB}.db" / table / f"dt={at:%Y-%m-%d}" / f"hour={at:%H}"


def event_config(write_config, topic: str, **hive):
    return write_config(kafka={"topics": topic}, job={"max_rejected_ratio": "1"},
                        hive={"partition_by": "column:ts", "success_markers": "true",
                              "success_marker_delay_seconds": "0", **hive})


def stored_max(config) -> dict:
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return {key: offset.max_event_ms for key, offset in store.offsets.committed_offsets().items()}


@pytest.mark.parametrize("future_data", ["write", "reject"])
def test_a_far_future_event_time_does_not_mark_the_open_hour_nor_make_later_rows_late(
        future_data, spark, new_topic, produce, write_config, hive_table_name, warehouse_dir):
    topic = new_topic(partitions=1)
    first, at = now_event(0)
    produce(topic, {0: [first, sentinel_event(1)]})
    config = event_config(write_config, topic, late_data="reject",
                          **({} if future_data == "write" else {"future_data": future_data}))  # write: the default
    assert run_job(load_config(config)) == 0
    assert not (hour_folder(warehouse_dir, hive_table_name, at) / MARKER_NAME).exists()  # the hour is still open
    assert stored_max(config)[(topic, 0)] == int(at.timestamp() * 1000)  # the sentinel did not move it

    second, later = now_event(2)
    produce(topic, {0: [second]})
    assert run_job(load_config(config)) == 0
    main = table_offsets(spark, DB, hive_table_name)
    rejected = table_offsets(spark, DB, f"{hive_table_name}_rejected")
    assert main + rejected == expected_offsets(topic, {0: 3})
    assert (topic, 0, 2) in main, rejected_errors(spark, DB, hive_table_name)  # a valid row of the open hour: kept
    if future_data == "write":
        assert main == expected_offsets(topic, {0: 3}) and not rejected
        assert (warehouse_dir / f"{DB}.db" / hive_table_name / "dt=9999-12-30" / "hour=00").is_dir()
    else:
        assert rejected == expected_offsets(topic, {0: 2}, start=1)
        errors = rejected_errors(spark, DB, hive_table_name)
        assert len(errors) == 1 and errors[0].startswith("future: event time 9999-12-30"), errors
    assert not (hour_folder(warehouse_dir, hive_table_name, later) / MARKER_NAME).exists()
    assert all(p.late == 0 for p in job_state(config).last_batch.event_time.partitions)
    assert run_verify(load_config(config), deep=False).ok


def test_a_watermark_pinned_by_an_older_release_recovers(spark, new_topic, produce, write_config, hive_table_name,
                                                         warehouse_dir):
    """The older release had no bound: max_future_seconds of 10,000 years behaves as it did, and
    commits the sentinel as the partition's latest event time. The default bound then un-pins it."""
    topic = new_topic(partitions=1)
    first, at = now_event(0)
    produce(topic, {0: [first, sentinel_event(1)]})
    unbounded = event_config(write_config, topic, max_future_seconds=str(10_000 * 366 * 86400))
    assert run_job(load_config(unbounded)) == 0
    assert stored_max(unbounded)[(topic, 0)] == SENTINEL_MS  # pinned, as the older release left it
    assert (hour_folder(warehouse_dir, hive_table_name, at) / MARKER_NAME).exists()  # the open hour was marked

    config = event_config(write_config, topic)  # the default bound
    second, later = now_event(2)
    produce(topic, {0: [second]})
    assert run_job(load_config(config)) == 0
    # Not late.
    touched = job_state(config).last_batch.event_time.partitions
    assert touched and all(p.late == 0 for p in touched)
    assert stored_max(config)[(topic, 0)] == int(later.timestamp() * 1000)  # the pinned maximum is replaced
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 3})
