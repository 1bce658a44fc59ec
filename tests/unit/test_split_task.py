"""A topic split among tables by a field (issue 30, step 5): one range's records into a file per
table in each table's planning-time folder, the records no table takes and those a route rejects
into one rejected file with their reason (naming the route), then the manifest that says the
range is done (etl.job.route_task). On a local folder, with the chunks handed in: no Kafka, no
Spark."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from etl.config.model import HiveFormat
from etl.config import load_config
from etl.errors import StateConflict
from etl.job.assemble import probe_decoder, route_specs
from etl.job.batch_tables import BatchTables, routed_written
from etl.model.shape import planned_tables, shape_of
from etl.job.range_task import RangeTask
from etl.job.route_task import split_range
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.sink.fs import LocalFileSystem
from etl.sink.manifest import RangeManifest
from etl.sink.warehouse import Warehouse
from etl.source.chunk import RawChunk
from etl.source.topics import JobTopics, TopicRouting
from tests.harness.config_file import minimal_ini, routed_ini
from tests.harness.paths import EVENTS_SCHEMA

SPLIT = f"""
[route clicks]
topics = events
field = action
values = click
table = clicks
schema = {EVENTS_SCHEMA}
[route views]
topics = events
field = action
values = view, look
table = views
schema = {EVENTS_SCHEMA}
"""
REST = f"""
[route other]
topics = events
field = action
values = *
table = events_other
schema = {EVENTS_SCHEMA}
"""
VALUES = [{"event_id": 0, "action": "click"}, {"event_id": 1, "action": "view"}, {"event_id": 2, "action": "buy"},
          {"event_id": 3}, {"event_id": 4, "action": "look"}, {"event_id": "not a number", "action": "click"},
          {"event_id": 6, "action": "click"}]
PLANNED = {"dt": "2026-11-26", "hour": "10"}


def _config(tmp_path, routes: str):
    ini = routed_ini(routes)
    (tmp_path / "etl.ini").write_text(ini.replace("url = file:///tmp/w", f"url = file://{tmp_path}/w"))
    return load_config(tmp_path / "etl.ini")


def _task(config, offsets=(0, 7)):
    r = OffsetRange("events", 0, *offsets, None)
    routing = TopicRouting(config.routes, config.hive.rejected_table, lambda: set()).apply(JobTopics(("events",)))
    batch = planned_tables(Batch(1, BatchState.PLANNED, "2026-11-26T10:00:00+00:00", PLANNED, (r,)), routing.tables)
    specs = route_specs(config)
    tables = BatchTables(batch, Warehouse.of(config), shape_of(config), lambda route, topic: specs[route.name],
                         lambda route, field, topic: probe_decoder(config, route, field, specs[route.name]))
    table = tables.of(r)
    task = RangeTask(r, table.warehouse.main_dir(PLANNED), table.warehouse.rejected_dir(PLANNED), config.warehouse,
                     config.kafka, "g", table.spec, split=tables.split_target(r, PLANNED))
    return batch, tables, task


def _chunk(records, start=0) -> RawChunk:
    values = [json.dumps(v).encode() for v in records]
    return RawChunk(list(range(start, start + len(values))), [1764151200000] * len(values), None, values)


def _read(path):
    return pq.read_table(path).to_pylist()


def test_each_record_goes_to_its_values_table_and_the_rest_to_the_rejected_file_with_why(tmp_path):
    config = _config(tmp_path, SPLIT)
    batch, tables, task = _task(config)
    manifest = split_range(LocalFileSystem(), task, [_chunk(VALUES[:4]), _chunk(VALUES[4:], 4)], {})
    root = tmp_path / "w" / "db.db"
    name = "events+0+00000000000000000000+00000000000000000007.parquet"
    clicks = _read(root / "clicks" / "dt=2026-11-26" / "hour=10" / name)
    views = _read(root / "views" / "dt=2026-11-26" / "hour=10" / name)
    rejected = _read(root / "rejects" / "dt=2026-11-26" / "hour=10" / name)
    assert [(r["event_id"], r["kafka_offset"]) for r in clicks] == [(0, 0), (6, 6)]
    assert [(r["event_id"], r["kafka_offset"]) for r in views] == [(1, 1), (4, 4)]
    assert [(r["kafka_offset"], r["error"].split(":")[0]) for r in sorted(rejected, key=lambda r: r["kafka_offset"])] \
        == [(2, "no route takes action = 'buy' (routes take"),
            (3, "action is missing, and no route takes the rest (values = *)"), (5, "[route clicks] field 'event_id'")]
    assert [(p.table, p.partition, p.rows) for p in manifest.parts] == [("clicks", "dt=2026-11-26/hour=10", 2),
                                                                         ("views", "dt=2026-11-26/hour=10", 2)]
    assert (manifest.rows, manifest.rejected, manifest.rejected_partition) == (4, 3, "dt=2026-11-26/hour=10")
    assert RangeManifest.from_json(json.loads(json.dumps(manifest.to_json()))) == manifest
    assert [t.name for t in tables.all()] == ["clicks", "views"]
    assert tables.manifest_root(batch.ranges[0]).endswith("/db.db/rejects")


def test_a_rest_route_takes_unlisted_and_missing_values_and_every_table_gets_its_file(tmp_path):
    config = _config(tmp_path, SPLIT + REST)
    _batch, tables, task = _task(config)
    manifest = split_range(LocalFileSystem(), task, [_chunk(VALUES[:3]), _chunk(VALUES[3:4], 3)], {})
    rows = {p.table: p.rows for p in manifest.parts}
    assert rows == {"clicks": 1, "views": 1, "events_other": 2} and manifest.rejected == 0
    assert [t.name for t in tables.all()] == ["clicks", "views", "events_other"]


def test_a_replay_keeps_the_published_files_and_refuses_one_that_is_not_the_ranges(tmp_path):
    config = _config(tmp_path, SPLIT)
    batch, _tables, task = _task(config)
    first = split_range(LocalFileSystem(), task, [_chunk(VALUES)], {})
    assert split_range(LocalFileSystem(), task, [_chunk(VALUES)], {}) == first  # a dead attempt's files, kept
    with pytest.raises(StateConflict, match="already exists with 2 rows, but this range puts 1 rows there"):
        split_range(LocalFileSystem(), task, [_chunk(VALUES[:2])], {})
    written = routed_written(batch, [_result(batch, first)])
    assert written["extra"]["table_rows"] == {"clicks": 2, "views": 2}


def _result(batch, manifest):
    from etl.job.range_task import RangeResult
    return RangeResult(batch.ranges[0], True, manifest.rows, manifest.rejected, parts=manifest.parts)


def test_a_routed_jobs_rejected_records_name_their_route_and_a_one_table_jobs_do_not(tmp_path):
    from etl.rows.pipeline import RowPipeline
    bad = _chunk([{"event_id": "x"}])
    routed = route_specs(_config(tmp_path, SPLIT))["views"]
    [reason] = RowPipeline(routed.rows, "events", 0).process(bad).rejected.column("error").to_pylist()
    assert reason.startswith("[route views] field 'event_id'")
    (tmp_path / "one.ini").write_text(minimal_ini(EVENTS_SCHEMA))
    [one] = route_specs(load_config(tmp_path / "one.ini")).values()
    [reason] = RowPipeline(one.rows, "a", 0).process(bad).rejected.column("error").to_pylist()
    assert reason.startswith("field 'event_id'")


def test_verify_finds_a_split_ranges_file_gone_from_one_of_its_tables(tmp_path):
    from etl.model.compaction import TableKind
    from etl.ops.inventory import take_inventory
    from etl.ops.parts import check_split_parts
    config = _config(tmp_path, SPLIT)
    _batch, tables, task = _task(config)
    manifest = split_range(LocalFileSystem(), task, [_chunk(VALUES)], {})
    inventories = {t.name: take_inventory(LocalFileSystem(), t.warehouse, (TableKind.MAIN,)) for t in tables.all()}
    assert check_split_parts(inventories, [manifest], None) == []
    (tmp_path / "w" / "db.db" / "views" / "dt=2026-11-26" / "hour=10" / task.range.name_as(HiveFormat.PARQUET)).unlink()
    inventories["views"] = take_inventory(LocalFileSystem(), tables.all()[1].warehouse, (TableKind.MAIN,))
    [problem] = check_split_parts(inventories, [manifest], None)
    assert problem.kind == "missing_part" and "in table views, dt=2026-11-26/hour=10, which is gone" in problem.detail
