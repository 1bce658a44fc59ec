"""What `etl verify` and `etl status` say of compactions per table (etl.ops.compaction_check,
etl.ops.status), as pure functions: a routed table's plan is looked for in its own folders, and
a metastore switched ahead of ZooKeeper excuses only its own table's wrong_location."""
from __future__ import annotations

import posixpath

from etl.config import load_config
from etl.model.compaction import CompactionState, TableKind
from etl.ops.compaction_check import check_superseded, switching
from etl.ops.coverage import Problem
from etl.ops.inventory import Inventory
from etl.ops.status import render_status
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import TWO_ROUTES, routed_ini
from tests.harness.store_contract import compaction

P = "dt=2026-01-01/hour=00"


def _warehouse(tmp_path) -> Warehouse:
    (tmp_path / "r.ini").write_text(routed_ini(TWO_ROUTES))
    return Warehouse.of(load_config(tmp_path / "r.ini"))


def test_a_routed_plans_files_are_expected_in_its_own_tables_folders_only(tmp_path):
    warehouse = _warehouse(tmp_path)
    plan = compaction(1, P, table_name="orders")
    orders, clicks = warehouse.for_table("orders").root(TableKind.MAIN), \
        warehouse.for_table("raw_x").root(TableKind.MAIN)
    waiting = posixpath.join(orders, P, "a.parquet")
    assert check_superseded(Inventory(superseded=[waiting]), [plan], warehouse) == []
    stray = posixpath.join(clicks, P, "a.parquet")
    [problem] = check_superseded(Inventory(superseded=[waiting, stray]), [plan], warehouse)
    assert problem.kind == "superseded_file" and stray in problem.detail and waiting not in problem.detail


def test_only_the_switching_tables_wrong_location_is_excused(tmp_path):
    warehouse = _warehouse(tmp_path)
    plan = compaction(1, P, table_name="orders").advanced(CompactionState.WRITTEN)
    wrong = [Problem("wrong_location", P, "registered elsewhere", "look")]
    for name in ("orders", "raw_x"):
        view = warehouse.for_table(name)
        at_target = {P: view.hive_uri(posixpath.join(view.root(TableKind.MAIN), plan.target))}
        kept = switching(wrong, TableKind.MAIN, name, [plan], at_target, view)
        assert kept == ([] if name == "orders" else wrong)
    rejected_plan = compaction(2, P, table=TableKind.REJECTED).advanced(CompactionState.WRITTEN)
    at_target = {P: warehouse.hive_uri(posixpath.join(warehouse.rejected_root, rejected_plan.target))}
    assert switching(wrong, TableKind.REJECTED, None, [plan, rejected_plan], at_target, warehouse) == []
    assert switching(wrong, TableKind.MAIN, "orders", [rejected_plan], at_target,
                     warehouse.for_table("orders")) == wrong


def _status(compacted: dict) -> dict:
    return {"job": "j", "total_lag": 0, "lock": None, "partitions": [], "topics_not_loaded": [], "last_batch": None,
            "events": [], "markers": {"enabled": False, "late_count": 0}, "compactions": [],
            "compacted_partitions": compacted}


def test_status_shows_each_routed_tables_compacted_partitions():
    assert "compacted partitions: 2 of the table, 1 of the rejected table" in \
        render_status(_status({"main": 2, "rejected": 1}))
    assert "compacted partitions: 3 of orders, 1 of raw_x, 0 of the rejected table" in \
        render_status(_status({"main": 0, "rejected": 0, "tables": {"orders": 3, "raw_x": 1}}))
    assert "compacted partitions" not in render_status(_status({"main": 0, "rejected": 0}))
