"""[route <name>] sections (etl.config.routes): what each key takes, the one rule for a templated
table name, and every refusal, each naming its section and key."""
from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from etl.config import load_config
from etl.config.model import DecoderKind, DimensionConfig, DimensionKind
from etl.config.routes import FieldSplit, parse_routes, sharing_problem, table_name
from etl.errors import ConfigError
from etl.job.assemble import route_specs
from tests.harness.config_file import TWO_ROUTES as ROUTES, minimal_ini, routed_ini
from tests.harness.paths import EVENTS_SCHEMA, REPO

ACCESS_LOG_SCHEMA = REPO / "warehouse_schema" / "access_log.sql"


def _avro_schema_file(path: Path):
    raise AssertionError("no test here reads an .avsc")


def _dimension(name: str, joined: bool = True) -> DimensionConfig:
    return DimensionConfig(name=name, source=f"hive:d.{name}", kind=DimensionKind.HIVE, path=None, format=None,
                           table=f"d.{name}", join_key="code" if joined else None,
                           dimension_key="code" if joined else None, columns=(f"{name}_name",))


def _routes(tmp_path: Path, text: str, dimensions=(), rejected_table="events_rejected"):
    (tmp_path / "clicks.sql").write_text("CREATE TABLE x (a string)")
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    return parse_routes(parser, tmp_path / "etl.ini", DecoderKind.JSON, tuple(dimensions), rejected_table,
                        _avro_schema_file)


def _refused(tmp_path: Path, text: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as raised:
        _routes(tmp_path, text, **kwargs)
    return str(raised.value)


@pytest.mark.parametrize(("template", "topic", "table"), [
    ("{topic}", "App.Clicks-v2", "app_clicks_v2"),
    ("raw_{topic}", "orders", "raw_orders"),
    ("{topic}_v1", "a.b", "a_b_v1"),
    ("Events", "anything", "events"),
])
def test_a_templated_name_is_lower_cased_and_every_character_hive_cannot_take_becomes_an_underscore(
        template, topic, table):
    assert table_name(template, topic) == table


@pytest.mark.parametrize(("topic", "why"), [("9lives", "a letter or _ first"), ("t" * 129, "at most 128")])
def test_a_templated_name_that_is_no_hive_name_is_refused_never_cut_short(topic, why):
    with pytest.raises(ValueError, match=why):
        table_name("{topic}", topic)


def test_a_route_per_topic_and_a_split_of_one_topic_by_a_field(tmp_path):
    routes = _routes(tmp_path, """
[route raw]
topics_regex = app\\..*
table = raw_{topic}
schema = clicks.sql

[route clicks]
topics = events
field = event_type
values = click, tap
table = clicks
schema = clicks.sql
dimensions = countries

[route others]
topics = events
field = Event_Type
values = *
table = events_other
schema = clicks.sql
""", dimensions=[_dimension("countries")])
    raw, clicks, others = routes.routes
    assert not routes.implicit
    assert raw.templated and raw.table_for("app.Home") == "raw_app_home" and raw.split is None
    assert raw.chooses("app.x") and not raw.chooses("appx")
    assert clicks.split == FieldSplit("event_type", ("click", "tap")) and clicks.dimensions == ("countries",)
    assert others.split == FieldSplit("event_type", (), takes_the_rest=True)
    assert clicks.schema_file == tmp_path / "clicks.sql" and clicks.decoder is DecoderKind.JSON
    assert routes.of_topic("events") == (clicks, others) and routes.by_name("raw") is raw


ONE = "[route r]\ntopics = t\ntable = t\nschema = clicks.sql\n"


@pytest.mark.parametrize(("text", "said"), [
    (ONE + "tabel = x\n", "[route r] tabel: unknown key"),
    ("[route r-1]\ntopics = t\ntable = t\nschema = clicks.sql\n", "'r-1' is not a valid route name"),
    (ONE + "topics_regex = t.*\n", "[route r] topics_regex: set either topics"),
    ("[route r]\ntable = t\nschema = clicks.sql\n", "[route r] topics: is required"),
    ("[route r]\ntopics = t\nschema = clicks.sql\n", "[route r] table: is required"),
    ("[route r]\ntopics = t\ntable = raw_{name}\nschema = clicks.sql\n", "the only placeholder"),
    ("[route r]\ntopics = t\ntable = 1{topic}\nschema = clicks.sql\n", "[route r] table: '1{topic}' is not valid"),
    ("[route r]\ntopics = t\ntable = t-1\nschema = clicks.sql\n", "not a Hive table name"),
    ("[route r]\ntopics = t\ntable = t\nschema = missing.sql\n", "[route r] schema: 'missing.sql' is not valid"),
    (ONE + "field = kind\n", "[route r] values: is required with field"),
    (ONE + "values = a\n", "[route r] field: is required with values"),
    (ONE + "field = kind\nvalues = a, *\n", "* stands alone"),
    (ONE + "field = kind\nvalues = a, a\n", "a value is listed twice"),
    (ONE + "dimensions = rates\n", "no [dimension rates] section"),
    (ONE + "decoder = xml\n", "[route r] decoder: 'xml' is not one of"),
    ("[route r]\ntopics = t\ntable = t\nschema = registry\n", "[route r] schema: registry derives"),
    ("[route r]\ntopics = t, u\ntable = t\nschema = registry\ndecoder = avro\n", "registry follows one subject"),
    (ONE + "transform = not a function\n", "[route r] transform:"),
])
def test_a_bad_route_key_is_refused_naming_its_section_and_key(tmp_path, text, said):
    assert said in _refused(tmp_path, text)


@pytest.mark.parametrize("second", ["route  a", "route a "])
def test_two_sections_that_name_one_route_are_refused_naming_both(tmp_path, second):
    """A route's name is its section's name stripped: two sections may differ by whitespace alone,
    and would be two routes of one name (bound, and looked up, by name)."""
    text = (f"[route a]\ntopics_regex = x[.].*\ntable = {{topic}}\nschema = clicks.sql\n"
            f"[{second}]\ntopics_regex = y[.].*\ntable = {{topic}}\nschema = clicks.sql\n")
    with pytest.raises(ConfigError) as raised:
        _routes(tmp_path, text)
    assert raised.value.exit_code == 2
    assert f"[route a] and [{second}] both name route 'a'" in str(raised.value), raised.value


def test_a_templated_route_from_the_registry_makes_a_table_per_subject(tmp_path):
    [route] = _routes(tmp_path, "[route r]\ntopics_regex = t.*\ntable = {topic}\nschema = registry\n"
                                "decoder = protobuf\n").routes
    assert route.from_registry and route.decoder is DecoderKind.PROTOBUF


def _two(first: str, second: str) -> str:
    return (f"[route a]\ntable = a\nschema = clicks.sql\n{first}\n"
            f"[route b]\ntable = b\nschema = clicks.sql\n{second}\n")


@pytest.mark.parametrize(("first", "second", "said"), [
    ("topics = t", "topics = t", "[route a] takes all of topic 't'"),
    ("topics = t\nfield = k\nvalues = x", "topics_regex = t|u", "[route b] takes all of topic 't'"),
    ("topics = t\nfield = k\nvalues = x", "topics = t\nfield = j\nvalues = y", "by different fields"),
    ("topics = t\nfield = k\nvalues = *", "topics = t\nfield = k\nvalues = *", "both take the rest"),
    ("topics = t\nfield = k\nvalues = x, y", "topics = t\nfield = k\nvalues = y", "both take k = 'y'"),
    ("topics = t\nfield = k\nvalues = x", "topics = t\nfield = k\nvalues = y\ndecoder = access_log",
     "different decoders"),
])
def test_routes_that_share_a_topic_must_split_it_by_one_field_each_value_to_one_route(tmp_path, first, second, said):
    assert said in _refused(tmp_path, _two(first, second))


def test_one_table_is_named_by_one_route_and_never_by_the_rejected_table(tmp_path):
    text = ("[route a]\ntopics = t\ntable = x\nschema = clicks.sql\n"
            "[route b]\ntopics = u\ntable = X\nschema = clicks.sql\n")
    assert "[route b] table: 'x' is already the table of [route a]" in _refused(tmp_path, text)
    said = _refused(tmp_path, ONE.replace("table = t", "table = events_rejected"))
    assert "[route r] table: 'events_rejected' is the job's rejected table" in said


def test_a_topic_two_patterns_both_match_is_found_at_plan_time_by_the_same_rule(tmp_path):
    # which topics two patterns share is known only once Kafka lists them: the config passes
    routes = _routes(tmp_path, "[route a]\ntopics_regex = t.*\ntable = a\nschema = clicks.sql\n"
                               "[route b]\ntopics_regex = .*1\ntable = b\nschema = clicks.sql\n")
    assert sharing_problem("t2", routes.of_topic("t2")) is None
    assert "[route a] takes all of topic 't1'" in sharing_problem("t1", routes.of_topic("t1"))


# -- the whole config: [route] sections beside the others (etl.config.parse) ------------------

def _load(tmp_path: Path, job: str = "", kafka: str = "", hive: str = "rejected_table = rejects", sections: str = ""):
    path = tmp_path / "etl.ini"
    path.write_text(routed_ini(ROUTES + sections, job, kafka, hive))
    return load_config(path)


def test_a_config_with_routes_loads_its_routes_and_chooses_their_topics(tmp_path):
    config = _load(tmp_path)
    assert not config.routes.implicit and [r.name for r in config.routes.routes] == ["raw", "orders"]
    assert (config.hive.table, config.hive.schema_file, config.hive.rejected_table) == (None, None, "rejects")
    assert config.kafka.topics == () and config.kafka.topics_regex is not None
    assert [t for t in ("app.x", "orders", "refunds", "ordersx", "appx") if config.kafka.topics_regex.fullmatch(t)] \
        == ["app.x", "orders", "refunds"]
    view = config.for_table(config.routes.by_name("raw"), "raw_app_x")
    assert (view.hive.the_table, view.hive.the_schema_file, view.hive.rejected_table) == (
        "raw_app_x", EVENTS_SCHEMA, "rejects")
    with pytest.raises(ConfigError, match="handed the job's config instead of one table's view"):
        config.hive.the_table
    assert config.topics_chooser == "the [route] sections"  # not "[kafka] topics_regex", which it has none of


def test_routes_listing_topics_only_keep_a_list_of_topics(tmp_path):
    text = routed_ini(ROUTES).replace("topics_regex = app[.].*", "topics = app.a")
    (tmp_path / "etl.ini").write_text(text)
    kafka = load_config(tmp_path / "etl.ini").kafka
    assert (kafka.topics, kafka.topics_regex) == (("app.a", "orders", "refunds"), None)


@pytest.mark.parametrize(("where", "line", "said"), [
    ("hive", "rejected_table = rejects\ntable = t", "[hive] table: with [route] sections each route names its table"),
    ("hive", "rejected_table = rejects\nschema = x.sql", "[hive] schema: with [route] sections"),
    ("hive", "", "[hive] rejected_table: is required"),
    ("kafka", "topics = a", "[kafka] topics: each [route] chooses its topics"),
    ("job", "transform = etl.examples:minute_and_country", "[job] transform: with [route] sections each route"),
    ("sections", "[routes x]\ntopics = a", "unknown section [routes x]"),
])
def test_what_belongs_to_the_routes_is_refused_in_the_other_sections(tmp_path, where, line, said):
    kwargs = {"hive": "rejected_table = rejects", where: line}
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, **kwargs)
    assert said in str(raised.value)


def test_job_avro_schema_with_routes_is_refused_not_ignored(tmp_path):
    """No route takes [job] avro_schema as its default (a route's own is read, or none): with routes
    it was read, checked and then used by nothing."""
    schema = tmp_path / "event.avsc"
    schema.write_text('{"type": "record", "name": "E", "fields": [{"name": "id", "type": "string"}]}')
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, job=f"decoder = avro\navro_schema = {schema}", sections=REGISTRY)
    assert "[job] avro_schema: with [route] sections each route names its own avro_schema" in str(raised.value)


def test_a_route_that_reads_the_registry_needs_the_registry_section(tmp_path):
    with pytest.raises(ConfigError, match=r"\[schema_registry\] url: is required with decoder = protobuf in "
                                          r"\[route evs\]"):
        _load(tmp_path, sections=f"[route evs]\ntopics = evs\ntable = {{topic}}\nschema = {EVENTS_SCHEMA}\n"
                                 f"decoder = protobuf\n")


REGISTRY = "[schema_registry]\nurl = http://registry.invalid:8081\n\n"


def test_a_route_from_the_registry_is_built_now_beside_routes_with_ddl_files(tmp_path):
    config = _load(tmp_path, sections="[route evs]\ntopics = evs\ntable = {topic}\nschema = registry\n"
                                      "decoder = avro\n\n" + REGISTRY)
    route = config.routes.by_name("evs")
    assert route.from_registry and route.schema_file is None and route.table_for("evs") == "evs"
    assert config.partition_schema_file == EVENTS_SCHEMA  # the DDL routes' partitions, which it follows
    assert config.kafka.topics_regex is not None and config.kafka.topics_regex.fullmatch("evs")


def test_a_job_of_registry_routes_alone_partitions_by_default(tmp_path):
    path = tmp_path / "etl.ini"
    path.write_text(routed_ini("[route evs]\ntopics = evs\ntable = evs\nschema = registry\ndecoder = avro\n\n" +
                               REGISTRY))
    config = load_config(path)
    assert config.routes.by_name("evs").from_registry and config.partition_schema_file is None


def test_a_job_whose_every_route_follows_the_registry_by_a_pattern_is_refused(tmp_path):
    path = tmp_path / "etl.ini"
    path.write_text(routed_ini("[route evs]\ntopics_regex = evs.*\ntable = {topic}\nschema = registry\n"
                               "decoder = avro\n\n" + REGISTRY))
    with pytest.raises(ConfigError, match=r"\[route evs\] topics_regex: a job whose every route follows the Schema "
                                          r"Registry by a topics pattern is not built yet"):
        load_config(path)


def test_event_time_is_taken_by_routes_and_a_route_whose_ddl_lacks_the_column_is_refused_naming_its_schema(tmp_path):
    config = _load(tmp_path, hive="rejected_table = rejects\npartition_by = column:ts")
    assert config.hive.partitioning.event_column == "ts" and len(route_specs(config)) == 2
    without = f"\n[route logs]\ntopics = logs\ntable = logs\nschema = {ACCESS_LOG_SCHEMA}\n"
    config = _load(tmp_path, hive="rejected_table = rejects\npartition_by = column:ts", sections=without)
    with pytest.raises(ConfigError, match=r"partition_by: column:ts is not a column of the table \(.*access_log.sql"):
        route_specs(config)


def test_compaction_after_run_is_taken_by_a_job_with_routes(tmp_path):
    """Refused while `etl compact` took one table only; it compacts each routed table now
    (etl.ops.compact.compaction_tables), so `etl run` no longer fails after its commit."""
    assert _load(tmp_path, sections="\n[compaction]\nafter_run = true\n").compaction.after_run


def test_markers_and_metrics_are_taken_by_a_job_with_routes(tmp_path):
    config = _load(tmp_path, hive="rejected_table = rejects\nsuccess_markers = true\nsuccess_marker_delay_seconds = 0",
                   sections="\n[metrics]\ntextfile = /tmp/x.prom\n")
    assert config.hive.success_markers.enabled and config.hive.success_markers.delay_seconds == 0
    assert config.metrics.enabled and not config.routes.implicit


def test_a_one_table_config_is_one_implicit_route_as_before(tmp_path):
    path = tmp_path / "etl.ini"
    path.write_text(minimal_ini(EVENTS_SCHEMA, kafka="topics = a, b",
                                job="transform = etl.examples:minute_and_country"))
    config = load_config(path)
    [route] = config.routes.routes
    assert config.routes.implicit and (route.name, route.table, route.schema_file, route.topics) == (
        "", "t", EVENTS_SCHEMA, ("a", "b"))
    assert route.transform == "etl.examples:minute_and_country" and config.hive.rejected_table == "t_rejected"
    assert (config.hive.the_table, config.kafka.topics) == ("t", ("a", "b"))
    assert config.topics_chooser == "[kafka] topics"


WITH_TRANSFORM = ONE + "transform = etl.examples:minute_and_country\n"


def test_a_route_lists_the_dimensions_it_joins_and_hands_to_its_transform(tmp_path):
    [route] = _routes(tmp_path, WITH_TRANSFORM + "dimensions = countries, tiers\n",
                      dimensions=[_dimension("countries"), _dimension("tiers", joined=False)]).routes
    assert route.dimensions == ("countries", "tiers") and route.transform == "etl.examples:minute_and_country"


@pytest.mark.parametrize(("text", "dimension", "said"), [
    (ONE, _dimension("countries"), "[dimension countries]: no [route] lists it in dimensions"),
    (ONE + "dimensions = tiers\n", _dimension("tiers", joined=False),
     "[route r] dimensions: [dimension tiers] has no join_key, so it is only handed to the route's transform, "
     "which is not set"),
    ("[route r]\ntopics = t\ntable = t\nschema = registry\ndecoder = avro\ndimensions = countries\n",
     _dimension("countries"), "[route r] dimensions: [dimension countries] fills columns by join_key, and a table "
                              "derived from the Schema Registry"),
])
def test_a_dimension_no_route_can_use_is_refused_naming_it(tmp_path, text, dimension, said):
    assert said in _refused(tmp_path, text, dimensions=[dimension])


def test_a_registry_route_may_hand_a_dimension_to_its_transform(tmp_path):
    text = ("[route r]\ntopics = t\ntable = t\nschema = registry\ndecoder = avro\ndimensions = tiers\n"
            "transform = etl.examples:minute_and_country\n")
    [route] = _routes(tmp_path, text, dimensions=[_dimension("tiers", joined=False)]).routes
    assert route.from_registry and route.dimensions == ("tiers",)


def test_a_missing_topic_is_named_by_the_route_section_and_key_that_choose_it(tmp_path):
    """A routed job has no [kafka] topics: what chooses a topic is its routes' topics or topics_regex."""
    from etl.source.topics import missing_topic_todo
    (tmp_path / "job.ini").write_text(routed_ini(ROUTES + f"[route more]\ntopics = returns\ntable = more\n"
                                                 f"schema = {EVENTS_SCHEMA}\nfield = k\nvalues = a\n"
                                                 f"[route rest]\ntopics = returns\ntable = rest\n"
                                                 f"schema = {EVENTS_SCHEMA}\nfield = k\nvalues = *\n"))
    config = load_config(tmp_path / "job.ini")
    assert missing_topic_todo(config.kafka, config.routes, "orders") == \
        "create it, or remove it from [route orders] topics"
    assert missing_topic_todo(config.kafka, config.routes, "app.gone") == (
        "it was deleted after [route raw] topics_regex matched it; run again")
    assert missing_topic_todo(config.kafka, config.routes, "returns") == (
        "create it, or remove it from [route more] topics and [route rest] topics")
    one = tmp_path / "one.ini"
    one.write_text(minimal_ini(EVENTS_SCHEMA))
    one_table = load_config(one)
    assert missing_topic_todo(one_table.kafka, None, "a") == "create it, or remove it from [kafka] topics"
