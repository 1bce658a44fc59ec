"""The compaction's plan and config, without services: which files merge into which, the new
folder's name, the plan's JSON and state order, and [compaction] keys checked at the edge."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from etl.config import load_config
from etl.errors import ConfigError, StateConflict
from etl.compaction.plan import plan_outputs
from etl.model.compaction import (CompactionPlan, CompactionState, InputFile, OutputFile, PartialsFold, Relocations,
                                  TableKind, compacted_folder, partial_of, partition_of_folder)
from etl.model.naming import final_name
from etl.state.znodes import dump
from tests.harness.config_file import minimal_ini

SCHEMA = Path(__file__).resolve().parents[2] / "warehouse_schema" / "events.sql"


def batch_file(partition: int, start: int, end: int, size: int = 1000) -> InputFile:
    return InputFile(final_name("t", partition, start, end), size, end - start, ((start, end),))


def test_one_merged_file_per_kafka_partition_named_by_its_lowest_start_and_highest_end():
    inputs = [batch_file(0, 0, 6), batch_file(1, 0, 4), batch_file(0, 6, 12), batch_file(0, 20, 30)]
    outputs = plan_outputs(inputs, target_bytes=10_000)
    assert [o.name for o in outputs] == [final_name("t", 0, 0, 30), final_name("t", 1, 0, 4)]
    assert outputs[0].inputs == (inputs[0].name, inputs[2].name, inputs[3].name)  # offset order


def test_files_beyond_the_target_size_make_several_outputs_in_offset_order():
    inputs = [batch_file(0, i * 10, i * 10 + 10, size=400) for i in range(5)]
    outputs = plan_outputs(inputs, target_bytes=1000)
    assert [o.name for o in outputs] == [final_name("t", 0, 0, 20), final_name("t", 0, 20, 40),
                                         final_name("t", 0, 40, 50)]


def test_overlapping_ranges_are_refused():
    with pytest.raises(StateConflict, match=r"both hold offsets \[5, 10\)"):
        plan_outputs([batch_file(0, 0, 10), batch_file(0, 5, 12)], target_bytes=10_000)


def test_the_new_folder_shows_the_partition_and_parses_back():
    folder = compacted_folder("dt=2026-11-22/hour=13", 7)
    assert folder == "_compacted/dt=2026-11-22/hour=13/c0000000007"
    assert partition_of_folder(folder) == "dt=2026-11-22/hour=13" and partition_of_folder("dt=2026-11-22") is None


def test_a_plan_round_trips_and_moves_forward_only():
    inputs = (batch_file(0, 0, 6), batch_file(0, 6, 12))
    plan = CompactionPlan(3, TableKind.REJECTED, "dt=x/hour=1", "dt=x/hour=1", compacted_folder("dt=x/hour=1", 3),
                          inputs, plan_outputs(list(inputs), 10_000), "2026-11-24T10:00:00+00:00", "me")
    assert CompactionPlan.from_json(plan.to_json()) == plan
    assert plan.ranges_of(plan.outputs[0]) == [(0, 6), (6, 12)] and plan.rows == 12
    with pytest.raises(StateConflict):
        plan.advanced(CompactionState.SWITCHED)
    assert plan.advanced(CompactionState.WRITTEN).state is CompactionState.WRITTEN


def test_relocations_per_table():
    moved = Relocations().moved(TableKind.MAIN, "dt=x/hour=1", "_compacted/dt=x/hour=1/c0000000001")
    assert moved.folder(TableKind.MAIN, "dt=x/hour=1").endswith("c0000000001")
    assert moved.folder(TableKind.REJECTED, "dt=x/hour=1") == "dt=x/hour=1"
    assert Relocations.from_json(moved.to_json()) == moved


# The one-table encodings as they were before a plan or a relocation could name a routed table:
# a one-table job's state must stay byte for byte what it was.
ONE_TABLE_PLAN = (b'{"id":7,"inputs":[["t+0+0+2.parquet",10,2,[[0,2]]]],"marker":true,"outputs":[["m.parquet",'
                  b'["t+0+0+2.parquet"]]],"partition":"dt=2026-01-01/hour=00","planned_at":"2026-01-01T00:00:00+00:00",'
                  b'"planned_by":"host:1","source":"dt=2026-01-01/hour=00","state":"SWITCHED","switched_at":'
                  b'"2026-01-01T01:00:00+00:00","table":"main",'
                  b'"target":"_compacted/dt=2026-01-01/hour=00/c0000000007"}')
ONE_TABLE_RELOCATIONS = (b'{"main":{"dt=2026-01-01/hour=00":"_compacted/x/c1"},'
                         b'"rejected":{"dt=2026-01-01/hour=01":"_compacted/y/c2"}}')


def _switched_plan(table_name: str | None = None) -> CompactionPlan:
    partition = "dt=2026-01-01/hour=00"
    return CompactionPlan(7, TableKind.MAIN, partition, partition, compacted_folder(partition, 7),
                          (InputFile("t+0+0+2.parquet", 10, 2, ((0, 2),)),),
                          (OutputFile("m.parquet", ("t+0+0+2.parquet",)),), "2026-01-01T00:00:00+00:00", "host:1",
                          CompactionState.SWITCHED, "2026-01-01T01:00:00+00:00", True, table_name)


def test_a_one_table_plan_is_stored_as_before_and_an_old_plan_names_no_table():
    plan = _switched_plan()
    assert dump(plan.to_json()) == ONE_TABLE_PLAN
    assert CompactionPlan.from_json(json.loads(ONE_TABLE_PLAN)) == plan and plan.table_name is None
    assert plan.label == "main" and "of main partition" in plan.describe()


def test_a_routed_plan_round_trips_with_its_table_name():
    plan = _switched_plan("orders")
    assert plan.to_json()["table_name"] == "orders" and plan.to_json()["table"] == "main"
    assert CompactionPlan.from_json(json.loads(dump(plan.to_json()))) == plan
    assert plan.label == "orders" and "of orders partition" in plan.describe()


def test_a_routed_tables_relocation_moves_only_its_map_and_is_not_in_the_one_table_json():
    one_table = Relocations().moved(TableKind.MAIN, "dt=2026-01-01/hour=00", "_compacted/x/c1") \
        .moved(TableKind.REJECTED, "dt=2026-01-01/hour=01", "_compacted/y/c2")
    assert dump(one_table.to_json()) == ONE_TABLE_RELOCATIONS and one_table.tables == {}
    routed = Relocations(rejected={"p": "_compacted/p/c1"}).moved(TableKind.MAIN, "p", "_compacted/p/c2", name="orders")
    assert routed.main == {} and routed.tables == {"orders": {"p": "_compacted/p/c2"}}
    assert "tables" not in routed.to_json() and routed.to_json() == {"main": {}, "rejected": {"p": "_compacted/p/c1"}}
    view = routed.for_table("orders")
    assert view.main == {"p": "_compacted/p/c2"} and view.rejected == routed.rejected and view.tables == routed.tables
    assert view.for_table("clicks").main == {} and view.for_table("clicks").for_table("orders") == view


def test_counts_name_the_routed_tables_only_when_there_are_some():
    assert Relocations({"a": "x"}, {"b": "y", "c": "z"}).counts() == {"main": 1, "rejected": 2}
    routed = Relocations(rejected={"b": "y"}, tables={"orders": {"a": "x", "c": "z"}, "clicks": {"a": "w"}})
    assert routed.counts() == {"main": 0, "rejected": 1, "tables": {"clicks": 1, "orders": 2}}


def load(tmp_path: Path, compaction: str):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(SCHEMA, sections=f"[compaction]\n{compaction}\n"))
    return load_config(path)


def test_compaction_defaults_and_keys(tmp_path):
    settings = load(tmp_path, "target_file_mb = 64\nafter_run = true").compaction
    assert settings.target_bytes == 64 * 1024 * 1024 and settings.after_run and settings.min_files == 8
    assert settings.only_finished and settings.keep_superseded_seconds == 3600


@pytest.mark.parametrize("line, key", [("min_files = 1", "min_files"), ("target_file_mb = 0", "target_file_mb"),
                                       ("keep_superseded_minutes = -1", "keep_superseded_minutes"),
                                       ("after_run = maybe", "after_run"), ("target_mb = 5", "target_mb")])
def test_a_bad_compaction_key_is_named(tmp_path, line, key):
    with pytest.raises(ConfigError, match=rf"\[compaction\] {key}:"):
        load(tmp_path, line)


def test_etl_compact_with_a_bad_key_exits_2_naming_it(tmp_path):
    path = tmp_path / "job.ini"
    path.write_text(minimal_ini(SCHEMA, sections="[compaction]\nmin_files = 1\n"))
    done = subprocess.run([sys.executable, "-m", "etl", "compact", "--config", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "[compaction] min_files" in done.stderr, done.stderr


def test_a_plan_that_folds_partials_round_trips_and_names_each_folded_partial():
    """A merged file's partial is named by it; it folds the partials of the merged file's inputs,
    each named by its input (a batch's file: its range's, a merged file: its own)."""
    inputs = (batch_file(0, 0, 6), batch_file(0, 6, 12), batch_file(1, 0, 3), batch_file(1, 3, 9))
    outputs = plan_outputs(list(inputs), 10_000)
    fold = PartialsFold("per_minute", "per_minute_partials", "dt=x/hour=1", ("ts_minute", "action"),
                        (("events", "sum"), ("first_seen", "min")), (outputs[1].name,))
    plan = replace(CompactionPlan(3, TableKind.MAIN, "dt=x/hour=1", "dt=x/hour=1", compacted_folder("dt=x/hour=1", 3),
                                  inputs, outputs, "2026-11-24T10:00:00+00:00", "me"), partials=(fold,))
    assert CompactionPlan.from_json(json.loads(dump(plan.to_json()))) == plan
    (name, folded), = fold.partials(plan)  # only the outputs of its route's topics: partition 1's here
    assert name == partial_of(outputs[1].name) == outputs[1].name.replace(".orc", ".parquet")
    assert folded == tuple(partial_of(f.name) for f in inputs[2:]) and fold.inputs(plan) == list(folded)
    assert "partials" not in _switched_plan().to_json()  # a plan without rollups is stored as before
