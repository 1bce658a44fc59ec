"""`etl verify` over a routed range by event time (etl.ops.parts, etl.ops.placement_check): a
split range's parts are checked per (table, partition) against its manifest, a part gone from one
table and a copy in another table's hour both named once; `--deep` reads each table's parts with
the tables' one partitioner, counting a split's rows per table."""
from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq

from etl.config import PartitioningConfig, PartitionSource
from etl.model.naming import FileRange, final_name
from etl.ops.inventory import Inventory, WarehouseFile
from etl.ops.parts import check_parts, check_split_parts
from etl.ops.placement_check import check_placement
from etl.sink.fs import LocalFileSystem
from etl.sink.manifest import Part, RangeManifest
from tests.harness.routed_event import placement, routed_config

R = FileRange("events", 0, 0, 6)
NAME = final_name("events", 0, 0, 6)
H = "dt=2026-11-26/hour="
MANIFEST = RangeManifest("events", 0, 0, 6, (Part(H + "07", 2, 0, "clicks"), Part(H + "08", 1, 0, "clicks"),
                                             Part(H + "08", 3, 0, "views")))


def _inventories(root: str, files: dict[str, list[str]]) -> dict[str, Inventory]:
    return {table: Inventory([WarehouseFile(f"{root}/{table}/{H}{hour}/{NAME}", H + hour, R) for hour in hours])
            for table, hours in files.items()}


def _merged(inventories: dict[str, Inventory]) -> Inventory:
    return Inventory([f for inventory in inventories.values() for f in inventory.files])


def test_a_part_gone_from_one_table_and_a_copy_in_another_tables_hour_are_each_named_once():
    whole = _inventories("/w", {"clicks": ["07", "08"], "views": ["08"]})
    assert check_split_parts(whole, [MANIFEST], None) == []
    assert check_parts(_merged(whole), [MANIFEST], None) == []
    damaged = _inventories("/w", {"clicks": ["07"], "views": ["07", "08"]})
    problems = check_split_parts(damaged, [MANIFEST], None) + check_parts(_merged(damaged), [MANIFEST], None)
    assert [(p.kind, p.detail.split(",")[0]) for p in problems] == [
        ("missing_part", "its manifest lists a file in table clicks"),
        ("stray_part", "a file of the range is in table views")]
    assert [p.detail.split(", ")[1] for p in problems] == [H + "08", H + "07"]


def test_deep_reads_each_tables_parts_and_names_a_misplaced_row_in_one(tmp_path):
    config = routed_config(tmp_path)
    hours = {("clicks", "07"): ["07:10", "07:20"], ("clicks", "08"): ["08:10"], ("views", "08"): ["08:01", "08:02",
                                                                                                  "09:03"]}
    for (table, hour), times in hours.items():
        folder = tmp_path / table / f"{H}{hour}"
        folder.mkdir(parents=True)
        ts = [dt.datetime.fromisoformat(f"2026-11-26T{t}:00+00:00") for t in times]
        pq.write_table(pa.table({"ts": pa.array(ts, pa.timestamp("ms", "UTC")),
                                 "kafka_offset": pa.array(range(len(ts)), pa.int64())}), folder / NAME)
    partitioner = placement().partitioner
    inventories = _inventories(str(tmp_path), {"clicks": ["07", "08"], "views": ["08"]})
    problems = check_placement(config_with_event_time(config), LocalFileSystem(), partitioner, inventories, [MANIFEST])
    assert [(p.kind, p.where.split("/")[-4]) for p in problems] == [("misplaced_row", "views")]


def config_with_event_time(config):
    partitioning = PartitioningConfig(source=PartitionSource.COLUMN, column="ts")
    return replace(config, hive=replace(config.hive, partitioning=partitioning))
