"""A routed job's binding (etl.model.route_binding): stored as JSON beside a one-table job's
Target, and compared with the config's routes at every run; and the tables' file format, which
the binding and the metastore hold and a config may not change."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from etl.config import load_config
from etl.config.model import HiveFormat
from etl.config.routes import FieldSplit, RouteConfig
from etl.config.topic_pattern import TopicPattern
from etl.model.binding import BindingMismatch, Target, check_format, stored_format
from etl.model.route_binding import (BoundRoute, RouteBinding, binding_diff, check_job_binding, from_one_table,
                                     is_route_binding)
from etl.ops.job_tables import job_tables
from etl.sink.warehouse import Warehouse
from tests.harness.config_file import minimal_ini
from tests.harness.paths import EVENTS_SCHEMA


def _bound(*routes: RouteConfig, root: str = "hdfs:///wh/analytics.db", rejected: str = "rejected") -> RouteBinding:
    return RouteBinding("analytics", root, rejected, f"{root}/{rejected}", tuple(BoundRoute.of(r) for r in routes))


def _route(name, table, topics=(), pattern=None, split=None) -> RouteConfig:
    return RouteConfig(name, table, Path("t.sql"), tuple(topics), TopicPattern(pattern) if pattern else None, split)


RAW = _route("raw", "raw_{topic}", pattern=r"app\..*")
CLICKS = _route("clicks", "clicks", ["events"], split=FieldSplit("kind", ("click",)))
REST = _route("rest", "events_other", ["events"], split=FieldSplit("kind", (), takes_the_rest=True))


def test_a_route_binding_round_trips_through_json_and_is_told_from_a_target():
    binding = _bound(RAW, CLICKS, REST)
    raw = binding.to_json()
    assert RouteBinding.from_json(raw) == binding and is_route_binding(raw)
    assert not is_route_binding(Target("analytics", "events", "hdfs:///wh/events", "hdfs:///wh/events_r").to_json())
    assert raw["routes"][2] == {"name": "rest", "table": "events_other", "field": "kind", "values": ["*"],
                                "topics": ["events"]}
    assert binding.location("clicks") == "hdfs:///wh/analytics.db/clicks"


def test_the_same_routes_make_no_difference_and_a_new_topic_for_a_pattern_is_none_either():
    assert not binding_diff(_bound(RAW, CLICKS, REST), _bound(RAW, CLICKS, REST), committed=["app.a", "events"])
    wider = _route("raw", "raw_{topic}", pattern=r"(app|web)\..*")
    assert not binding_diff(_bound(RAW), _bound(wider), committed=["app.a"])


def test_added_removed_and_changed_routes_and_moved_topics_are_each_named():
    other_table = _route("clicks", "clicks_v2", ["events"], split=FieldSplit("kind", ("click",)))
    diff = binding_diff(_bound(RAW, CLICKS, REST), _bound(other_table, REST, _route("db", "db", ["db1"])),
                        committed=["app.a", "events", "db1"])
    assert [r.name for r in diff.added] == ["db"] and [r.name for r in diff.removed] == ["raw"]
    assert [(old.table, new.table) for old, new in diff.changed] == [("clicks", "clicks_v2")]
    assert diff.moved == ("events", "db1") and diff.stopped == ("app.a",)
    assert "changed: [route clicks] -> clicks, kind in (click) becomes [route clicks] -> clicks_v2, kind in (click)" \
        in diff.describe()


def test_a_committed_topic_taken_by_another_route_is_moved_even_when_no_route_changed_its_shape():
    first = _route("a", "a", ["t1", "t2"])
    second = _route("b", "b", ["t3"])
    diff = binding_diff(_bound(first, second), _bound(_route("a", "a", ["t1"]), _route("b", "b", ["t3", "t2"])),
                        committed=["t1", "t2", "t3"])
    assert diff.moved == ("t2",) and not (diff.added or diff.removed or diff.changed)


def test_another_database_folder_or_rejected_table_is_a_move_of_the_whole_job():
    diff = binding_diff(_bound(RAW), _bound(RAW, rejected="rejects"), committed=[])
    assert diff and "rejected rows in rejected) becomes analytics" in diff.describe()[0]


def test_a_one_table_job_takes_routes_that_keep_its_topics_whole_in_its_table_and_its_folders():
    one = Target("analytics", "events", "hdfs:///wh/analytics.db/events", "hdfs:///wh/analytics.db/rejected")
    keeps = _bound(_route("events", "events", ["events", "orders"]), RAW)
    assert from_one_table(one, keeps, committed=["events", "orders"]) == []
    said = from_one_table(one, _bound(CLICKS, REST, _route("orders", "orders", ["orders"])),
                          committed=["events", "orders"])
    assert said == ["topic events's records were loaded into events, and the routes would send them to clicks, "
                    "events_other",
                    "topic orders's records were loaded into events, and the routes would send them to orders"]
    assert from_one_table(one, keeps, committed=["gone"]) == [
        "topic gone's records were loaded into events, and the routes would send them to no table"]
    elsewhere = from_one_table(one, _bound(_route("events", "events", ["events"]), root="hdfs:///other.db",
                                           rejected="events_rejected"), committed=["events"])
    assert [problem.split(",")[0].split(" at ")[0] for problem in elsewhere] == [
        "the routes put the job's tables in analytics", "the rejected table events_rejected is"]


@pytest.mark.parametrize("input_format, stored", [
    ("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat", HiveFormat.PARQUET),
    ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat", HiveFormat.ORC),
    ("org.apache.hadoop.mapred.TextInputFormat", None), (None, None),
])
def test_a_table_of_another_format_than_the_config_names_is_refused_naming_it(input_format, stored):
    """A table's files are all of one format ([hive] format); the metastore says which a table
    is stored as, and a config naming another is refused before anything is touched."""
    assert stored_format(input_format) is stored
    for wanted in HiveFormat:
        if wanted is stored:
            check_format("db", "events", input_format, wanted, "[hive] format")
            continue
        said = re.escape(str(stored.value if stored else input_format))
        refused = rf"table db\.events is stored as {said}, but \[hive\] format = {wanted.value}: a table's files"
        with pytest.raises(BindingMismatch, match=rf"{refused} are all of one format.*Nothing was touched"):
            check_format("db", "events", input_format, wanted, "[hive] format")


def test_a_binding_records_its_tables_format_and_a_config_naming_another_is_refused_at_every_run():
    """Stored as before formats were for Parquet (a binding stored then reads as Parquet); ORC
    said. A config naming another format than the binding is refused, naming the tables, before
    the run reads anything (etl.job.driver checks the binding first, even with nothing to load)."""
    config = SimpleNamespace(job=SimpleNamespace(name="j"), path="etl.ini")
    one = Target("analytics", "events", "hdfs:///wh/events", "hdfs:///wh/events_r")
    assert "file_format" not in one.to_json() and Target.from_json(one.to_json()) == one
    orc = replace(one, file_format=HiveFormat.ORC)
    assert orc.to_json()["file_format"] == "orc" and Target.from_json(orc.to_json()) == orc
    with pytest.raises(BindingMismatch, match=r"table analytics\.events is stored as orc, but \[hive\] format = "
                                              r"parquet: a table's files are all of one format"):
        check_job_binding(orc, one, config, lambda: ())
    with pytest.raises(BindingMismatch, match="is bound to analytics.elsewhere"):  # a move is a move, whatever format
        check_job_binding(replace(orc, table="elsewhere"), one, config, lambda: ())
    routes = _bound(RAW, CLICKS, REST)
    assert "file_format" not in routes.to_json() and RouteBinding.from_json(routes.to_json()) == routes
    routed_orc = replace(routes, file_format=HiveFormat.ORC)
    assert RouteBinding.from_json(routed_orc.to_json()) == routed_orc
    with pytest.raises(BindingMismatch, match=r"job j's tables are stored as parquet, but \[hive\] format = orc"):
        check_job_binding(routes, routed_orc, config, lambda: ())


def test_commands_that_inspect_the_tables_refuse_a_config_naming_another_format(tmp_path):
    """`etl verify`, `recover` and `reset-offsets` read the tables' files in the config's format:
    in the other one every file would look missing, and a recovery would rewrite them all."""
    ini = tmp_path / "job.ini"
    ini.write_text(minimal_ini(EVENTS_SCHEMA, kafka="topics = events", hive="format = orc"))
    config = load_config(ini)
    warehouse = Warehouse.of(config)
    bound = Target.of(config, warehouse)
    assert [name for name, _ in job_tables(config, warehouse, (), None, bound)] == ["t"]
    with pytest.raises(BindingMismatch, match=r"job j1's tables are stored as parquet, but \[hive\] format = orc"):
        job_tables(config, warehouse, (), None, replace(bound, file_format=HiveFormat.PARQUET))
