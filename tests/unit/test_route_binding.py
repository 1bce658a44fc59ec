"""A routed job's binding (etl.model.route_binding): stored as JSON beside a one-table job's
Target, and compared with the config's routes at every run."""
from __future__ import annotations

from pathlib import Path

from etl.config.routes import FieldSplit, RouteConfig
from etl.config.topic_pattern import TopicPattern
from etl.model.binding import Target
from etl.model.route_binding import BoundRoute, RouteBinding, binding_diff, from_one_table, is_route_binding


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
