"""Finished-partition markers (`_SUCCESS`) on the real services.

A batch's Hive partition is the hour its driver planned it in (UTC), so a test needs an hour
that has closed: the run's clock is frozen at a chosen instant (run_job's `clock`, the one clock
that both partitions batches and closes windows), a few hours back, and later runs look
at that hour from a later instant. Everything else is real: Kafka, ZooKeeper, Spark, the
metastore and the warehouse folder.
"""
from __future__ import annotations

import datetime as dt
import json

import pytest

from etl.config import load_config
from etl.errors import ConfigError, InjectedFault
from etl.ops.run import run_job
from etl.model.batch import utc_now
from etl.model.partitioning import PLANNING_TIME_HOURLY
from etl.ops.verify import run_verify
from etl.sink.markers import LEDGER_KEY, MARKER_NAME, Ledger, MarkerError, window_of
from etl.state.store import ZkStateStore
from tests.harness.data import events_by_partition
from tests.harness.etl_process import etl_command
from tests.harness.oracle import expected_offsets, table_offsets

DB = "etl_test"
# Far enough back that the real clock is hours past the window's end, whatever the delay here.
T0 = utc_now().replace(minute=30, second=0, microsecond=0) - dt.timedelta(hours=3)
WINDOW_END = T0.replace(minute=0) + dt.timedelta(hours=1)
PARTITION = {"dt": T0.strftime("%Y-%m-%d"), "hour": T0.strftime("%H")}


def run_at(monkeypatch, config, at: dt.datetime | None = None, fault: str | None = None) -> int:
    """`etl run` in this process, with the run's clock frozen at `at` (None: the real clock),
    raising InjectedFault at the fault point `fault`."""
    if fault:
        monkeypatch.setenv("ETL_FAULT_POINT", fault)
        monkeypatch.setenv("ETL_FAULT_ACTION", "raise")
    else:
        monkeypatch.delenv("ETL_FAULT_POINT", raising=False)
    return run_job(load_config(config), clock=utc_now if at is None else (lambda: at))


def marker(warehouse_dir, table: str):
    return warehouse_dir / f"{DB}.db" / table / f"dt={PARTITION['dt']}" / f"hour={PARTITION['hour']}" / MARKER_NAME


def markers_config(write_config, topic: str, delay: int, **sections):
    return write_config(kafka={"topics": topic}, **sections,
                        hive={"success_markers": "true", "success_marker_delay_seconds": str(delay)})


def newest_batch(config):
    cfg = load_config(config)
    with ZkStateStore(cfg.zookeeper, cfg.job.name, cfg.retry) as store:
        return store.batches.last_batch()[0]


def loaded_topic(new_topic, produce, with_reject: bool = False) -> str:
    topic = new_topic(partitions=2)
    values = events_by_partition(2, 20)
    if with_reject:
        values[1][5] = b"{not json"
    produce(topic, values)
    return topic


def test_markers_off_write_nothing_even_for_a_closed_window(
        monkeypatch, spark, new_topic, produce, write_config, warehouse_dir):
    topic = loaded_topic(new_topic, produce)
    config = write_config(kafka={"topics": topic})  # no success_markers: off by default
    assert run_at(monkeypatch, config, T0) == 0
    assert run_at(monkeypatch, config) == 0  # hours after the window closed, nothing new
    assert newest_batch(config).partition_values == PARTITION
    assert list(warehouse_dir.rglob(MARKER_NAME)) == []
    assert LEDGER_KEY not in newest_batch(config).extra


def test_a_closed_window_is_marked_after_its_delay_by_a_run_with_no_new_data(
        monkeypatch, spark, new_topic, produce, write_config, warehouse_dir, hive_table_name):
    topic = loaded_topic(new_topic, produce, with_reject=True)
    config = markers_config(write_config, topic, delay=600)
    main, rejected = marker(warehouse_dir, hive_table_name), marker(warehouse_dir, f"{hive_table_name}_rejected")

    assert run_at(monkeypatch, config, T0) == 0  # committed, but its window is open
    assert not main.exists() and not rejected.exists()
    assert run_at(monkeypatch, config, WINDOW_END + dt.timedelta(minutes=5)) == 0  # closed, within the delay
    assert not main.exists() and not rejected.exists()
    status = etl_command(config, "status")
    assert status.returncode == 0, status.stderr
    assert (f"success markers: on (delay 600s); partitions awaiting _SUCCESS: 1 (dt={PARTITION['dt']}/"
            f"hour={PARTITION['hour']})") in status.stdout

    assert run_at(monkeypatch, config, WINDOW_END + dt.timedelta(minutes=11)) == 0  # due: no batch, just markers
    assert main.exists() and rejected.exists()
    body = json.loads(main.read_text())
    assert body["partition"] == f"dt={PARTITION['dt']}/hour={PARTITION['hour']}"
    assert body["window_end"] == WINDOW_END.isoformat()
    assert Ledger.of(newest_batch(config)).unmarked == ()
    assert not list(warehouse_dir.rglob("_tmp.*"))

    before = main.stat().st_mtime_ns
    assert run_at(monkeypatch, config) == 0  # idempotent: nothing listed, nothing rewritten
    assert main.stat().st_mtime_ns == before
    report = run_verify(load_config(config), deep=True)  # _SUCCESS is neither a stray nor a data file
    assert report.ok, report.render()


def test_a_closed_window_is_marked_only_once_its_open_batch_is_committed(
        monkeypatch, spark, new_topic, produce, write_config, warehouse_dir, hive_table_name):
    topic = loaded_topic(new_topic, produce)
    config = markers_config(write_config, topic, delay=0)
    main = marker(warehouse_dir, hive_table_name)

    with pytest.raises(InjectedFault):
        run_at(monkeypatch, config, T0, fault="state:WRITTEN")
    # Hours after the window closed, the resumed batch is registered, then the run dies.
    with pytest.raises(InjectedFault):
        run_at(monkeypatch, config, fault="state:REGISTERED")
    assert newest_batch(config).state.value == "REGISTERED"
    assert not main.exists()

    # Committed, then the run dies before the marker pass: the next run, with nothing new, writes it.
    with pytest.raises(InjectedFault):
        run_at(monkeypatch, config, fault="state:COMMITTED")
    assert newest_batch(config).state.value == "COMMITTED" and not main.exists()
    assert run_at(monkeypatch, config) == 0
    assert main.exists()
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 20, 1: 20})


def test_late_data_for_a_marked_partition_is_written_once_and_reported(
        monkeypatch, caplog, spark, new_topic, produce, write_config, warehouse_dir, hive_table_name):
    topic = loaded_topic(new_topic, produce)
    config = markers_config(write_config, topic, delay=0)
    main = marker(warehouse_dir, hive_table_name)
    assert run_at(monkeypatch, config, T0) == 0
    assert run_at(monkeypatch, config) == 0
    assert main.exists()

    produce(topic, events_by_partition(2, 10, first_id=1000))
    # A host whose clock is 10 minutes past T0 (hours behind) plans into the marked hour.
    assert run_at(monkeypatch, config, T0 + dt.timedelta(minutes=10)) == 0
    late = [r.getMessage() for r in caplog.records if r.getMessage().startswith("LATE DATA")]
    assert len(late) == 1 and f"dt={PARTITION['dt']}/hour={PARTITION['hour']}" in late[0]
    assert table_offsets(spark, DB, hive_table_name) == expected_offsets(topic, {0: 30, 1: 30})
    assert main.exists()
    ledger = Ledger.of(newest_batch(config))
    assert ledger.late_count == 1 and ledger.late[0]["batch_id"] == 2

    status = etl_command(config, "status")
    assert "LATE DATA: batches written into a partition that already had its _SUCCESS: 1; the last: " \
           f"batch 2 into dt={PARTITION['dt']}/hour={PARTITION['hour']}" in status.stdout
    assert run_at(monkeypatch, config) == 0  # the hour is listed again and found marked
    assert Ledger.of(newest_batch(config)).unmarked == ()


def test_config_keys_and_time_windows(write_config):
    base = {"kafka": {"topics": "t"}}
    on = load_config(write_config(**base, hive={"success_markers": "true", "success_marker_delay_seconds": "90"}))
    assert on.hive.success_markers.enabled and on.hive.success_markers.delay_seconds == 90
    off = load_config(write_config(**base)).hive.success_markers
    assert not off.enabled and off.delay_seconds == 300
    for key, value, why in (("success_markers", "maybe", "write true or false"),
                            ("success_marker_delay_seconds", "-1", "0 or more"),
                            ("success_marker_delay_seconds", "nan", "0 or more")):
        with pytest.raises(ConfigError, match=f"\\[hive\\] {key}: .*{why}"):
            load_config(write_config(**base, hive={key: value}))

    # Only the hourly planning-time scheme exists (etl.model.partitioning): the DDL check refuses
    # any other, so every table the job writes has windows to close.
    hourly = window_of(PLANNING_TIME_HOURLY, {"dt": "2026-11-21", "hour": "23"})
    assert (hourly.start.isoformat(), hourly.end.isoformat()) == ("2026-11-21T23:00:00+00:00",
                                                                  "2026-11-22T00:00:00+00:00")
    with pytest.raises(MarkerError, match="dt=2026-11-21: cannot read its time window"):
        window_of(PLANNING_TIME_HOURLY, {"dt": "2026-11-21"})
