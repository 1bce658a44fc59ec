"""A routed batch by event time once its files are written: WRITTEN lists each (table, Hive
partition) it touched (etl.job.event_record), each table registers exactly those (etl.model.shape's
Routed.register and etl.job.batch_tables.register_tables, through etl.job.write_mode's table_partitions),
the temp sweep covers each table's part folders and the rejected table's manifest folders, the markers'
ledger awaits each table's partition (etl.sink.markers), and the run metrics count files per
table (etl.ops.metrics_tables). A one-table batch's record is as before."""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

from etl.config.model import HiveFormat
from etl.config import load_config
from etl.job.event_record import touched_partitions
from etl.job.batch_tables import register_tables, routed_written
from etl.model.shape import shape_of
from etl.job.range_task import RangeResult
from etl.job.write_mode import EVENT_TIME, PLANNING_TIME
from etl.model.batch import Batch, BatchState, EventTimeRecord, OffsetRange, TouchedPartition
from etl.ops.dry_run import open_batch_target
from etl.ops.metrics_tables import written_files
from etl.sink.fs import LocalFileSystem
from etl.state.batch_nodes import header_bytes, marker_chunks, partition_chunks
from etl.sink.manifest import Part
from etl.model.naming import partition_values
from etl.sink.marker_ledger import LEDGER_KEY, Awaiting, Ledger, partition_key
from etl.sink.markers import MARKER_NAME, SuccessMarkers
from etl.sink.warehouse import Warehouse
from etl.model.partitioning import PLANNING_TIME_HOURLY
from tests.harness.routed_event import PLANNED, ROUTES, event_task, placement, routed_config
from tests.harness.marker_store import MarkerStore

SPLIT = OffsetRange("events", 0, 0, 13, None)
WHOLE = OffsetRange("orders", 0, 0, 4, None)
H = "dt=2026-11-26/hour="
RESULTS = [RangeResult(SPLIT, True, 5, 1, parts=(Part(H + "07", 2, 0, "clicks"), Part(H + "08", 1, 1, "clicks"),
                                                 Part(H + "08", 2, 0, "views"))),
           RangeResult(WHOLE, True, 3, 0, parts=(Part(H + "08", 3, 0),))]
NOW = dt.datetime(2026, 11, 26, 10, 30, tzinfo=dt.timezone.utc)
TABLES = {"events": ["clicks", "views"], "orders": ["orders"]}


def _batch(partitions: tuple[TouchedPartition, ...] | None = None, **changes) -> Batch:
    batch = Batch(1, BatchState.PLANNED, "2026-11-26T10:30:00+00:00", PLANNED, (SPLIT, WHOLE), tables=TABLES,
                  event_time=EventTimeRecord(placement().to_json()))
    return replace(batch, event_time=replace(batch.event_time, partitions=partitions), **changes)


def test_written_lists_each_tables_partitions_and_a_one_table_batchs_entries_name_none():
    assert [p.to_json() for p in touched_partitions(RESULTS, TABLES)] == [
        {"partition": H + "07", "table": "clicks", "rows": 2, "late": 0, "files": 1},
        {"partition": H + "08", "table": "clicks", "rows": 1, "late": 1, "files": 1},
        {"partition": H + "08", "table": "orders", "rows": 3, "late": 0, "files": 1},
        {"partition": H + "08", "table": "views", "rows": 2, "late": 0, "files": 1}]
    one = [RangeResult(WHOLE, True, 3, 0, parts=(Part(H + "08", 3, 0),)), RangeResult(SPLIT, True, 1, 0,
                                                                                      parts=(Part(H + "08", 1, 1),))]
    assert json.dumps([p.to_json() for p in touched_partitions(one)]) == json.dumps(
        [{"partition": H + "08", "rows": 4, "late": 1, "files": 2}])


def test_each_table_registers_the_partitions_it_got_and_the_rejected_table_the_planned_one(tmp_path):
    config = routed_config(tmp_path)
    batch = _batch(partitions=tuple(touched_partitions(RESULTS, TABLES)), rejected=1)
    _b, tables, _task = event_task(config)
    tables = type(tables)(batch, Warehouse.of(config), shape_of(config), tables._spec_for, tables._probe_for)
    added: dict[str, list] = {}

    class Registrar:
        def __init__(self, name):
            self.name = name

        def add_partitions(self, main, rejected):
            added.setdefault(self.name, []).append((main, rejected))

    def table_registrar(view, warehouse, ddl):
        return Registrar(warehouse.table_root.rsplit("/", 1)[-1])

    shape_of(config).register(EVENT_TIME, Registrar("rejects"), batch,
                              lambda partitions: register_tables(tables, table_registrar, partitions))
    hour = {"dt": "2026-11-26"}
    assert added == {"clicks": [([{**hour, "hour": "07"}, {**hour, "hour": "08"}], [])],
                     "views": [([{**hour, "hour": "08"}], [])], "orders": [([{**hour, "hour": "08"}], [])],
                     "rejects": [([], [PLANNED])]}
    assert PLANNING_TIME.table_partitions(batch) == {"clicks": [PLANNED], "views": [PLANNED], "orders": [PLANNED]}


def test_the_sweep_covers_each_tables_part_folders_and_the_manifest_folders(tmp_path):
    config = routed_config(tmp_path)
    batch = _batch()
    _b, tables, _task = event_task(config)
    tables = type(tables)(batch, Warehouse.of(config), shape_of(config), tables._spec_for, tables._probe_for)
    root = f"{tmp_path}/w/db.db"
    assert EVENT_TIME.sweep_folders(tables, batch, RESULTS) == [
        f"{root}/clicks/{H}07", f"{root}/clicks/{H}08", f"{root}/orders/{H}08", f"{root}/views/{H}08",
        f"{root}/orders/_etl_ranges/orders+0", f"{root}/rejects/_etl_ranges/events+0"]


def test_the_ledger_awaits_each_tables_partition_and_marks_it_in_its_folder_rejected_first(tmp_path):
    path = tmp_path / "etl.ini"
    routed_config(tmp_path, ROUTES)
    path.write_text(path.read_text().replace("rejected_table = rejects", "rejected_table = rejects\n"
                                             "success_markers = true\nsuccess_marker_delay_seconds = 0"))
    config = load_config(path)
    store, fs, warehouse = MarkerStore(), LocalFileSystem(), Warehouse.of(config)
    markers = SuccessMarkers(config, store, fs, warehouse, PLANNING_TIME_HOURLY, clock=lambda: NOW,
                             tables_of=shape_of(config).marker_tables)
    batch = _batch()
    extra = markers.on_written(batch, touched_partitions(RESULTS, TABLES))
    assert [(a.table, a.values["hour"]) for a in Ledger.of(replace(batch, extra=extra)).unmarked] == [
        ("clicks", "07"), ("clicks", "08"), ("orders", "08"), ("views", "08")]
    assert Ledger.of(replace(batch, extra=extra)).late[0]["table"] == "clicks"
    for hour in ("07", "08"):
        fs.makedirs(warehouse.rejected_dir({"dt": "2026-11-26", "hour": hour}))
    store.newest = (replace(batch, state=BatchState.COMMITTED, extra=extra), 3)
    done = markers.write_due(lambda: dt.datetime(2026, 11, 26, 9, tzinfo=dt.timezone.utc))
    assert done == [f"clicks/{H}07", f"clicks/{H}08", f"orders/{H}08", f"views/{H}08"]
    for table, hour in (("clicks", "07"), ("views", "08"), ("orders", "08"), ("rejects", "08")):
        assert (Path(tmp_path) / "w" / "db.db" / table / f"{H}{hour}" / MARKER_NAME).exists()
    assert store.newest[0].extra[LEDGER_KEY]["unmarked"] == []


def test_the_run_metrics_count_each_tables_files_by_event_time(tmp_path):
    config = routed_config(tmp_path)
    batch = _batch(partitions=tuple(touched_partitions(RESULTS, TABLES)))
    root = Path(tmp_path) / "w" / "db.db"
    for table, hour, r in (("clicks", "07", SPLIT), ("clicks", "08", SPLIT), ("views", "08", SPLIT),
                           ("orders", "08", WHOLE)):
        (root / table / f"{H}{hour}").mkdir(parents=True, exist_ok=True)
        (root / table / f"{H}{hour}" / r.name_as(HiveFormat.PARQUET)).write_bytes(b"x" * 10)
    counts = written_files(LocalFileSystem(), config, Warehouse.of(config), [batch])
    assert {label: count for label, (count, _size) in counts.items()} == {
        "db.clicks": 2, "db.views": 1, "db.orders": 1, "db.rejects": 0}


def test_written_keeps_the_markers_ledger_beside_the_rows_per_table(tmp_path):
    """The rows per table were merged over the event-time record's extra, dropping the ledger of
    the partitions the batch touched: no table ever got its marker."""
    batch = _batch(extra={"kept": 1})
    written = {"event_time": EventTimeRecord(partitions=()), "extra": {"kept": 1, LEDGER_KEY: {"unmarked": ["x"]}}}
    more = routed_written(batch, RESULTS, written)
    assert more["extra"] == {"kept": 1, LEDGER_KEY: {"unmarked": ["x"]},
                             "table_rows": {"clicks": 3, "orders": 3, "views": 2}}
    assert more["event_time"] == EventTimeRecord(partitions=())


def test_a_batch_over_200_tables_and_48_hours_fits_zookeepers_nodes():
    """9,600 (table, partition) entries, in the touched partitions and the markers' ledger: each
    node ZooKeeper stores stays under its 1 MB."""
    hours = [f"dt=2026-11-{24 + h // 24}/hour={h % 24:02d}" for h in range(48)]
    touched = [TouchedPartition(p, 1000, 0, 3, f"table_{t:03d}") for p in hours for t in range(200)]
    ledger = Ledger(unmarked=tuple(Awaiting(partition_key(partition_values(e.partition)), e.table) for e in touched))
    batch = _batch(partitions=tuple(touched), extra={LEDGER_KEY: ledger.to_json()})
    chunks = partition_chunks(batch) + marker_chunks(batch)
    assert len(partition_chunks(batch)) == 2 and max(len(c) for c in chunks) < 1_000_000
    assert len(header_bytes(batch)) < 1_000_000


def test_the_dry_run_names_each_shown_partitions_table():
    batch = _batch(partitions=tuple(touched_partitions(RESULTS, TABLES)))
    shown = [{k: v for k, v in p.items() if k != "folder"} for p in open_batch_target(batch, None)["partitions"]]
    assert shown[:3] == [{"partition": H + "07", "table": "clicks"}, {"partition": H + "08", "table": "clicks"},
                         {"partition": H + "08", "table": "orders"}]
