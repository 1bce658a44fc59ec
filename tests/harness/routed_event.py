"""A routed job's range by event time, for the unit tests of its task (no Kafka, no Spark): a
topic split by `action` among two tables, and a topic one route takes whole, on a local folder,
with the configs naming ports nothing listens on."""
from __future__ import annotations

import datetime as dt
import json

from etl.config import PartitioningConfig, PartitionSource, load_config
from etl.job.assemble import probe_decoder, route_specs
from etl.job.batch_tables import BatchTables
from etl.model.shape import planned_tables, shape_of
from etl.job.range_task import EventTimeTask, RangeTask
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.partitioning import Placement, TimePartitioner
from etl.sink.warehouse import Warehouse
from etl.source.chunk import RawChunk
from etl.source.topics import JobTopics, TopicRouting
from tests.harness.config_file import routed_ini
from tests.harness.paths import EVENTS_SCHEMA
from tests.harness.ports import free_port

ROUTES = f"""
[route clicks]
topics = events
field = action
values = click
table = clicks
schema = {EVENTS_SCHEMA}
[route views]
topics = events
field = action
values = view
table = views
schema = {EVENTS_SCHEMA}
[route whole]
topics = orders
table = orders
schema = {EVENTS_SCHEMA}
"""
PLANNED = {"dt": "2026-11-26", "hour": "10"}
PLANNED_AT = dt.datetime(2026, 11, 26, 10, 30, tzinfo=dt.timezone.utc)


def routed_config(tmp_path, routes: str = ROUTES):
    ini = (routed_ini(routes).replace("url = file:///tmp/w", f"url = file://{tmp_path}/w")
           .replace("hosts = 127.0.0.1:2181", f"hosts = 127.0.0.1:{free_port()}")
           .replace("bootstrap.servers = 127.0.0.1:9092", f"bootstrap.servers = 127.0.0.1:{free_port()}")
           .replace("[hive]\n", f"[hive]\nmetastore = thrift://127.0.0.1:{free_port()}\n", 1))
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "etl.ini").write_text(ini)
    return load_config(tmp_path / "etl.ini")


def placement(late_before_ms: int | None = None, **settings) -> Placement:
    built = Placement.of(PartitioningConfig(source=PartitionSource.COLUMN, column="ts", **settings),
                         TimePartitioner(), PLANNED_AT, late_before_ms)
    return Placement.from_json(built.to_json())  # what a task gets from the stored plan


def event_task(config, topic: str = "events", offsets=(0, 7), where: Placement | None = None,
               max_open_files: int = 32) -> tuple[Batch, BatchTables, RangeTask]:
    r = OffsetRange(topic, 0, *offsets, None)
    routing = TopicRouting(config.routes, config.hive.rejected_table, lambda: set()).apply(JobTopics((topic,)))
    batch = planned_tables(Batch(1, BatchState.PLANNED, PLANNED_AT.isoformat(), PLANNED, (r,)), routing.tables)
    specs = route_specs(config)
    tables = BatchTables(batch, Warehouse.of(config), shape_of(config), lambda route, t: specs[route.name],
                         lambda route, field, t: probe_decoder(config, route, field, specs[route.name]))
    table = tables.of(r)
    task = RangeTask(r, table.warehouse.main_dir(PLANNED), table.warehouse.rejected_dir(PLANNED), config.warehouse,
                     config.kafka, "g", table.spec,
                     EventTimeTask(where or placement(), table.warehouse.table_root, max_open_files,
                                   dict(table.warehouse.relocations.main)),
                     tables.split_target(r, PLANNED))
    return batch, tables, task


def chunk(records: list[dict], start: int = 0) -> RawChunk:
    values = [json.dumps(v).encode() for v in records]
    return RawChunk(list(range(start, start + len(values))), [1764151200000] * len(values), None, values)
