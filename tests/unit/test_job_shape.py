"""A job's shape (etl.model.shape): what differs between a one-table job and a routed one is asked
in one place. Whether a config has [route] sections (`Routes.implicit`) is read only by the config's
own routes module and by `shape_of`; everything else asks the shape. And the two shapes, side by
side: where a one-table job's table is, what its plans and ledgers call it, which tables a command
inspects, and what each says when `etl bind --data-moved` or a preview asks."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from etl.config import load_config
from etl.model.batch import Batch, BatchState, OffsetRange
from etl.model.binding import Target
from etl.model.route_binding import RouteBinding
from etl.model.shape import ONE_TABLE, OneTable, Routed, shape_of
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import TWO_ROUTES, minimal_ini, routed_ini
from tests.harness.paths import EVENTS_SCHEMA

PACKAGE = Path(__file__).resolve().parents[2] / "etl"
# The modules that may ask whether a config has [route] sections.
ASKS_THE_SHAPE = {"config/routes.py", "model/shape.py"}


def _readers_of_implicit() -> set[str]:
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.Attribute) and node.attr == "implicit" for node in ast.walk(tree)):
            readers.add(path.relative_to(PACKAGE).as_posix())
    return readers


def test_only_the_routes_module_and_the_shape_ask_whether_a_config_has_routes():
    assert _readers_of_implicit() == ASKS_THE_SHAPE


@pytest.fixture
def one_table(tmp_path):
    (tmp_path / "one.ini").write_text(minimal_ini(EVENTS_SCHEMA, kafka="topics = a, b"))
    return load_config(tmp_path / "one.ini")


@pytest.fixture
def routed(tmp_path):
    (tmp_path / "routed.ini").write_text(routed_ini(TWO_ROUTES))
    return load_config(tmp_path / "routed.ini")


def _batch(tables: dict | None = None) -> Batch:
    ranges = (OffsetRange("orders", 0, 0, 5, 0), OffsetRange("app.x", 0, 0, 3, 0))
    return Batch(1, BatchState.PLANNED, "2026-11-26T10:00:00+00:00", {"dt": "2026-11-26", "hour": "10"}, ranges,
                 tables=tables or {})


def test_the_config_chooses_the_shape(one_table, routed):
    assert type(shape_of(one_table)) is OneTable and type(shape_of(routed)) is Routed


def test_a_one_table_job_keeps_its_table_in_the_jobs_folders_and_names_it_nowhere(one_table):
    shape, warehouse = shape_of(one_table), Warehouse.of(one_table)
    assert isinstance(shape.binding(warehouse), Target)
    assert shape.table_warehouse(warehouse, "t") is warehouse
    assert shape.plan_name("t") is None and shape.marker_tables(_batch()) == ONE_TABLE
    assert shape.held_tables(warehouse, lambda: pytest.fail("a one-table job reads no offsets for its table"), None,
                             lambda: pytest.fail("nor its binding")) == [("t", warehouse)]
    assert shape.legacy_named(warehouse) == [warehouse] and shape.preview_folders(warehouse) is warehouse
    assert shape.topic_routing(lambda routes: pytest.fail("a one-table job routes no topic")) is None
    assert shape.planned(_batch(), lambda: pytest.fail("nor plans its tables")) == _batch()
    assert shape.data_moved_refusal() is None and shape.describe_tables() == "t"


def test_a_routed_jobs_tables_are_its_routes_folders_named_by_its_plans(routed):
    shape, warehouse = shape_of(routed), Warehouse.of(routed)
    assert isinstance(shape.binding(warehouse), RouteBinding)
    assert shape.table_warehouse(warehouse, "orders") == warehouse.for_table("orders")
    batch = _batch({"orders": ["orders"], "app.x": ["raw_app_x"]})
    assert shape.plan_name("orders") == "orders" and shape.marker_tables(batch) == ("orders", "raw_app_x")
    held = shape.held_tables(warehouse, lambda: ["orders", "app.x"], None, lambda: None)
    assert held == [("orders", warehouse.for_table("orders")), ("raw_app_x", warehouse.for_table("raw_app_x"))]
    assert shape.legacy_named(warehouse) == [] and shape.preview_folders(warehouse) is None
    assert shape.topic_routing(lambda routes: routes) is routed.routes
    assert "--data-moved" in (shape.data_moved_refusal() or "")
    assert shape.describe_tables() == "the tables of 2 routes"
