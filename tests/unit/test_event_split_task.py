"""Event time over a routed range (etl.job.event_task with etl.job.range_shares): a Parquet file
per (range, table, Hive partition) under the range's name, every table of a split covering the
range, the manifest at the job's rejected table listing each part with its table; the task's
open files one budget over its tables (etl.job.split_writer.OpenFiles). On a local folder with
the chunks handed in: no Kafka, no Spark."""
from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.config import load_config
from etl.config.partitioning import LateData
from etl.errors import StateConflict
from etl.job.assemble import route_specs
from etl.job.event_task import event_range
from etl.job.partition_cap import range_keys
from etl.job.range_task import EventTimeTask, RangeTask
from etl.job.split_writer import OpenFiles, PassWriter
from etl.model.batch import OffsetRange
from etl.model.partitioning import TimePartitioner
from etl.rows.placement import PlacedRows
from etl.sink.fs import LocalFileSystem
from etl.sink.manifest import RangeManifest, manifest_path
from etl.sink.warehouse import Warehouse
from etl.sink.layout import FileLayout
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port
from tests.harness.routed_event import PLANNED, chunk, event_task, placement, routed_config

HOUR = 3_600_000
SCHEMA = pa.schema([("n", pa.int64())])


def _writer(tmp_path, table: str, budget, skip=frozenset()) -> PassWriter:
    return PassWriter(LocalFileSystem(), str(tmp_path / table), "r.parquet", TimePartitioner(), SCHEMA, 4, FileLayout(),
                      skip, budget, {})


def _write(writer: PassWriter, keys: list[int]) -> None:
    placed = PlacedRows(pa.array(keys, pa.int64()), pa.array([False] * len(keys)), [], None)
    writer.write(pa.table({"n": pa.array(range(len(keys)), pa.int64())}), placed)


def test_two_writers_sharing_a_budget_of_two_defer_the_third_key(tmp_path):
    budget = OpenFiles(2, 100)
    a, b = _writer(tmp_path, "a", budget), _writer(tmp_path, "b", budget)
    _write(a, [0, HOUR])
    _write(b, [0])
    assert (a.deferred, b.deferred) == (False, True)
    assert [p.key for p in a.close()] == [0, HOUR] and b.close() == []


def test_the_memory_bound_flushes_the_largest_buffer_across_writers(tmp_path):
    budget = OpenFiles(8, 4)
    a, b = _writer(tmp_path, "a", budget), _writer(tmp_path, "b", budget)
    _write(a, [0, 0, 0])
    _write(b, [0, 0])  # 5 rows buffered over both: a's 3 go out as a row group
    assert [s.buffered_rows for s in budget.sinks] == [0, 2]
    [part] = a.close()
    b.close()
    assert pq.ParquetFile(part.temp_path).metadata.num_row_groups == 1


def test_an_int_budget_is_the_writers_own(tmp_path):
    a, b = _writer(tmp_path, "a", 1), _writer(tmp_path, "b", 1)
    _write(a, [0, HOUR])
    _write(b, [HOUR])
    assert (a.deferred, b.deferred) == (True, False)
    assert [p.key for p in a.close()] == [0] and [p.key for p in b.close()] == [HOUR]


# --- the event-time task over a routed range -------------------------------------------------

def _ms(hour: int) -> int:
    return int(dt.datetime(2026, 11, 26, hour, tzinfo=dt.timezone.utc).timestamp() * 1000)


def _record(n: int, action: str, hour: int) -> dict:
    return {"event_id": n, "action": action, "ts": f"2026-11-26T{hour:02d}:{n % 60:02d}:00Z"}


# clicks in 07, 08, 09; views in 07, 08, 09; one record no route takes
SPREAD = [_record(n, action, 7 + n % 3) for n, action in enumerate(["click", "view"] * 6)] + [_record(12, "buy", 8)]
NAME = "events+0+00000000000000000000+00000000000000000013.parquet"


def _run(task, records, calls=None):
    return event_range(LocalFileSystem(), task, calls or (lambda: [chunk(records[:5]), chunk(records[5:], 5)]), {})


def test_a_split_range_writes_a_file_per_table_and_hour_and_its_manifest_at_the_rejected_table(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 13))
    manifest, published = _run(task, SPREAD)
    root = tmp_path / "w" / "db.db"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))
    assert files == [f"{t}/dt=2026-11-26/hour={h}/{NAME}" for t in ("clicks", "rejects", "views")
                     for h in (("07", "08", "09") if t != "rejects" else ("10",))]
    assert published and [(p.table, p.partition[-2:], p.rows) for p in manifest.parts] == \
        [(t, h, 2) for t in ("clicks", "views") for h in ("07", "08", "09")]
    assert (manifest.rows, manifest.rejected, manifest.rejected_partition) == (12, 1, "dt=2026-11-26/hour=10")
    assert manifest.max_event_ms == _ms(9) + 11 * 60_000
    stored = root / "rejects" / "_etl_ranges" / "events+0" / NAME.replace(".parquet", ".json")
    assert RangeManifest.from_json(json.loads(stored.read_text())) == manifest
    clicks = pq.read_table(root / "clicks" / "dt=2026-11-26" / "hour=08" / NAME).to_pylist()
    assert [r["kafka_offset"] for r in clicks] == [4, 10]
    assert event_range(LocalFileSystem(), task, lambda: 1 / 0, {}) == (manifest, False)  # done: nothing read


def test_a_split_table_without_rows_gets_an_empty_file_in_the_planned_partition(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 13))
    clicks_only = [r for r in SPREAD if r["action"] == "click"]
    manifest, _ = _run(task, clicks_only)
    assert [(p.table, p.partition[-2:], p.rows) for p in manifest.parts if p.table == "views"] == [("views", "10", 0)]
    assert pq.read_table(tmp_path / "w" / "db.db" / "views" / "dt=2026-11-26" / "hour=10" / NAME).num_rows == 0


def test_one_open_file_over_two_tables_and_three_hours_writes_the_same_six_files_and_manifest(tmp_path):
    config = routed_config(tmp_path / "a")
    wide, _ = _run(event_task(config, offsets=(0, 13))[2], SPREAD)
    config = routed_config(tmp_path / "b")
    passes = []
    narrow, _ = _run(event_task(config, offsets=(0, 13), max_open_files=1)[2], SPREAD,
                     lambda: passes.append(1) or [chunk(SPREAD[:5]), chunk(SPREAD[5:], 5)])
    assert narrow == wide and len(passes) == 6


def test_a_crash_between_parts_leaves_no_manifest_and_the_rerun_completes_it(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 13), max_open_files=1)
    passes = []

    def dies_on_the_third_pass():
        passes.append(1)
        if len(passes) == 3:
            raise RuntimeError("killed")
        return [chunk(SPREAD)]
    with pytest.raises(RuntimeError):
        _run(task, SPREAD, dies_on_the_third_pass)
    root = tmp_path / "w" / "db.db"
    assert len(list(root.rglob("*.parquet"))) == 2 and not list(root.rglob("*.json"))
    rerun, published = _run(task, SPREAD)
    assert published and len(rerun.parts) == 6
    assert rerun == _run(event_task(routed_config(tmp_path / "other"), offsets=(0, 13))[2], SPREAD)[0]


def test_a_foreign_file_with_another_count_is_refused(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 13))
    folder = tmp_path / "w" / "db.db" / "views" / "dt=2026-11-26" / "hour=08"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"n": [1]}), folder / NAME)
    with pytest.raises(StateConflict, match="already exists with 1 rows, but this range places 2 rows there"):
        _run(task, SPREAD)


def test_late_rows_are_counted_per_table_part_or_rejected_naming_their_route(tmp_path):
    config = routed_config(tmp_path / "write")
    _batch, _tables, task = event_task(config, offsets=(0, 13), where=placement(late_before_ms=_ms(9)))
    manifest, _ = _run(task, SPREAD)
    assert {(p.table, p.partition[-2:]): p.late for p in manifest.parts if p.late} == {
        ("clicks", "07"): 2, ("clicks", "08"): 2, ("views", "07"): 2, ("views", "08"): 2}
    config = routed_config(tmp_path / "reject")
    _batch, _tables, task = event_task(config, offsets=(0, 13),
                                       where=placement(late_before_ms=_ms(9), late_data=LateData.REJECT))
    manifest, _ = _run(task, SPREAD)
    assert [(p.table, p.partition[-2:]) for p in manifest.parts] == [("clicks", "09"), ("views", "09")]
    rejected = pq.read_table(tmp_path / "reject" / "w" / "db.db" / "rejects" / "dt=2026-11-26" / "hour=10" / NAME)
    reasons = sorted(rejected.column("error").to_pylist())
    assert len(reasons) == 9 and reasons[0].startswith("[route clicks] late:") and reasons[-1].startswith("no route")


# Written by the one-table event-time task before it took routed ranges: its manifest must not change.
ONE_TABLE_MANIFEST = (
    '{"end": 4, "ignored_fields": {}, "last_record": [3, 1764151200000, "7b2ea459ba571888"], "max_event_ms": '
    '1795684200000, "partition": 0, "parts": [["dt=2026-11-26/hour=08", 2, 0], ["dt=2026-11-26/hour=09", 1, 0]], '
    '"rejected": 1, "rejected_partition": "dt=2026-11-26/hour=10", "start": 0, "topic": "orders", "unmatched": {}}')


def test_a_one_table_ranges_manifest_is_byte_identical_to_before(tmp_path):
    ini = minimal_ini(EVENTS_SCHEMA, kafka="topics = orders").replace("url = file:///tmp/w",
                                                                      f"url = file://{tmp_path}/w")
    ini = ini.replace("127.0.0.1:2181", f"127.0.0.1:{free_port()}").replace("127.0.0.1:9092",
                                                                            f"127.0.0.1:{free_port()}")
    (tmp_path / "etl.ini").write_text(ini)
    config = load_config(tmp_path / "etl.ini")
    [spec] = route_specs(config).values()
    w = Warehouse.of(config)
    task = RangeTask(OffsetRange("orders", 0, 0, 4, None), w.main_dir(PLANNED), w.rejected_dir(PLANNED),
                     config.warehouse, config.kafka, "g", spec, EventTimeTask(placement(), w.table_root, 32, {}))
    records = [{"event_id": 0, "ts": "2026-11-26T08:10:00Z"}, {"event_id": 1, "ts": "2026-11-26T09:10:00Z"},
               {"event_id": "x", "ts": "2026-11-26T09:10:00Z"}, {"event_id": 3, "ts": "2026-11-26T08:20:00Z"}]
    event_range(LocalFileSystem(), task, lambda: [chunk(records[:2]), chunk(records[2:], 2)], {})
    assert open(manifest_path(w.table_root, "orders", 0, 0, 4)).read() == ONE_TABLE_MANIFEST


def test_the_partition_cap_counts_the_union_of_the_tables_hours_and_the_planned_one_for_a_table_without_rows(tmp_path):
    _batch, _tables, task = event_task(routed_config(tmp_path), offsets=(0, 13))
    assert range_keys(task, lambda: [chunk(SPREAD)], {}) == [_ms(7), _ms(8), _ms(9)]
    views_at_9 = [r for r in SPREAD if r["action"] == "click" or r["ts"][11:13] == "09"]
    assert range_keys(task, lambda: [chunk(views_at_9)], {}) == [_ms(7), _ms(8), _ms(9)]
    clicks_only = [r for r in SPREAD if r["action"] == "click"]
    assert range_keys(task, lambda: [chunk(clicks_only)], {}) == [_ms(7), _ms(8), _ms(9), _ms(10)]
    assert range_keys(task, lambda: [], {}) == [_ms(10)]
