"""A plan's routing (etl.model.routes): each topic's tables, and why a topic is not loaded: shared
without a split, a templated name that is no Hive name, two topics making one table."""
from __future__ import annotations

from pathlib import Path

from etl.config.routes import FieldSplit, RouteConfig, Routes
from etl.config.topic_pattern import TopicPattern
from etl.model.routes import TopicSplit, route_topics

DDL = Path("events.sql")


def _route(name: str, table: str, topics=(), pattern=None, split=None) -> RouteConfig:
    return RouteConfig(name=name, table=table, schema_file=DDL, topics=tuple(topics),
                       topics_regex=TopicPattern(pattern) if pattern else None, split=split)


def _why(plan, topic: str) -> str:
    [why] = [u.why for u in plan.unroutable if u.topic == topic]
    return why


def test_a_template_gives_each_topic_its_table_and_a_fixed_table_takes_several_topics():
    routes = Routes((_route("raw", "raw_{topic}", pattern=r"app\..*"), _route("ops", "ops", topics=("db1", "db2"))))
    plan = route_topics(routes, ["app.Home", "app.cart-v2", "db1", "db2", "other"], committed=(),
                        rejected_table="rejected")
    assert {t: r.tables for t, r in plan.topics.items()} == {
        "app.Home": ("raw_app_home",), "app.cart-v2": ("raw_app_cart_v2",), "db1": ("ops",), "db2": ("ops",)}
    assert plan.unroutable == () and plan.tables() == {"raw_app_home", "raw_app_cart_v2", "ops"}
    assert plan.topics["db1"].routes == ("ops",) and plan.topics["db1"].split is None


def test_a_topic_split_by_a_field_knows_each_values_table_and_the_rest():
    routes = Routes((_route("clicks", "clicks", ["events"], split=FieldSplit("kind", ("click", "tap"))),
                     _route("views", "views", ["events"], split=FieldSplit("kind", ("view",)))))
    split = route_topics(routes, ["events"], (), "rejected").topics["events"].split
    assert split == TopicSplit("kind", {"click": "clicks", "tap": "clicks", "view": "views"})
    assert (split.table_of("tap"), split.table_of("buy"), split.table_of(None)) == ("clicks", None, None)
    rest = Routes(routes.routes + (_route("other", "other_{topic}", ["events"], split=FieldSplit("kind", (), True)),))
    split = route_topics(rest, ["events"], (), "rejected").topics["events"].split
    assert (split.table_of("buy"), split.table_of(None), split.table_of("view")) == ("other_events", "other_events",
                                                                                     "views")


def test_a_topic_two_patterns_take_whole_is_not_loaded_and_the_others_are():
    routes = Routes((_route("a", "a_{topic}", pattern="t.*"), _route("b", "b_{topic}", pattern=".*1")))
    plan = route_topics(routes, ["t1", "t2", "x1"], (), "rejected")
    assert set(plan.topics) == {"t2", "x1"}
    assert "[route a] takes all of topic 't1', which [route a] and [route b] choose" in _why(plan, "t1")


def test_a_templated_name_that_is_no_hive_name_leaves_that_topic_out_saying_how_to_mend_it():
    plan = route_topics(Routes((_route("raw", "{topic}", pattern=".*"),)), ["9lives", "ok"], (), "rejected")
    assert set(plan.topics) == {"ok"}
    assert "'9lives' is not a Hive table name" in _why(plan, "9lives") and "give the template a prefix" in _why(
        plan, "9lives")


def test_two_topics_making_one_table_load_neither_unless_one_has_loaded_it_already():
    routes = Routes((_route("raw", "{topic}", pattern=".*"),))
    plan = route_topics(routes, ["a.b", "a-b", "c"], committed=(), rejected_table="rejected")
    assert set(plan.topics) == {"c"}
    assert _why(plan, "a.b") == "its table 'a_b' is also the table of topic a-b; no topic is preferred to another"
    plan = route_topics(routes, ["a.b", "a-b"], committed=["a-b"], rejected_table="rejected")
    assert set(plan.topics) == {"a-b"} and "a-b has loaded it and keeps it" in _why(plan, "a.b")
    # a committed topic Kafka no longer lists still holds its table against a newcomer
    plan = route_topics(routes, ["a.b"], committed=["a-b"], rejected_table="rejected")
    assert plan.topics == {} and "a-b has loaded it and keeps it" in _why(plan, "a.b")
    plan = route_topics(routes, ["a.b", "a-b"], committed=["a.b", "a-b"], rejected_table="rejected")
    assert plan.topics == {} and "each of them has loaded it" in _why(plan, "a-b")


def test_a_templated_name_that_is_a_fixed_table_or_the_rejected_table_is_refused():
    routes = Routes((_route("raw", "{topic}", pattern="[a-z]+"), _route("ops", "ops", topics=("db-1",))))
    plan = route_topics(routes, ["ops", "rejected", "db-1", "fine"], (), "rejected")
    assert set(plan.topics) == {"db-1", "fine"}
    assert _why(plan, "ops") == "its table 'ops' is the table of [route ops]"
    assert _why(plan, "rejected") == "its table 'rejected' is the job's rejected table"


def test_a_retired_table_stays_its_topics_and_no_other_topic_loads_into_it():
    """`retired`: the tables `etl bind` retired (--stop-loading, --move-loaded), each with the topics
    whose records it holds. No current route's table counts them, yet they are taken."""
    routes = Routes((_route("raw", "{topic}", pattern="raw_.*"), _route("fixed", "raw_b", topics=("b2", "b"))))
    plan = route_topics(routes, ["raw_rt1-rej", "raw_ok", "b2", "b"], committed=["rt1.rej", "b"],
                        rejected_table="rejected", retired={"raw_rt1_rej": {"rt1.rej"}, "raw_b": {"b"}})
    assert set(plan.topics) == {"raw_ok", "b"}  # b goes on into its own retired table
    assert _why(plan, "raw_rt1-rej") == (
        "its table 'raw_rt1_rej' holds the records of topic rt1.rej, which `etl bind` stopped loading or moved: "
        "the table stays that topic's, and no other topic loads into it; give topic raw_rt1-rej a table of its "
        "own ([route raw] table), or a topics_regex that leaves it out")
    assert _why(plan, "b2").startswith("its table 'raw_b' holds the records of topic b,") and _why(plan, "b2").endswith(
        "give topic b2 a table of its own ([route fixed] table), or b2 out of its topics")
