"""`_SUCCESS` markers of a routed job (etl.sink.markers, etl.sink.marker_ledger): each table a
batch writes awaits its own marker in its own partition folder, through the one ledger in the
batch's header, closed by the same rule as a one-table job's; a replay rewrites nothing; a table
no batch of the hour wrote to gets none. A one-table job's ledger is stored as it always was."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

import pytest

from etl.model.shape import shape_of
from etl.config import load_config
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.partitioning import PLANNING_TIME_HOURLY
from etl.ops.status import render_marker_status
from etl.sink.fs.local import LocalFileSystem
from etl.sink.marker_ledger import LEDGER_KEY, Awaiting, Ledger, partition_key
from etl.sink.markers import MARKER_NAME, SuccessMarkers, marker_status
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import TWO_ROUTES, routed_ini
from tests.harness.marker_store import MarkerStore

PLANNED = dt.datetime(2026, 11, 21, 10, 30, tzinfo=dt.timezone.utc)
HOUR = {"dt": "2026-11-21", "hour": "10"}
# app.x and orders have records; app.y only a new partition's starting offset (a zero-length range)
RANGES = (OffsetRange("app.x", 0, 0, 5, None), OffsetRange("orders", 0, 0, 3, None),
          OffsetRange("app.y", 0, 0, 0, None))
TABLES = {"app.x": ["raw_app_x"], "orders": ["orders"], "app.y": ["raw_app_y"]}


@pytest.fixture
def job(tmp_path: Path):
    path = tmp_path / "etl.ini"
    hive = "rejected_table = rejects\nsuccess_markers = true\nsuccess_marker_delay_seconds = 0"
    path.write_text(routed_ini(TWO_ROUTES, hive=hive).replace("file:///tmp/w", f"file://{tmp_path}/w"))
    config = load_config(path)
    store, fs, warehouse = MarkerStore(), LocalFileSystem(), Warehouse.of(config)
    now = [PLANNED]
    markers = SuccessMarkers(config, store, fs, warehouse, PLANNING_TIME_HOURLY, clock=lambda: now[0],
                             tables_of=shape_of(config).marker_tables)
    return markers, store, warehouse, now


def _committed(markers: SuccessMarkers, store: MarkerStore, batch_id: int = 1) -> Batch:
    """Plan a batch into HOUR, write its tables' folders as its tasks would, and commit it."""
    batch = Batch(batch_id, BatchState.PLANNED, PLANNED.isoformat(), dict(HOUR), RANGES, tables=TABLES)
    planned = markers.on_plan(batch)
    for table in planned.routed_tables:
        markers.fs.makedirs(markers.warehouse.for_table(table).main_dir(HOUR))
    store.newest = (replace(planned, state=BatchState.COMMITTED), 7)
    return planned


def _marker(warehouse: Warehouse, table: str) -> Path:
    return Path(warehouse.for_table(table).main_dir(HOUR)) / MARKER_NAME


def test_a_routed_plan_lists_its_partition_once_for_each_table_it_writes(job):
    markers, store, _, _ = job
    planned = _committed(markers, store)
    assert planned.extra[LEDGER_KEY]["unmarked"] == [{**HOUR, "table": "orders"}, {**HOUR, "table": "raw_app_x"}]


def test_each_table_gets_its_marker_once_its_hour_is_closed_and_the_ledger_drops_them(job):
    markers, store, warehouse, now = job
    _committed(markers, store)
    now[0] = dt.datetime(2026, 11, 21, 10, 59, 59, tzinfo=dt.timezone.utc)
    assert markers.write_due(markers.clock_cutoff) == []
    assert not _marker(warehouse, "orders").exists()
    now[0] = dt.datetime(2026, 11, 21, 11, 0, tzinfo=dt.timezone.utc)
    assert markers.write_due(markers.clock_cutoff) == ["orders/dt=2026-11-21/hour=10",
                                                       "raw_app_x/dt=2026-11-21/hour=10"]
    for table in ("orders", "raw_app_x"):
        body = json.loads(_marker(warehouse, table).read_text())
        assert (body["table"], body["partition"], body["job"]) == (table, "dt=2026-11-21/hour=10", "j1")
    assert not _marker(warehouse, "raw_app_y").exists()  # no batch of the hour wrote to it, as an hour with no batch
    assert Ledger.of(store.newest[0]).unmarked == () and store.newest[1] == 8


def test_a_replay_after_a_crash_before_the_ledger_update_rewrites_nothing(job):
    markers, store, warehouse, now = job
    _committed(markers, store)
    before = store.newest
    now[0] = dt.datetime(2026, 11, 21, 11, 5, tzinfo=dt.timezone.utc)
    markers.write_due(markers.clock_cutoff)
    written = {table: _marker(warehouse, table).read_text() for table in ("orders", "raw_app_x")}
    store.newest = before  # the marker pass died after the markers, before its fenced update
    now[0] = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.timezone.utc)
    assert len(markers.write_due(markers.clock_cutoff)) == 2
    assert {table: _marker(warehouse, table).read_text() for table in written} == written
    assert Ledger.of(store.newest[0]).unmarked == ()


def test_the_shared_rejected_table_gets_its_marker_when_its_folder_exists(job):
    markers, store, warehouse, now = job
    _committed(markers, store)
    markers.fs.makedirs(warehouse.rejected_dir(HOUR))
    now[0] = dt.datetime(2026, 11, 21, 11, 0, tzinfo=dt.timezone.utc)
    markers.write_due(markers.clock_cutoff)
    assert (Path(warehouse.rejected_dir(HOUR)) / MARKER_NAME).exists()


def test_a_plan_into_a_table_already_marked_is_late_data_for_that_table(job):
    markers, store, _, now = job
    _committed(markers, store)
    now[0] = dt.datetime(2026, 11, 21, 11, 0, tzinfo=dt.timezone.utc)
    markers.write_due(markers.clock_cutoff)
    late = _committed(markers, store, batch_id=2)  # a host whose clock is behind plans into the marked hour
    ledger = Ledger.of(late)
    assert ledger.late_count == 2 and {record["table"] for record in ledger.late} == {"orders", "raw_app_x"}
    assert marker_status(markers.settings, late)["awaiting"] == ["orders/dt=2026-11-21/hour=10",
                                                                 "raw_app_x/dt=2026-11-21/hour=10"]
    said = render_marker_status(marker_status(markers.settings, late))[-1]
    assert said.startswith("LATE DATA:") and f"batch 2 into {ledger.late[-1]['table']}/dt=2026-11-21/hour=10," in said


def test_a_one_table_jobs_ledger_is_stored_as_before_and_read_back():
    ledger = Ledger().adding(HOUR, PLANNING_TIME_HOURLY)
    assert ledger.to_json()["unmarked"] == [HOUR]
    assert Ledger.of(Batch(1, BatchState.COMMITTED, "", {}, (), extra={LEDGER_KEY: ledger.to_json()})) == ledger
    routed = Awaiting(partition_key(HOUR), "orders")
    assert Awaiting.from_json(routed.to_json()) == routed and routed.describe() == "orders/dt=2026-11-21/hour=10"
